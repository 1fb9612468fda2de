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

// Spare cargo files: making a bounded cargo's ext4 file (mkfs.ext4) and loop-mounting it were on
// the path of every sandbox's first start, each 25 to 120 ms on a loaded two-core host. The
// driver therefore keeps a few files formatted and mounted ahead of time in CargoDir/.spare
// ("<size>-<random>.img" mounted on "<size>-<random>.d"; a volume name cannot start with a dot,
// so the directory never meets a cargo's paths). A new bounded cargo of that size takes one by
// renaming the file to its own file name and moving the mount (MS_MOVE) onto its own mount
// point. Where the kernel refuses the move (a mount under a shared mount, as on most systemd
// hosts), the spare is unmounted and mounted again at the cargo's place, and later spares are
// only formatted. The files are refilled in the background once starts have been quiet for a
// moment, mkfs at a lower CPU priority. Several bays sharing CargoDir share the spares: a rename
// either wins a file or finds it gone. Close removes the spares this driver made and did not
// hand out; a crash leaves them for the next bay to use, and an unfinished one (its maker holds
// a lock on it while it is made) to the next bay's refill or close, which removes it.

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
	noMove  bool // the kernel refused to move a spare's mount here: spares are only formatted
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newSpares(d *Driver) *spares {
	ctx, cancel := context.WithCancel(context.Background())
	return &spares{d: d, made: map[string]bool{}, ctx: ctx, cancel: cancel}
}

func (s *spares) dir() string { return filepath.Join(s.d.cfg.CargoDir, spareDirName) }

// take moves a spare file of size to img (which must not exist) and, when the spare is
// mounted, its mount to mnt; it reports whether img now holds a spare and whether it is
// mounted on mnt. Either way it schedules a refill of that size.
func (s *spares) take(ctx context.Context, img, mnt string, size int64) (taken, mountedOn bool) {
	defer s.schedule(size)
	ents, err := os.ReadDir(s.dir())
	if err != nil {
		return false, false
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
			return false, false // the cargo's file exists: the create says so
		}
		if err != nil {
			s.d.log.WarnContext(ctx, "take a spare cargo file", "file", src, "err", err)
			return false, false
		}
		s.mu.Lock()
		delete(s.made, src)
		s.mu.Unlock()
		return true, s.moveMount(ctx, spareMount(src), mnt)
	}
	return false, false
}

// spareMount is the mount point of the spare file img.
func spareMount(img string) string { return strings.TrimSuffix(img, ".img") + ".d" }

// moveMount moves the mount on from (if any) to to and removes from; it reports whether to is
// now mounted. A refused move unmounts from instead: the caller mounts the file itself.
func (s *spares) moveMount(ctx context.Context, from, to string) bool {
	defer os.Remove(from)
	if !mounted(from) {
		return false
	}
	err := unix.Mount(from, to, "", unix.MS_MOVE, "")
	if err == nil {
		return true
	}
	s.mu.Lock()
	first := !s.noMove
	s.noMove = true
	s.mu.Unlock()
	if first {
		s.d.log.InfoContext(ctx, "spare cargo files are formatted but not mounted ahead: the kernel refuses to move their mounts here", "dir", s.dir(), "err", err)
	}
	if out, err := exec.CommandContext(ctx, "umount", from).CombinedOutput(); err != nil {
		s.d.log.WarnContext(ctx, "unmount a spare cargo file", "dir", from, "err", err, "output", strings.TrimSpace(string(out)))
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
				// One whose maker died goes at once (its lock is free); the age is the rule
				// where locks do not hold (a CargoDir on a filesystem without flock).
				if info, err := e.Info(); err == nil && (time.Since(info.ModTime()) > spareStaleTmp || orphanedTmp(path)) {
					s.drop(strings.TrimSuffix(path, ".tmp"), path)
				}
			case !strings.HasSuffix(name, ".img"):
				// A mount point: it goes with its file.
			case strings.HasPrefix(name, prefix):
				have++
			default:
				s.mu.Lock()
				if s.made[path] {
					delete(s.made, path)
					s.drop(path, path)
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

// make formats one spare file of size under a temporary name and mounts it (unless moves are
// refused here), then gives it its final name: a file with a final name is complete.
func (s *spares) make(size int64) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	final := filepath.Join(s.dir(), strconv.FormatInt(size, 10)+"-"+hex.EncodeToString(b[:])+".img")
	tmp := final + ".tmp"
	release, err := formatCargoFile(s.ctx, tmp, size, spareNice, true)
	if err != nil {
		s.drop(final, tmp)
		return err
	}
	defer release()
	s.mu.Lock()
	noMove := s.noMove
	s.mu.Unlock()
	if !noMove {
		mnt := spareMount(final)
		if err := os.Mkdir(mnt, 0o000); err != nil {
			s.drop(final, tmp)
			return fmt.Errorf("spare mount point: %w", err)
		}
		if err := s.d.mountLoopCargo(s.ctx, tmp, mnt); err != nil {
			s.drop(final, tmp)
			return err
		}
		if err := os.Remove(filepath.Join(mnt, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.drop(final, tmp)
			return fmt.Errorf("spare: remove lost+found: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.drop(final, tmp)
		return context.Canceled
	}
	if err := os.Rename(tmp, final); err != nil {
		s.drop(final, tmp)
		return err
	}
	s.made[final] = true
	return nil
}

// drop removes the spare whose final name is final and whose file is now at file: its mount
// (if any), its file and its mount point.
func (s *spares) drop(final, file string) {
	mnt := spareMount(final)
	if mounted(mnt) {
		// Not s.ctx: a closing driver still unmounts what it made.
		ctx, cancel := context.WithTimeout(context.Background(), RemoveTimeout)
		out, err := exec.CommandContext(ctx, "umount", mnt).CombinedOutput()
		cancel()
		if err != nil {
			s.d.log.Warn("unmount a spare cargo file", "dir", mnt, "err", err, "output", strings.TrimSpace(string(out)))
			return
		}
	}
	os.Remove(file)
	os.Remove(mnt)
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
		s.drop(path, path)
	}
	s.made = map[string]bool{}
	s.sweep()
}

// formatCargoFile creates img as a sparse file of size holding an empty ext4 filesystem owned
// by the sandbox user. nice > 0 runs mkfs.ext4 at that CPU niceness. With hold, the file stays
// open under an exclusive flock from its creation until release is called, so that another
// bay can tell a spare being made from one whose maker died (the kernel drops a dead process's
// locks); release is never nil when err is nil.
func formatCargoFile(ctx context.Context, img string, size int64, nice int, hold bool) (release func(), err error) {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cargo file: %w", err)
	}
	release = func() { f.Close() }
	defer func() {
		if err != nil {
			release()
		}
	}()
	if hold {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			return nil, fmt.Errorf("cargo file: lock: %w", err)
		}
	}
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("cargo file: size %d: %w", size, err)
	}
	if !hold {
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("cargo file: %w", err)
		}
		release = func() {}
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
		return nil, fmt.Errorf("mkfs.ext4: %w", err)
	}
	if nice > 0 {
		// Best effort: a refill that keeps its normal priority is only slower for the others.
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, nice)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return release, nil
}

// orphanedTmp reports whether the unfinished spare file is no one's: no process holds the
// lock its maker takes at creation (formatCargoFile), and it is older than a moment (the
// create and the lock are two calls).
func orphanedTmp(path string) bool {
	info, err := os.Stat(path)
	if err != nil || time.Since(info.ModTime()) < time.Second {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// sweep removes the unfinished spares whose maker died (a bay killed during mkfs or before the
// final rename leaves the file, and often its mount). It runs with every refill and when the
// driver closes, so a bay that outlives a killed one on the same CargoDir cleans up after it.
func (s *spares) sweep() {
	ents, err := os.ReadDir(s.dir())
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		path := filepath.Join(s.dir(), e.Name())
		if orphanedTmp(path) {
			s.d.log.Info("remove an unfinished spare cargo file whose maker is gone", "file", path)
			s.drop(strings.TrimSuffix(path, ".tmp"), path)
		}
	}
}
