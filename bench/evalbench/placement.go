//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Placement (-fake-cpus, -client-cpus): the fake stands for a provider on
// other machines, yet on the bench it shares the client's cores, so its
// CPU and wake-ups are part of every openai row. Placing the fake and the
// measured clients (adk and the floor rows alike) on separate CPUs takes
// that interference out of a row; placing the fake on one CPU and leaving
// the client both shows which part is the fake's. Overlapping lists are
// allowed (that last placement needs them); the header says which CPUs
// the two sides share.
//
// A child is placed before it starts: evalbench sets the CPU affinity of
// one locked OS thread, forks the child from it (a child inherits its
// forking thread's mask, and Go's runtime sizes GOMAXPROCS from the mask
// it starts with), then gives the thread its old mask back and unlocks it.
// The thread must outlive the call: a child's Pdeathsig (the fake's) fires
// when the thread that forked it ends. Each placed child's
// /proc/PID/status Cpus_allowed_list is checked right after it starts.

var (
	// errCPUListSyntax: a CPU list is not in the kernel's list format
	// ("0", "0-1", "0,2-3").
	errCPUListSyntax = errors.New("not a CPU list (the kernel's format: 0, 0-1, 0,2-3)")
	// errCPUUnavailable: a CPU list names a CPU this process may not run on
	// (offline, absent, or outside its own affinity mask).
	errCPUUnavailable = errors.New("names a CPU this process may not run on")
)

// placementError is a refused -fake-cpus or -client-cpus value: Flag names
// the flag, Value is what it was given.
type placementError struct {
	Flag, Value string
	Err         error
}

func (e *placementError) Error() string { return fmt.Sprintf("%s %q: %v", e.Flag, e.Value, e.Err) }

func (e *placementError) Unwrap() error { return e.Err }

// Bounds on a CPU list: unix.CPUSet holds CPUs 0..1023, and no list a
// person types is longer than this.
const (
	maxCPU         = 1023
	maxCPUListText = 256
)

// parseCPUList reads a CPU list in the kernel's list format (the format
// of Cpus_allowed_list and taskset -c) into sorted, distinct CPU numbers.
// The empty string is no list (nil, nil): the child is not placed.
func parseCPUList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxCPUListText {
		return nil, fmt.Errorf("%w: longer than %d bytes", errCPUListSyntax, maxCPUListText)
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return nil, err
			}
			if last < first {
				return nil, fmt.Errorf("%w: range %q ends before it starts", errCPUListSyntax, part)
			}
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%w: %q is not a CPU number", errCPUListSyntax, s)
	}
	if n > maxCPU {
		return 0, fmt.Errorf("%w: CPU %d is over %d", errCPUListSyntax, n, maxCPU)
	}
	return n, nil
}

// formatCPUList writes sorted, distinct CPUs as the kernel does: ranges of
// consecutive CPUs joined by commas ("0-1", "0,2-3").
func formatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// availableCPUs is the CPUs this process may run on (its affinity mask).
func availableCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := range maxCPU + 1 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// placementFlag validates one placement flag's value against the CPUs
// available: a typed error naming the flag, or the CPUs (nil: unplaced).
func placementFlag(flag, value string, available []int) ([]int, error) {
	cpus, err := parseCPUList(value)
	if err != nil {
		return nil, &placementError{Flag: flag, Value: value, Err: err}
	}
	for _, c := range cpus {
		if !slices.Contains(available, c) {
			return nil, &placementError{Flag: flag, Value: value,
				Err: fmt.Errorf("%w: CPU %d (it may run on %s)", errCPUUnavailable, c, formatCPUList(available))}
		}
	}
	return cpus, nil
}

// startPlaced starts cmd on cpus (none: wherever the kernel likes) and, when
// placed, checks the child's Cpus_allowed_list.
func startPlaced(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// An error before the fork returns with the thread locked: the
		// runtime ends it with this goroutine, mask and all.
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			errc <- fmt.Errorf("sched_getaffinity: %w", err)
			return
		}
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("sched_setaffinity %s: %w", formatCPUList(cpus), err)
			return
		}
		err := cmd.Start()
		if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
			// Keep the thread locked, so no other goroutine runs on the
			// narrowed mask; the caller stops the child.
			errc <- errors.Join(err, fmt.Errorf("restore the thread's CPU mask: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return err
	}
	got, err := processCPUs(cmd.Process.Pid)
	if err == nil && !slices.Equal(got, cpus) {
		err = fmt.Errorf("placed on %s, but its Cpus_allowed_list is %s", formatCPUList(cpus), formatCPUList(got))
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("%s: %w", cmd.Path, err)
	}
	return nil
}

// processCPUs reads process pid's Cpus_allowed_list from /proc.
func processCPUs(pid int) ([]int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Cpus_allowed_list:")); ok {
			return parseCPUList(string(bytes.TrimSpace(v)))
		}
	}
	return nil, fmt.Errorf("process %d: no Cpus_allowed_list in /proc status", pid)
}

// probeEnv makes evalbench, re-executed, print the CPUs it may run on and
// its GOMAXPROCS ("cpus 0 gomaxprocs 1") and exit: what a Go child placed
// there sees.
const probeEnv = "EVALBENCH_PLACEMENT_PROBE"

// placementProbe is the re-executed side of probeEnv.
func placementProbe() error {
	cpus, err := processCPUs(os.Getpid())
	if err != nil {
		return err
	}
	_, err = fmt.Printf("cpus %s gomaxprocs %d\n", formatCPUList(cpus), runtime.GOMAXPROCS(0))
	return err
}

// probePlacement runs self placed on cpus and returns its probe line.
func probePlacement(self string, cpus []int) (string, error) {
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), probeEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := startPlaced(cmd, cpus); err != nil {
		return "", err
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("placement probe: %v: %s", err, firstLine(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// placementHeader says where the fake and the clients ran, from a probe
// of each side (what a Go child placed there sees), and which CPUs they
// shared (an unpinned side has every available CPU).
func placementHeader(self string, fakeCPUs, clientCPUs, available []int) (string, error) {
	side := func(name string, cpus []int) (string, []int, error) {
		where, effective := "unpinned", available
		if len(cpus) > 0 {
			where, effective = "on CPUs "+formatCPUList(cpus), cpus
		}
		probe, err := probePlacement(self, cpus)
		if err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("%s %s (a Go child there: %s)", name, where, probe), effective, nil
	}
	fake, fakeOn, err := side("fake", fakeCPUs)
	if err != nil {
		return "", err
	}
	clients, clientsOn, err := side("clients (adk and the floor rows)", clientCPUs)
	if err != nil {
		return "", err
	}
	var shared []int
	for _, c := range fakeOn {
		if slices.Contains(clientsOn, c) {
			shared = append(shared, c)
		}
	}
	both := "none"
	if len(shared) > 0 {
		both = formatCPUList(shared)
	}
	return fmt.Sprintf("placement: %s; %s; CPUs shared: %s; evalbench itself unpinned", fake, clients, both), nil
}
