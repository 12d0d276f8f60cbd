package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version, commit and tag are set at build time by `make build` and
// `make release`: -ldflags "-X main.version=... -X main.commit=... -X
// main.tag=...". The build info's vcs stamp cannot be relied on: -trimpath
// release builds, GOFLAGS=-buildvcs=false and container builds without .git
// all drop it.
var (
	version = "dev"
	commit  = ""
	tag     = ""
)

// buildCommit returns the VCS revision the binary was built from: the
// ldflags stamp, else the build info's, else "unknown" (go run, tests).
func buildCommit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// versionInfo is `adk version --json`.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Tag is the nearest git tag the build descends from ("" without one).
	Tag  string `json:"tag"`
	Go   string `json:"go"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				b, err := json.Marshal(versionInfo{Version: version, Commit: buildCommit(), Tag: tag, Go: runtime.Version(),
					OS: runtime.GOOS, Arch: runtime.GOARCH})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {version, commit, tag, go, os, arch} as one JSON object")
	return cmd
}

// versionText is what `adk version` and `adk --version` print.
func versionText() string {
	return fmt.Sprintf("adk %s\ncommit %s\ngo %s %s/%s\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
