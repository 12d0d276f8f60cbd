package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiling hooks of `adk eval run`, for the benchmark driver
// (go run ./bench/evalbench -profile DIR): when set, these variables name
// the files the run writes a CPU profile and an end-of-run heap profile
// (alloc_space included) to. They are for developers and are not in the
// command's help.
const (
	envCPUProfile  = "ADK_EVAL_CPUPROFILE"
	envHeapProfile = "ADK_EVAL_MEMPROFILE"
)

// codeProfileFailed is a profile file that could not be written.
const codeProfileFailed = "eval_profile_failed"

// startProfiles starts the profiles the environment asks for and returns
// the function that writes and closes them.
func startProfiles() (stop func() error, err error) {
	cpuPath, heapPath := os.Getenv(envCPUProfile), os.Getenv(envHeapProfile)
	if cpuPath == "" && heapPath == "" {
		return func() error { return nil }, nil
	}
	if heapPath != "" {
		runtime.MemProfileRate = 64 << 10
	}
	var cpu *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, &cliError{Code: codeProfileFailed, Reason: envCPUProfile, Err: err}
		}
		if err = pprof.StartCPUProfile(cpu); err != nil {
			_ = cpu.Close()
			return nil, &cliError{Code: codeProfileFailed, Reason: envCPUProfile, Err: err}
		}
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return &cliError{Code: codeProfileFailed, Reason: envCPUProfile, Err: err}
			}
		}
		if heapPath == "" {
			return nil
		}
		f, err := os.Create(heapPath)
		if err == nil {
			err = pprof.Lookup("heap").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return &cliError{Code: codeProfileFailed, Reason: envHeapProfile, Err: err}
		}
		return nil
	}, nil
}
