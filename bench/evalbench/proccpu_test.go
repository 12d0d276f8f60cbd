package main

import (
	"os"
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
