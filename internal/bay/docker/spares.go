package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spare cargo files: making a bounded cargo's ext4 file (mkfs.ext4) was on the path of every
// sandbox's first start, 30 to 120 ms on a loaded two-core host. The driver therefore keeps a
// few files formatted ahead of time in CargoDir/.spare ("<size>-<random>.img"; a volume name
// cannot start with a dot, so the directory never meets a cargo's paths) and a new bounded cargo
// of that size takes one by renaming it to its own file name; only the mount stays on the
// start path. The files are refilled in the background once starts have been quiet for a
// moment, at a lower CPU priority. Several bays sharing CargoDir share the spares: a rename
// either wins a file or finds it gone. Close removes the spares this driver made and did not
// hand out; a crash leaves them for the next bay to use.

const (
	// spareCount is how many spare files of the wanted size the driver keeps ready.
	spareCount = 2
	// spareQuiet is how long after the last take the refill waits, so that it does not compete
	// with the start that took the file.
	spareQuiet = time.Second
	// spareStaleTmp is the age after which an unfinished spare (a crash during mkfs) is removed.
	spareStaleTmp = 10 * time.Minute
	spareDirName  = ".spare"
	// spareNice is the CPU niceness of the refill's mkfs.ext4.
	spareNice = 10
)

// spares is the driver's pool of pre-formatted cargo files.
type spares struct {
	d *Driver

	mu      sync.Mutex
	size    int64           // the size refilled: the last bounded cargo's
	made    map[string]bool // spare files this driver made and did not hand out
	timer   *time.Timer     // the pending refill
	running bool            // a refill runs
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newSpares(d *Driver) *spares {
	ctx, cancel := context.WithCancel(context.Background())
	return &spares{d: d, made: map[string]bool{}, ctx: ctx, cancel: cancel}
}

func (s *spares) dir() string { return filepath.Join(s.d.cfg.CargoDir, spareDirName) }

// take moves a spare file of size to img (which must not exist) and reports whether it did;
// either way it schedules a refill of that size.
func (s *spares) take(img string, size int64) bool {
	defer s.schedule(size)
	ents, err := os.ReadDir(s.dir())
	if err != nil {
		return false
	}
	prefix := strconv.FormatInt(size, 10) + "-"
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".img") {
			continue
		}
		src := filepath.Join(s.dir(), name)
		// RENAME_NOREPLACE keeps the cargo file's creation exclusive, as O_EXCL did.
		err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, img, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.ENOENT) {
			continue // another bay took it
		}
		if errors.Is(err, unix.EEXIST) {
			return false // the cargo's file exists: the create says so
		}
		if err != nil {
			s.d.log.Warn("take a spare cargo file", "file", src, "err", err)
			return false
		}
		s.mu.Lock()
		delete(s.made, src)
		s.mu.Unlock()
		return true
	}
	return false
}

// schedule arranges a refill to size spareQuiet from now (postponed by every later take).
func (s *spares) schedule(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.size = size
	if s.timer != nil {
		s.timer.Reset(spareQuiet)
		return
	}
	s.timer = time.AfterFunc(spareQuiet, s.refill)
}

// refill makes spare files until spareCount of the wanted size exist, and removes the spares
// of other sizes this driver made.
func (s *spares) refill() {
	s.mu.Lock()
	if s.closed || s.running {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.wg.Add(1)
	size := s.size
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
		s.wg.Done()
	}()
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		s.d.log.Warn("spare cargo files", "err", err)
		return
	}
	prefix := strconv.FormatInt(size, 10) + "-"
	for s.ctx.Err() == nil {
		ents, err := os.ReadDir(s.dir())
		if err != nil {
			s.d.log.Warn("spare cargo files", "err", err)
			return
		}
		have := 0
		for _, e := range ents {
			name, path := e.Name(), filepath.Join(s.dir(), e.Name())
			switch {
			case strings.HasSuffix(name, ".tmp"):
				if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > spareStaleTmp {
					os.Remove(path)
				}
			case strings.HasPrefix(name, prefix):
				have++
			default:
				s.mu.Lock()
				if s.made[path] {
					delete(s.made, path)
					os.Remove(path)
				}
				s.mu.Unlock()
			}
		}
		if have >= spareCount {
			return
		}
		if err := s.make(size); err != nil {
			if s.ctx.Err() == nil {
				s.d.log.Warn("make a spare cargo file", "size_bytes", size, "err", err)
			}
			return
		}
	}
}

// make formats one spare file of size under a temporary name, then gives it its final name.
func (s *spares) make(size int64) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	final := filepath.Join(s.dir(), strconv.FormatInt(size, 10)+"-"+hex.EncodeToString(b[:])+".img")
	tmp := final + ".tmp"
	if err := formatCargoFile(s.ctx, tmp, size, spareNice); err != nil {
		os.Remove(tmp)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		os.Remove(tmp)
		return context.Canceled
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return err
	}
	s.made[final] = true
	return nil
}

// close stops the refill, waits for it and removes the spares this driver made.
func (s *spares) close() {
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for path := range s.made {
		os.Remove(path)
	}
	s.made = map[string]bool{}
}

// formatCargoFile creates img as a sparse file of size holding an empty ext4 filesystem owned
// by the sandbox user. nice > 0 runs mkfs.ext4 at that CPU niceness.
func formatCargoFile(ctx context.Context, img string, size int64, nice int) error {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cargo file: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cargo file: size %d: %w", size, err)
	}
	uid, gid, _ := strings.Cut(DefaultUser, ":")
	// No reserved blocks (the sandbox user gets the whole size), no journal (the cargo's
	// writes are the sandbox's own; a crash loses at most what was not synced, as on tmpfs),
	// lazy init so that creating is fast whatever the size.
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,root_owner="+uid+":"+gid, img)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mkfs.ext4: %w", err)
	}
	if nice > 0 {
		// Best effort: a refill that keeps its normal priority is only slower for the others.
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, nice)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}
