package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// composeFile is the part of deploy/compose.yaml the test reads.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Image       string   `yaml:"image"`
	Command     []string `yaml:"command"`
	Ports       []string `yaml:"ports"`
	Volumes     []string `yaml:"volumes"`
	Secrets     []string `yaml:"secrets"`
	ReadOnly    bool     `yaml:"read_only"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// parseAdkCommand parses args (a container's command, after the
// entrypoint `adk`) with the binary's own command tree: the subcommand
// must exist and every flag must be one of its flags with a valid value.
// Nothing runs. It returns the subcommand and its parsed flags.
func parseAdkCommand(t *testing.T, args []string) *cobra.Command {
	t.Helper()
	root := newRootCmd(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Fatalf("adk %s: no such command (%v)", strings.Join(args, " "), err)
	}
	if err := cmd.ParseFlags(joinBoolArgs(root, rest)); err != nil {
		t.Fatalf("adk %s: %v", strings.Join(args, " "), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Fatalf("adk %s: %v", strings.Join(args, " "), err)
	}
	return cmd
}

// flagValue is a parsed flag's value as given ("" when not set).
func flagValue(t *testing.T, cmd *cobra.Command, name string) string {
	t.Helper()
	f := cmd.Flags().Lookup(name)
	if f == nil {
		t.Fatalf("adk %s has no --%s", cmd.Name(), name)
	}
	if !f.Changed {
		return ""
	}
	return f.Value.String()
}

// TestDeployCompose checks deploy/compose.yaml: NATS with JetStream, three
// coordinators peered with each other, two allowlisted workers running
// the README's example agent, a store node and the gateway; every adk
// command line parses with the binary's own flags, and every adk service
// is health-checked with `adk probe` on its --metrics-addr.
func TestDeployCompose(t *testing.T) {
	root := repoRoot(t)
	deploy := filepath.Join(root, "deploy")
	data, err := os.ReadFile(filepath.Join(deploy, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}

	nats, ok := cf.Services["nats"]
	if !ok || !slices.Contains(nats.Command, "--jetstream") {
		t.Fatalf("no NATS service with --jetstream: %+v", nats)
	}
	if len(nats.Healthcheck.Test) == 0 {
		t.Error("the NATS service has no healthcheck")
	}

	byRole := map[string][]string{}
	cmds := map[string]*cobra.Command{}
	for name, s := range cf.Services {
		if name == "nats" {
			continue
		}
		if !strings.Contains(s.Image, "adk") || !s.ReadOnly {
			t.Errorf("%s: image %q read_only %v, want the adk image on a read-only root", name, s.Image, s.ReadOnly)
		}
		cmd := parseAdkCommand(t, s.Command)
		cmds[name] = cmd
		byRole[cmd.Name()] = append(byRole[cmd.Name()], name)
		if n := flagValue(t, cmd, "nats"); n != "nats://nats:4222" {
			t.Errorf("%s: --nats %q, want the nats service", name, n)
		}
		// The healthcheck is `adk probe` on this service's --metrics-addr,
		// and itself a valid adk command line.
		hc := s.Healthcheck.Test
		if len(hc) < 3 || hc[0] != "CMD" || hc[1] != "/usr/local/bin/adk" {
			t.Errorf("%s: healthcheck %q, want [CMD /usr/local/bin/adk probe ...]", name, hc)
			continue
		}
		probeCmd := parseAdkCommand(t, hc[2:])
		metrics := flagValue(t, cmd, "metrics-addr")
		if probeCmd.Name() != "probe" || metrics == "" || !slices.Contains(hc, "http://"+metrics+"/healthz") {
			t.Errorf("%s: healthcheck %q does not probe --metrics-addr %q /healthz", name, hc, metrics)
		}
	}
	for role, want := range map[string]int{"coordinator": 3, "worker": 2, "store": 1, "api": 1} {
		if got := len(byRole[role]); got != want {
			t.Errorf("%d %s services %v, want %d", got, role, byRole[role], want)
		}
	}

	// Coordinators: each bootstraps the same three voters, its own entry
	// being its --raft-addr, and allowlists exactly the worker services.
	var peers []string
	for _, name := range byRole["coordinator"] {
		c := cmds[name]
		id, raft := flagValue(t, c, "id"), flagValue(t, c, "raft-addr")
		peers = append(peers, id+"="+raft)
		if flagValue(t, c, "bootstrap") != "true" || flagValue(t, c, "data-dir") == "" {
			t.Errorf("%s: want --bootstrap and --data-dir", name)
		}
		if id != name || !strings.HasPrefix(raft, name+":") {
			t.Errorf("%s: --id %q --raft-addr %q, want the service's own name", name, id, raft)
		}
		if !slices.ContainsFunc(cf.Services[name].Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+flagValue(t, c, "data-dir")) }) {
			t.Errorf("%s: --data-dir is not a volume", name)
		}
	}
	slices.Sort(peers)
	workers := slices.Clone(byRole["worker"])
	slices.Sort(workers)
	for _, name := range byRole["coordinator"] {
		c := cmds[name]
		got := strings.Split(strings.Trim(flagValue(t, c, "peers"), "[]"), ",")
		slices.Sort(got)
		if !slices.Equal(got, peers) {
			t.Errorf("%s: --peers %v, want %v", name, got, peers)
		}
		allow := strings.Split(strings.Trim(flagValue(t, c, "workers"), "[]"), ",")
		slices.Sort(allow)
		if !slices.Equal(allow, workers) {
			t.Errorf("%s: --workers %v, want the worker services %v", name, allow, workers)
		}
	}

	// Workers run the README's example agent, mounted from examples/.
	for _, name := range byRole["worker"] {
		c := cmds[name]
		if id := flagValue(t, c, "id"); id != name {
			t.Errorf("%s: --id %q", name, id)
		}
		agent := strings.Trim(flagValue(t, c, "agent"), "[]")
		agentName, path, _ := strings.Cut(agent, "=")
		if agentName != "travel" {
			t.Errorf("%s: --agent %q, want travel=...", name, agent)
		}
		found := false
		for _, v := range cf.Services[name].Volumes {
			host, ctr, _ := strings.Cut(strings.TrimSuffix(v, ":ro"), ":")
			if rel, ok := strings.CutPrefix(path, ctr+"/"); ok {
				found = true
				if _, err := os.Stat(filepath.Join(deploy, host, rel)); err != nil {
					t.Errorf("%s: agent %s: %v", name, path, err)
				}
			}
		}
		if !found {
			t.Errorf("%s: agent file %s is on no volume", name, path)
		}
	}

	// The token file comes in as a secret, never inline.
	if cf.Secrets["adk_tokens"].File == "" {
		t.Error("no adk_tokens secret file")
	}
	for _, name := range append(slices.Clone(byRole["store"]), byRole["api"]...) {
		if tok := flagValue(t, cmds[name], "tokens"); tok != "/run/secrets/adk_tokens" || !slices.Contains(cf.Services[name].Secrets, "adk_tokens") {
			t.Errorf("%s: --tokens %q, want the adk_tokens secret", name, tok)
		}
	}
	// Published ports stay on the host's loopback.
	for name, s := range cf.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s: port %q is published beyond loopback", name, p)
			}
		}
	}
}

// TestDeployHelmArgs parses every container command line the Helm chart
// renders (deploy/helm/charttest writes them to testdata/args.txt and
// args-switches.txt and fails when they are stale) with the binary's own
// flags.
func TestDeployHelmArgs(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "helm", "charttest", "testdata")
	data, err := os.ReadFile(filepath.Join(dir, "args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// The values switches (settings file, NATS credentials, ...) add flags.
	switches, err := os.ReadFile(filepath.Join(dir, "args-switches.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(switches)), "\n") {
		parseAdkCommand(t, strings.Fields(line))
	}
	roles := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		cmd := parseAdkCommand(t, strings.Fields(line))
		roles[cmd.Name()]++
		if flagValue(t, cmd, "metrics-addr") == "" {
			t.Errorf("%s: no --metrics-addr for the probes", line)
		}
	}
	for role, want := range map[string]int{"coordinator": 1, "worker": 2, "store": 1, "api": 1} {
		if roles[role] != want {
			t.Errorf("%d %s command lines, want %d (%v)", roles[role], role, want, roles)
		}
	}
}
