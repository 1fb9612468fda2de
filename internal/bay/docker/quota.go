package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CargoQuotaMode is how the driver bounds a cargo volume's size.
//
// The engine's local volumes have no size (a size option exists only on XFS with project
// quotas, which these hosts do not have), so a bounded cargo is an ext4 filesystem in a sparse
// file of its own, loop-mounted by bay under CargoDir and handed to the engine as a bind-backed
// local volume. Writes beyond the size fail with ENOSPC inside the sandbox; the file only takes
// the host disk the sandbox actually wrote. This needs bay to run as root on the engine's host
// (it mounts, and the engine must see the mount at the same path).
type CargoQuotaMode string

const (
	// CargoQuotaAuto uses loop files when bay can (root, a local engine, mkfs.ext4 and loop
	// devices present, not itself in a container) and leaves cargos unbounded otherwise,
	// saying so once in the log.
	CargoQuotaAuto CargoQuotaMode = "auto"
	// CargoQuotaLoop requires loop files: creating a bounded cargo fails when they cannot work.
	CargoQuotaLoop CargoQuotaMode = "loop"
	// CargoQuotaOff leaves cargo volumes unbounded.
	CargoQuotaOff CargoQuotaMode = "off"
)

// DefaultCargoDir holds the loop files and mount points of bounded cargos.
const DefaultCargoDir = "/var/lib/shipyard/cargos"

// labelCargoQuota marks a volume backed by a loop file; its value is the size in bytes.
const labelCargoQuota = "dev.shipyard.cargo.size_bytes"

// quotaUsable reports whether bounded cargos can be made here, and why not.
func (d *Driver) quotaUsable() (bool, string) {
	d.quotaOnce.Do(func() {
		d.quotaOK, d.quotaWhy = d.probeQuota()
		switch {
		case d.cfg.CargoQuota == CargoQuotaOff:
		case d.quotaOK:
			d.log.Info("cargo volumes are bounded by loop-mounted ext4 files", "dir", d.cfg.CargoDir)
		default:
			d.log.Warn("cargo volumes are NOT size-bounded: "+d.quotaWhy, "cargo_quota", d.cfg.CargoQuota)
		}
	})
	return d.quotaOK, d.quotaWhy
}

func (d *Driver) probeQuota() (bool, string) {
	switch {
	case d.cfg.CargoQuota == CargoQuotaOff:
		return false, "driver.docker.cargo_quota is off"
	case os.Geteuid() != 0:
		return false, "bay does not run as root, so it cannot mount loop files"
	case !strings.HasPrefix(d.cfg.Socket, "unix://"):
		return false, "the engine is not local (" + d.cfg.Socket + "), so it cannot see bay's mounts"
	}
	if !engineSharesMounts() {
		return false, "no dockerd runs in bay's mount namespace, so the engine would not see bay's mounts"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return false, "no loop devices (/dev/loop-control)"
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, tool + " is not installed"
		}
	}
	if err := os.MkdirAll(d.cfg.CargoDir, 0o711); err != nil {
		return false, "cannot create " + d.cfg.CargoDir + ": " + err.Error()
	}
	return true, ""
}

// engineSharesMounts reports whether a dockerd process runs in bay's mount namespace: then the
// engine sees a mount bay makes at the same path. (An engine on another host, or bay in a
// container of its own, would not.)
func engineSharesMounts() bool {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "dockerd" {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && ns == self {
			return true
		}
	}
	return false
}

// loopPaths are a bounded cargo's file and mount point.
func (d *Driver) loopPaths(name string) (img, mnt string) {
	mnt = filepath.Join(d.cfg.CargoDir, name)
	return mnt + ".img", mnt
}

// makeLoopCargo creates the ext4 file of a bounded cargo and mounts it; the directory it
// returns becomes the volume's content. Undone with dropLoopCargo.
func (d *Driver) makeLoopCargo(ctx context.Context, name string, size int64) (string, error) {
	img, mnt := d.loopPaths(name)
	// The mount point is unreadable while nothing is mounted on it, so that a sandbox started
	// while the file is not mounted (a failure of ours) cannot write the host's disk there.
	if err := os.Mkdir(mnt, 0o000); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cargo mount point: %w", err)
	}
	// A spare file formatted and mounted ahead of time (spares.go) saves the mkfs and usually
	// the mount; without one, format here.
	began := time.Now()
	spare, mountedOn := d.spares.take(ctx, img, mnt, size)
	if !spare {
		release, err := formatCargoFile(ctx, img, size, 0, false)
		if err != nil {
			return "", err
		}
		release()
	}
	formatted := time.Now()
	if !mountedOn {
		if err := d.mountLoopCargo(ctx, img, mnt); err != nil {
			return "", err
		}
	}
	if err := os.Remove(filepath.Join(mnt, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cargo: remove lost+found: %w", err)
	}
	d.log.DebugContext(ctx, "cargo file ready", "volume", name, "spare", spare, "spare_mounted", mountedOn,
		"format_ms", ms(formatted.Sub(began)), "mount_ms", ms(time.Since(formatted)))
	return mnt, nil
}

// mountLoopCargo mounts img on mnt unless it is mounted already (a bay restart, a host
// reboot: mounts do not survive those, the files do).
func (d *Driver) mountLoopCargo(ctx context.Context, img, mnt string) error {
	if mounted(mnt) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "mount", "-o", "loop,nosuid,nodev,noatime", img, mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %s: %w: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ensureLoopCargo makes sure the file of a bounded cargo is mounted before a container uses
// the volume; volumes without a file are left alone.
func (d *Driver) ensureLoopCargo(ctx context.Context, ref string) error {
	if ref == "" || strings.ContainsAny(ref, "/") {
		return nil
	}
	img, mnt := d.loopPaths(ref)
	if _, err := os.Stat(img); err != nil {
		return nil
	}
	return d.mountLoopCargo(ctx, img, mnt)
}

// dropLoopCargo unmounts and removes a bounded cargo's file; a cargo without one is success.
func (d *Driver) dropLoopCargo(ctx context.Context, name string) error {
	img, mnt := d.loopPaths(name)
	if mounted(mnt) {
		if out, err := exec.CommandContext(ctx, "umount", mnt).CombinedOutput(); err != nil {
			return fmt.Errorf("umount %s: %w: %s", mnt, err, strings.TrimSpace(string(out)))
		}
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cargo file: %w", err)
	}
	if err := os.Remove(mnt); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cargo mount point: %w", err)
	}
	return nil
}

// loopUsage reports the size and use of a mounted bounded cargo.
func (d *Driver) loopUsage(name string) (size, used int64, ok bool) {
	_, mnt := d.loopPaths(name)
	if !mounted(mnt) {
		return 0, 0, false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		return 0, 0, false
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Blocks-st.Bfree) * bs, true
}

// mounted reports whether dir is a mount point in bay's mount namespace.
func mounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces and such octal-escaped.
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == dir {
			return true
		}
	}
	return false
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ms is d in milliseconds with a fraction, for the logs' step durations.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
