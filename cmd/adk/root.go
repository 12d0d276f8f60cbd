package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of the adk binary.
const (
	exitOK     = 0
	exitError  = 1
	exitFailed = 2
)

// exitCodeError carries an exit code other than the default 1 through cobra.
// A nil Err with code 2 means "evaluated, and the verdict is fail".
type exitCodeError struct {
	Code int
	Err  error
}

func (e *exitCodeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *exitCodeError) Unwrap() error { return e.Err }

// newRootCmd builds the command tree. Only commands that work are registered.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "adk",
		Short:         "Distributed evaluation and trace system for LLM agents",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetVersionTemplate(versionText())
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolP("quiet", "q", false, "no progress line, and no report on stdout when --output names a file (errors still go to stderr)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// A typed flag's own error already names the flag and what is
		// valid, with the contract's code.
		var ce *cliError
		if errors.As(err, &ce) {
			return ce
		}
		return usageError{err}
	})
	root.AddCommand(newVersionCmd(), attachClusterEvalCmds(newEvalCmd()))
	root.AddCommand(newCoordinatorCmd(), newWorkerCmd())
	root.AddCommand(newServeCmd())
	root.AddCommand(newStoreCmd())
	root.AddCommand(newAPICmd(), newClusterCmd())
	root.AddCommand(newTraceCmd(), newExportCmd())
	root.AddCommand(newConfigCmd())
	root.AddCommand(newProbeCmd())
	return root
}

// usageError marks a command-line mistake; it exits 1 like every error.
type usageError struct{ err error }

func (e usageError) Error() string { return "usage: " + e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run executes the CLI and returns the process exit code. Errors are printed
// as a single line: no usage dump, no stack trace.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(joinBoolArgs(root, args))
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	code := exitError
	var ce *exitCodeError
	if errors.As(err, &ce) {
		code = ce.Code
		if ce.Err == nil {
			return code
		}
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintf(stderr, "adk: %s\n", msg)
	return code
}

// quiet reports whether --quiet was given.
func quiet(cmd *cobra.Command) bool {
	q, _ := cmd.Flags().GetBool("quiet")
	return q
}

// progressWriter is where progress lines go: stderr, or nowhere with
// --quiet.
func progressWriter(cmd *cobra.Command) io.Writer {
	if quiet(cmd) {
		return io.Discard
	}
	return cmd.ErrOrStderr()
}

// reportWriter is where a report's stdout copy goes: stdout, unless
// --quiet and --output names a file (the report is never lost).
func reportWriter(cmd *cobra.Command, output string) io.Writer {
	if quiet(cmd) && output != "" && output != "-" {
		return io.Discard
	}
	return cmd.OutOrStdout()
}
