//go:build unix

// Package hostlock is a machine-wide named lock (flock on a file in the temporary directory),
// for work that processes on one host must not do twice at once: building one image flavour,
// creating a network whose name the engine does not keep unique.
package hostlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Acquire takes the lock called name (a file name: letters, digits, '-', '.', '_'), polling
// from 5 ms up to 500 ms while another process holds it; waiting, when set, is called once
// if it has to wait. It gives up when ctx ends. unlock releases it.
func Acquire(ctx context.Context, name string, waiting func()) (unlock func(), err error) {
	p := filepath.Join(os.TempDir(), name+".lock")
	fd, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", p, err)
	}
	delay := 5 * time.Millisecond
	for {
		err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(fd.Fd()), syscall.LOCK_UN)
				fd.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			fd.Close()
			return nil, fmt.Errorf("take lock %s: %w", p, err)
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			fd.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", p, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}
