//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

// TestPlacementFlag_ReadsCPUListsAndRefusesTheRest: the kernel's list
// format is read into sorted distinct CPUs; anything else, or a CPU this
// process may not run on, is a placementError naming the flag.
func TestPlacementFlag_ReadsCPUListsAndRefusesTheRest(t *testing.T) {
	available := []int{0, 1, 2, 3}
	for _, tc := range []struct {
		value string
		want  []int
	}{
		{"", nil},
		{"1", []int{1}},
		{"0-1", []int{0, 1}},
		{"3,0-1", []int{0, 1, 3}},
		{"1,1,0-2", []int{0, 1, 2}},
	} {
		got, err := placementFlag("-client-cpus", tc.value, available)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.value, got, err, tc.want)
		}
		if err == nil && tc.value != "" {
			if back := formatCPUList(got); back != formatCPUList(tc.want) {
				t.Errorf("%q: formatted %q", tc.value, back)
			}
		}
	}
	for _, tc := range []struct {
		value string
		want  error
	}{
		{"x", errCPUListSyntax},
		{"-1", errCPUListSyntax},
		{"01", errCPUListSyntax},
		{"1,", errCPUListSyntax},
		{"2-1", errCPUListSyntax},
		{"0 1", errCPUListSyntax},
		{"1024", errCPUListSyntax},
		{strings.Repeat("0,", 200) + "0", errCPUListSyntax},
		{"4", errCPUUnavailable},
		{"0-7", errCPUUnavailable},
	} {
		_, err := placementFlag("-fake-cpus", tc.value, available)
		var pe *placementError
		if !errors.As(err, &pe) || pe.Flag != "-fake-cpus" || pe.Value != tc.value || !errors.Is(err, tc.want) {
			t.Errorf("%q: %v, want a -fake-cpus placementError wrapping %v", tc.value, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "-fake-cpus") {
			t.Errorf("%q: %q does not name the flag", tc.value, err)
		}
	}
	if got := formatCPUList([]int{0, 2, 3, 4, 7}); got != "0,2-4,7" {
		t.Errorf("formatCPUList: %q, want the kernel's 0,2-4,7", got)
	}
}

// TestStartPlaced_GoChildRunsOnlyThere: a Go child placed on one CPU has
// only that CPU in its Cpus_allowed_list and GOMAXPROCS 1; unplaced, it
// has every CPU; and no thread of this process keeps a narrowed mask.
func TestStartPlaced_GoChildRunsOnlyThere(t *testing.T) {
	available, err := availableCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(available) < 2 {
		t.Skipf("this process may run on CPUs %s only: nothing to place apart", formatCPUList(available))
	}
	self := testutil.Binary(t, ".")
	for _, c := range available[:2] {
		got, err := probePlacement(self, []int{c})
		if want := fmt.Sprintf("cpus %d gomaxprocs 1", c); err != nil || got != want {
			t.Errorf("placed on CPU %d: %q, %v; want %q", c, got, err, want)
		}
	}
	got, err := probePlacement(self, nil)
	if want := fmt.Sprintf("cpus %s gomaxprocs %d", formatCPUList(available), len(available)); err != nil || got != want {
		t.Errorf("unplaced: %q, %v; want %q", got, err, want)
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", os.Getpid()))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("this process's threads: %v, %v", tasks, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(task, "status"))
		if err != nil {
			continue // a thread that just ended
		}
		_, after, _ := strings.Cut(string(b), "Cpus_allowed_list:")
		list, _, _ := strings.Cut(after, "\n")
		if list = strings.TrimSpace(list); list != formatCPUList(available) {
			t.Errorf("thread %s kept the mask %s, want %s", filepath.Base(task), list, formatCPUList(available))
		}
	}
}

// TestReadme_EvalbenchPlacement runs the README's placed evalbench
// command, made small (a 5 ms fake, one round of the 1,000-sample row):
// the header says where each side ran, from children placed there, and
// every client row ran (each adk and floor child's mask is checked as it
// starts; a wrong one ends evalbench).
func TestReadme_EvalbenchPlacement(t *testing.T) {
	available, err := availableCPUs()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "go run ./bench/evalbench "
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, "-fake-cpus") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("README has no %q line with -fake-cpus", prefix)
	}
	args, err := shellWords(strings.TrimPrefix(line, prefix))
	if err != nil {
		t.Fatal(err)
	}
	flagValue := func(name string) string {
		i := slices.Index(args, name)
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("the README line has no %s value: %q", name, line)
		}
		return args[i+1]
	}
	fakeCPUs, clientCPUs := flagValue("-fake-cpus"), flagValue("-client-cpus")
	for name, l := range map[string]string{"-fake-cpus": fakeCPUs, "-client-cpus": clientCPUs} {
		if _, err := placementFlag(name, l, available); err != nil {
			t.Skipf("the README's placement does not fit this machine: %v", err)
		}
	}
	bins := map[string]string{
		"-adk":        testutil.Binary(t, "../../cmd/adk"),
		"-openaifake": testutil.Binary(t, "../openaifake"),
	}
	for name, path := range bins {
		args[slices.Index(args, name)+1] = path
	}
	args = append(args, "-delay", "5ms", "-runs", "1", "-only", "openai-1000-c256$")
	out, err := exec.Command(testutil.Binary(t, "."), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("evalbench %q: %v\n%s", args, err, out)
	}
	for _, want := range []string{
		fmt.Sprintf("fake on CPUs %s (a Go child there: cpus %s gomaxprocs", fakeCPUs, fakeCPUs),
		fmt.Sprintf("clients (adk and the floor rows) on CPUs %s (a Go child there: cpus %s gomaxprocs", clientCPUs, clientCPUs),
		"; CPUs shared: none;",
		"| F net/http floor, 5ms ", "| F fasthttp floor, 5ms ", "| openai fake, 5ms ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
}

// shellWords splits a README command line into words: blanks separate,
// single quotes keep a word whole.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
