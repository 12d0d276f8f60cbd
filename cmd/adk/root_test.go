package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandPaths lists every command of the tree below c, as the words
// that name it (["eval", "run"]).
func commandPaths(c *cobra.Command, path []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		p := append(slices.Clone(path), sub.Name())
		out = append(out, p)
		out = append(out, commandPaths(sub, p)...)
	}
	return out
}

// flagsOf describes a command's flags, its own and inherited, hidden ones
// too (help leaves those out).
func flagsOf(c *cobra.Command) string {
	var b strings.Builder
	for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			fmt.Fprintf(&b, "%s/%s/%s/%s/%v/%v\n", f.Name, f.Shorthand, f.Value.Type(), f.DefValue, f.Hidden, f.Deprecated)
		})
		b.WriteString("--\n")
	}
	return b.String()
}

// helpOf runs `adk PATH... --help` on root and returns what it printed.
func helpOf(t *testing.T, root *cobra.Command, out *bytes.Buffer, path []string) string {
	t.Helper()
	root.SetArgs(append(slices.Clone(path), "--help"))
	if err := root.Execute(); err != nil {
		t.Fatalf("adk %s --help: %v", strings.Join(path, " "), err)
	}
	if !strings.Contains(out.String(), "Usage:") {
		t.Fatalf("adk %s --help printed no usage: %q", strings.Join(path, " "), out.String())
	}
	return out.String()
}

// A command line that names its command builds only that command's path,
// and that path's commands have the flags and help of the whole tree's.
func TestRootCmdFor_SameCommands(t *testing.T) {
	paths := commandPaths(newRootCmd(io.Discard, io.Discard), nil)
	if len(paths) < 30 {
		t.Fatalf("the whole tree has %d commands: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(p, " ")
		var fullOut, prunedOut bytes.Buffer
		full := newRootCmd(&fullOut, &fullOut)
		pruned := newRootCmdFor(&prunedOut, &prunedOut, append(slices.Clone(p), "--help"))
		fc, _, err := full.Find(p)
		if err != nil {
			t.Fatalf("adk %s in the whole tree: %v", name, err)
		}
		pc, _, err := pruned.Find(p)
		if err != nil || pc.CommandPath() != fc.CommandPath() {
			t.Fatalf("adk %s in the tree built for it: found %v (%v)", name, pc, err)
		}
		if f, g := flagsOf(fc), flagsOf(pc); f != g {
			t.Errorf("adk %s flags:\nwhole tree:\n%s\nbuilt for it:\n%s", name, f, g)
		}
		if f, g := helpOf(t, full, &fullOut, p), helpOf(t, pruned, &prunedOut, p); f != g {
			t.Errorf("adk %s --help:\nwhole tree:\n%s\nbuilt for it:\n%s", name, f, g)
		}
	}
}

// `adk eval run` builds no other command; a line that does not name a
// command first gets the whole tree.
func TestRootCmdFor_Prunes(t *testing.T) {
	all := len(commandPaths(newRootCmd(io.Discard, io.Discard), nil))
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"eval", "run", "--config", "a.json"}, 2},
		{[]string{"version"}, 1},
		{[]string{"eval", "--help"}, 1 + len(commandPaths(newEvalCmdFor(nil), nil))},
		{nil, all},
		{[]string{"--quiet", "eval", "run"}, all},
		{[]string{"help", "eval"}, all},
		{[]string{"completion", "bash"}, all},
		{[]string{"evl", "run"}, all},
	} {
		root := newRootCmdFor(io.Discard, io.Discard, tc.args)
		if got := len(commandPaths(root, nil)); got != tc.want {
			t.Errorf("adk %s: %d commands built, want %d", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// The commands a whole tree gives cobra for a line that names none keep
// working: a misspelt command is refused with a suggestion, and the
// completion script is written.
func TestRun_WholeTreeCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"evl", "run"}, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "eval") {
		t.Errorf("adk evl run: exit %d, stderr %q; want exit %d suggesting eval", code, errOut.String(), exitError)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"completion", "bash"}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "__start_adk") {
		t.Errorf("adk completion bash: exit %d, stderr %q, %d bytes out", code, errOut.String(), out.Len())
	}
}
