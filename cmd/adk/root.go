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

// newRootCmd builds the whole command tree. Only commands that work are
// registered.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	return newRootCmdFor(stdout, stderr, nil)
}

// newRootCmdFor builds the command tree that args can reach: where args
// name a subcommand exactly (`adk eval run ...`), the other subcommands
// of that level are not built, so that a command does not first build
// and register the flags of every other command (~0.6 ms of CPU, ~0.3%
// of the Little's-law bound of a 1,000-sample run at start-up). Any other
// command line (a flag first, help, completion, a misspelt name) gets the
// whole tree, whose help, suggestions and completions it may need.
// TestRootCmdFor_SameCommands holds the two trees to the same commands,
// flags and help.
func newRootCmdFor(stdout, stderr io.Writer, args []string) *cobra.Command {
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
	if addSubcommands(root, args,
		subcommand{name: "version", build: newVersionCmd},
		subcommand{name: "eval", nested: newEvalCmdFor},
		subcommand{name: "coordinator", build: newCoordinatorCmd}, subcommand{name: "worker", build: newWorkerCmd},
		subcommand{name: "serve", build: newServeCmd},
		subcommand{name: "store", build: newStoreCmd},
		subcommand{name: "api", build: newAPICmd}, subcommand{name: "cluster", build: newClusterCmd},
		subcommand{name: "trace", build: newTraceCmd}, subcommand{name: "export", build: newExportCmd},
		subcommand{name: "config", build: newConfigCmd},
		subcommand{name: "probe", build: newProbeCmd},
	) {
		// The command line names its command: cobra's completion command
		// (added at Execute) is not on its path.
		root.CompletionOptions.DisableDefaultCmd = true
	}
	return root
}

// subcommand is a command built only when the command line can reach it.
type subcommand struct {
	name  string // the first word of the command's Use
	build func() *cobra.Command
	// nested, instead of build, builds a command with subcommands of its
	// own for the arguments past its name (nil: all of them).
	nested func(args []string) *cobra.Command
}

func (s subcommand) command(args []string) *cobra.Command {
	if s.nested != nil {
		return s.nested(args)
	}
	return s.build()
}

// addSubcommands adds to parent the one of subs that args[0] names
// exactly, and reports true; else it adds them all.
func addSubcommands(parent *cobra.Command, args []string, subs ...subcommand) bool {
	if len(args) > 0 {
		for _, s := range subs {
			if s.name == args[0] {
				parent.AddCommand(s.command(args[1:]))
				return true
			}
		}
	}
	for _, s := range subs {
		parent.AddCommand(s.command(nil))
	}
	return false
}

// usageError marks a command-line mistake; it exits 1 like every error.
type usageError struct{ err error }

func (e usageError) Error() string { return "usage: " + e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run executes the CLI and returns the process exit code. Errors are printed
// as a single line: no usage dump, no stack trace.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmdFor(stdout, stderr, args)
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
