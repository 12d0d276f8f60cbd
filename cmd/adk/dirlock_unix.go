//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockDataDir takes an exclusive advisory lock on dir/adk.lock for the
// life of the process, so a second `adk serve` on the same data dir stops
// before it starts a NATS server on the first one's JetStream files. The
// lock goes with the process, however it ends.
func lockDataDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "adk.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errDataDirHeld
		}
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
