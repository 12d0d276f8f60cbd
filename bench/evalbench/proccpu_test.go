//go:build linux

package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestProcCPU_CountsThisProcessesWork: spinning shows in this process's
// CPU time within a few seconds, and a process that does not exist is an
// error.
func TestProcCPU_CountsThisProcessesWork(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		now, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 20*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s of spinning counted as %v", now-before)
		}
		for spin := time.Now(); time.Since(spin) < time.Millisecond; {
		}
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("a process that does not exist has a CPU time")
	}
	if d, err := procCPU(0); d != 0 || err != nil {
		t.Errorf("pid 0: %v, %v", d, err)
	}
}

// TestWithConfig_SwitchesOnlyTheConfig: a row's arguments against another
// fake differ only in --config, and the row's own slice is not touched.
func TestWithConfig_SwitchesOnlyTheConfig(t *testing.T) {
	args := []string{"eval", "run", "--config", "openai.json", "--eval-set", "set10.json"}
	got := withConfig(args, "openai-fakeA.json")
	want := []string{"eval", "run", "--config", "openai-fakeA.json", "--eval-set", "set10.json"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
	if args[3] != "openai.json" {
		t.Errorf("the row's arguments changed: %q", args)
	}
}
