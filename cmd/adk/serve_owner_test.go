package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/store/evalstore"
)

// TestServeSecondOwnerOfDataDirFails: a second `adk serve` on a data dir a
// running one holds fails with eval_store_already_owned, leading its one
// error line, and the first keeps running.
func TestServeSecondOwnerOfDataDirFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: dir, host: "127.0.0.1", port: -1,
			eval: serveEvalOptions{raftAddr: "127.0.0.1:0"}, ready: func(u string) { ready <- u }}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("first serve: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("first serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("first serve not ready")
	}
	err := runServe(context.Background(), serveOptions{dataDir: dir, host: "127.0.0.1", port: -1,
		eval: serveEvalOptions{raftAddr: "127.0.0.1:0"}}, io.Discard)
	if !errors.Is(err, evalstore.ErrAlreadyOwned) || !strings.HasPrefix(err.Error(), "eval_store_already_owned (") {
		t.Fatalf("second serve: %v, want eval_store_already_owned first", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the first serve stopped: %v", err)
	default:
	}
}

// TestStartCPUProfile_BadPathIsATypedError: an unset profile variable is
// a no-op; one naming a file that cannot be created is a typed error that
// names the variable, for serve, coordinator and worker alike.
func TestStartCPUProfile_BadPathIsATypedError(t *testing.T) {
	for _, env := range []string{envServeCPUProfile, envCoordinatorCPUProfile, envWorkerCPUProfile} {
		t.Setenv(env, "")
		stop, err := startCPUProfile(env)
		if err != nil {
			t.Fatalf("%s unset: %v", env, err)
		}
		stop()
		t.Setenv(env, filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
		var ce *cliError
		if _, err := startCPUProfile(env); !errors.As(err, &ce) || ce.Code != codeProfileFailed || ce.Reason != env {
			t.Fatalf("%s: %v", env, err)
		}
	}
}

// TestStartNodeProfiles_WritesPeakHeap: the heap variable names a file
// that holds a heap profile once the profiles stop, and a bad path is a
// typed error naming the variable.
func TestStartNodeProfiles_WritesPeakHeap(t *testing.T) {
	for _, env := range []string{envCoordinatorHeapProfile, envWorkerHeapProfile} {
		path := filepath.Join(t.TempDir(), "heap.pprof")
		t.Setenv(env, path)
		stop, err := startNodeProfiles("ADK_TEST_UNSET_CPUPROFILE", env)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		stop()
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: profile %d bytes, %v", env, len(b), err)
		}
		t.Setenv(env, filepath.Join(t.TempDir(), "missing", "heap.pprof"))
		var ce *cliError
		if _, err := startNodeProfiles("ADK_TEST_UNSET_CPUPROFILE", env); !errors.As(err, &ce) || ce.Code != codeProfileFailed || ce.Reason != env {
			t.Fatalf("%s: %v", env, err)
		}
	}
}
