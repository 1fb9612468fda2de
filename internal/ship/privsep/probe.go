package privsep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ProbeArg, as the first argument of ship's binary, makes it run RunProbe instead of serving
// (cmd/ship): the process Check starts.
const ProbeArg = "__privsep-probe"

// probeTimeout bounds Check's probe (a fork and exec of ship's binary, then a few dozen
// system calls: 2-3 ms under runc, 20-25 ms under gVisor, measured in a container).
const probeTimeout = 20 * time.Second

// Check makes sure that the separation holds before ship serves: it starts exe (ship's own
// binary) with ProbeArg exactly as user code is started (the sandbox user, through Apply), and
// the probe tries what user code must not manage: hold any id but the sandbox user's or a
// supplementary group, hold or regain a capability (effective, permitted, inheritable,
// ambient; no-new-privileges must be set, or a set-user-id program such as sudo would give
// root back), take ship's uid or root's, signal ship, or read ship's memory or environment
// (its runtime token) through /proc. Any of these is an error: ship must not serve then. It
// is the same on runc and on gVisor, whose kernel is a different implementation of the same
// rules.
func (u *User) Check(ctx context.Context, exe string, shipUID int) error {
	if u == nil {
		return errors.New("check privileges: no separate sandbox user")
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, ProbeArg, strconv.Itoa(os.Getpid()), strconv.Itoa(shipUID))
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	u.Apply(cmd.SysProcAttr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("check privileges: run the probe %s: %w (%s)", exe, err, strings.TrimSpace(stderr.String()))
	}
	var r ProbeResult
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("check privileges: the probe's answer %q: %w", out, err)
	}
	if r.UID != u.UID || r.GID != u.GID {
		return fmt.Errorf("check privileges: the probe ran as %d:%d, want %d:%d", r.UID, r.GID, u.UID, u.GID)
	}
	if len(r.Failures) > 0 {
		return fmt.Errorf("check privileges: user code could %s", strings.Join(r.Failures, "; "))
	}
	return nil
}

// ProbeResult is what the probe answers on its standard output: the ids it ran as and what
// it managed that user code must not.
type ProbeResult struct {
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	Failures []string `json:"failures"`
}

// RunProbe is the probe (ship's binary with ProbeArg): args are ship's pid and uid. It writes
// a ProbeResult to stdout.
func RunProbe(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("probe: want ship's pid and uid, got %q", args)
	}
	shipPID, err1 := strconv.Atoi(args[0])
	shipUID, err2 := strconv.Atoi(args[1])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	r := probe(shipPID, shipUID)
	return json.NewEncoder(os.Stdout).Encode(r)
}

// probe runs the checks on the calling thread (the probe is single-purpose: no goroutine of
// its own changes an id; a change that succeeds fails the check whichever thread made it).
func probe(shipPID, shipUID int) ProbeResult {
	var fail []string
	failf := func(format string, args ...any) { fail = append(fail, fmt.Sprintf(format, args...)) }
	ruid, euid, suid := unix.Getresuid()
	rgid, egid, sgid := unix.Getresgid()
	r := ProbeResult{UID: ruid, GID: rgid}
	if euid != ruid || suid != ruid || ruid == 0 || ruid == shipUID {
		failf("run with uids %d/%d/%d (real/effective/saved)", ruid, euid, suid)
	}
	if egid != rgid || sgid != rgid || rgid == 0 {
		failf("run with gids %d/%d/%d (real/effective/saved)", rgid, egid, sgid)
	}
	if groups, err := unix.Getgroups(); err != nil || len(groups) > 0 {
		failf("hold supplementary groups %v (%v)", groups, err)
	}
	if eff, prm, inh, err := threadCaps(0); err != nil || eff|prm|inh != 0 {
		failf("hold capabilities: effective %016x, permitted %016x, inheritable %016x (%v)", eff, prm, inh, err)
	}
	for c := uintptr(0); c < 64; c++ {
		set, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, c, 0, 0)
		if err != nil {
			break // EINVAL: past the last capability, or no ambient capabilities at all (gVisor)
		}
		if set != 0 {
			failf("hold the ambient capability %d", c)
		}
	}
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 1 {
		failf("gain privileges through execve (no-new-privileges is %d, %v): a set-user-id program would run as its owner", nnp, err)
	}
	for _, id := range []int{0, shipUID} {
		// Raw system calls: the syscall package would try every thread.
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id), uintptr(id), uintptr(id)); e == 0 {
			failf("switch to uid %d", id)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id), uintptr(id), uintptr(id)); e == 0 {
			failf("switch to gid %d", id)
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e == 0 {
		failf("set its supplementary groups")
	}
	if err := unix.Kill(shipPID, 0); !errors.Is(err, unix.EPERM) {
		failf("signal ship (pid %d): %v", shipPID, err)
	}
	for _, f := range []string{"environ", "mem"} {
		p := fmt.Sprintf("/proc/%d/%s", shipPID, f)
		if fh, err := os.Open(p); err == nil {
			fh.Close()
			failf("open %s", p)
		}
	}
	r.Failures = fail
	return r
}
