//go:build unix

package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockFlavour takes a machine-wide lock for building one flavour, so that
// concurrent callers (parallel test binaries, make run) build it once. It
// calls waiting once if the lock is held, and gives up when ctx ends.
func lockFlavour(ctx context.Context, f Flavour, waiting func()) (unlock func(), err error) {
	p := filepath.Join(os.TempDir(), "shipyard-imagebuild-"+string(f)+".lock")
	fd, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	warned := false
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
			return nil, fmt.Errorf("take build lock %s: %w", p, err)
		}
		if !warned && waiting != nil {
			waiting()
			warned = true
		}
		select {
		case <-ctx.Done():
			fd.Close()
			return nil, fmt.Errorf("wait for build lock %s: %w", p, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
