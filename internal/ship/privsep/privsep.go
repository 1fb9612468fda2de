// Package privsep separates ship's privileges from the code it runs.
//
// In a sandbox container ship starts as root with only CAP_SETUID, CAP_SETGID
// and CAP_KILL (the engine drops every other capability and sets
// no-new-privileges). Drop then switches every thread of ship to its own
// system user (uid ShipUID) keeping exactly those three capabilities, and
// marks ship non-dumpable. User code (kernel, shells, terminals, background
// processes) is started as the sandbox user (uid 1000) with no capability at
// all, so it can neither read ship's /proc files (environ, mem: another uid,
// and root-owned once ship is non-dumpable) nor signal it (another uid). Ship
// keeps CAP_KILL to signal the process groups of user code and CAP_SETUID /
// CAP_SETGID to start it as uid 1000 and to act on the workspace as uid 1000
// (Do: the effective uid and gid of one locked thread), so files it writes
// belong to the sandbox user and the workspace's permissions apply to its file
// API exactly as they apply to user code. Before ship serves, Check starts a
// probe as user code is started and refuses if it could regain anything.
//
// The same holds under gVisor (runsc), whose kernel keeps credentials per
// thread as Linux does but implements neither setfsuid/setfsgid nor ambient
// capabilities (nor a CapAmb line in /proc): nothing here relies on them.
//
// When ship does not start as root (a developer running it by hand, or an
// engine configured to start the container as uid 1000) there is nothing to
// separate: a nil *User runs everything as ship's own user.
package privsep

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ship's own system user in the image (image/hooks/customize.sh).
const (
	ShipUID  = 999
	ShipGID  = 999
	ShipName = "ship"
)

// Kept lists the capabilities ship keeps after Drop: start user processes as
// the sandbox user (SETUID, SETGID; also Do's effective ids) and signal them
// (KILL).
var Kept = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL}

// User is the sandbox user that user code runs as while ship runs as another
// user. A nil *User means no separation: everything runs as ship's own user.
type User struct {
	UID, GID int
	Name     string // user name for USER/LOGNAME
}

// Credential is what a user process must be started with: the sandbox user,
// no supplementary group. Nil for a nil User (inherit ship's).
func (u *User) Credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}
}

// Apply sets attr's credential so the process starts as the sandbox user.
// Ship's ambient capability set is empty (Drop clears it), so the process
// holds no capability after execve.
func (u *User) Apply(attr *syscall.SysProcAttr) {
	if u == nil {
		return
	}
	attr.Credential = u.Credential()
	attr.AmbientCaps = nil
}

// Do runs fn with the effective identity of the sandbox user on a locked OS thread: files and
// directories fn creates belong to the sandbox user and permission checks are those the
// sandbox user gets. Only this thread's effective uid and gid change (its real and saved ids
// stay ship's, so meanwhile the sandbox user can neither signal nor trace it, and its
// capabilities are kept: both ids are non-zero). fn must do its system calls on the calling
// goroutine. Without separation fn just runs.
//
// The effective ids and not the filesystem ids (setfsuid/setfsgid) are what changes: gVisor
// does not implement setfsuid/setfsgid (ENOSYS), and the kernel's filesystem ids follow the
// effective ones.
func (u *User) Do(fn func() error) (err error) {
	if u == nil {
		return fn()
	}
	runtime.LockOSThread()
	euid, egid := unix.Geteuid(), unix.Getegid()
	// Restore ship's identity however fn ends (a panic included). A thread
	// whose identity cannot be restored stays locked to this goroutine and
	// ends with it instead of running others.
	defer func() {
		if rerr := setEffective(euid, egid); rerr != nil {
			err = errors.Join(err, rerr)
			return
		}
		runtime.UnlockOSThread()
	}()
	if err := setEffective(u.UID, u.GID); err != nil {
		return err
	}
	return fn()
}

// setEffective sets the calling thread's effective gid and uid, and only this thread's (the
// syscall package would change every thread), then checks that they took. The gid changes
// first: from an effective uid 0 (tests run as root) the uid change drops the capabilities.
// Going back needs none: ship's ids are the thread's real and saved ones.
func setEffective(uid, gid int) error {
	if unix.Getegid() != gid {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)); e != 0 {
			return fmt.Errorf("setresgid -1 %d -1: %w", gid, e)
		}
	}
	if unix.Geteuid() != uid {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			return fmt.Errorf("setresuid -1 %d -1: %w", uid, e)
		}
	}
	if got, got2 := unix.Geteuid(), unix.Getegid(); got != uid || got2 != gid {
		return fmt.Errorf("thread effective ids %d:%d, want %d:%d", got, got2, uid, gid)
	}
	return raiseKept()
}

// raiseKept makes the calling thread's effective capabilities those of Kept that it
// permits, when they are not. Ship in a sandbox has exactly those and keeps them across its
// non-zero uid changes: nothing to do. From an effective uid 0 (ship run as root by hand, and
// the tests) the change to the sandbox user cleared them, and without SETUID and SETGID a
// process started on this thread (a terminal's shell) could not take the sandbox user's ids;
// none of root's other capabilities (reading any file) comes back. Going back to uid 0 restores
// them all (the kernel copies the permitted set).
func raiseKept() error {
	var keep uint64
	for _, c := range Kept {
		keep |= 1 << c
	}
	eff, prm, inh, err := threadCaps(0)
	if err != nil {
		return err
	}
	if unix.Geteuid() == 0 || eff&keep == prm&keep {
		return nil
	}
	want := eff | prm&keep
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(want), Permitted: uint32(prm), Inheritable: uint32(inh)},
		{Effective: uint32(want >> 32), Permitted: uint32(prm >> 32), Inheritable: uint32(inh >> 32)},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("raise capabilities %016x: %w", want, err)
	}
	return nil
}

// Sandbox returns the sandbox user (uid/gid), named from /etc/passwd when
// there is an entry.
func Sandbox(uid, gid int) *User {
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return &User{UID: uid, GID: gid, Name: name}
}

// Drop switches every thread of the process from root to uid/gid (no
// supplementary groups) keeping only the capabilities in keep (effective and
// permitted; inheritable and ambient empty), drops every other capability
// from the bounding set when it may, and makes the process non-dumpable. It
// must run before ship starts any goroutine that makes system calls, and only
// in a binary without cgo (it needs syscall.AllThreadsSyscall).
func Drop(uid, gid int, keep []uintptr) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("drop privileges: not running as root (euid %d)", os.Geteuid())
	}
	var mask [2]uint32
	for _, c := range keep {
		mask[c/32] |= 1 << (c % 32)
	}
	// The bounding set is per thread and needs CAP_SETPCAP to shrink, which
	// an engine dropping all capabilities does not give; no-new-privileges
	// makes it moot then.
	if have, _, _, err := threadCaps(0); err == nil && have&(1<<unix.CAP_SETPCAP) != 0 {
		for c := uintptr(0); c <= 63; c++ {
			if mask[c/32]&(1<<(c%32)) != 0 {
				continue
			}
			if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); e != 0 && e != syscall.EINVAL {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, e)
			}
		}
	}
	// Keep the permitted set across the uid change, on every thread.
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_KEEPCAPS: %w", e)
	}
	// The syscall package applies these to every thread.
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid %d: %w", uid, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0]},
		{Effective: mask[1], Permitted: mask[1]},
	}
	_, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	if e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 0, 0); e != 0 {
		return fmt.Errorf("prctl PR_SET_KEEPCAPS 0: %w", e)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 && e != syscall.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", e)
	}
	// The uid change already made the process non-dumpable (fs.suid_dumpable
	// is 0 by default); say it explicitly, it is what keeps /proc/<ship>
	// root-owned.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return Verify(uid, gid, uint64(mask[0])|uint64(mask[1])<<32)
}

// Verify checks every thread of the process: real, effective and saved ids uid/gid, no
// supplementary group (from /proc), effective and permitted capabilities exactly caps and
// inheritable none (capget of each thread), ambient none (/proc's CapAmb where the kernel has
// it; gVisor's procfs has no such line and gVisor has no ambient capabilities, which prctl
// says: see noAmbient).
func Verify(uid, gid int, caps uint64) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("verify privileges: %w", err)
	}
	ambientSeen := true
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread exited
		}
		st := ParseStatus(string(b))
		// Uid and Gid: real, effective, saved and filesystem id (gVisor, which has none,
		// reports the effective one).
		want := map[string]string{
			"Uid": fmt.Sprintf("%d %d %d %d", uid, uid, uid, uid), "Gid": fmt.Sprintf("%d %d %d %d", gid, gid, gid, gid), "Groups": "",
		}
		for k, v := range want {
			if got := strings.Join(strings.Fields(st[k]), " "); got != v {
				return fmt.Errorf("verify privileges: thread %d has %s %q, want %q", tid, k, got, v)
			}
		}
		if amb, ok := st["CapAmb"]; !ok {
			ambientSeen = false
		} else if amb != "0000000000000000" {
			return fmt.Errorf("verify privileges: thread %d has ambient capabilities %s", tid, amb)
		}
		eff, prm, inh, err := threadCaps(tid)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread exited
		}
		if err != nil {
			return fmt.Errorf("verify privileges: thread %d: %w", tid, err)
		}
		if eff != caps || prm != caps || inh != 0 {
			return fmt.Errorf("verify privileges: thread %d has capabilities effective %016x, permitted %016x, inheritable %016x; want %016x, %016x, 0",
				tid, eff, prm, inh, caps, caps)
		}
	}
	if !ambientSeen {
		if err := noAmbient(); err != nil {
			return fmt.Errorf("verify privileges: %w", err)
		}
	}
	return nil
}

// threadCaps returns the effective, permitted and inheritable capabilities of thread tid
// (capget; 0 = the calling thread).
func threadCaps(tid int) (eff, prm, inh uint64, err error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3, Pid: int32(tid)}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, 0, 0, fmt.Errorf("capget: %w", err)
	}
	join := func(lo, hi uint32) uint64 { return uint64(lo) | uint64(hi)<<32 }
	return join(data[0].Effective, data[1].Effective), join(data[0].Permitted, data[1].Permitted),
		join(data[0].Inheritable, data[1].Inheritable), nil
}

// noAmbient checks that no thread holds an ambient capability, asking each thread
// (prctl PR_CAP_AMBIENT_IS_SET for every capability the kernel knows, which answers EINVAL
// past the last one). A kernel that answers EINVAL for the first has no ambient capabilities
// at all (gVisor). Threads that answer differently end the process (AllThreadsSyscall): a
// thread with an ambient capability is reason enough.
func noAmbient() error {
	for c := uintptr(0); c < 64; c++ {
		r, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, c)
		switch {
		case e == syscall.EINVAL:
			return nil // past the last capability, or no ambient capabilities at all
		case e != 0:
			return fmt.Errorf("prctl PR_CAP_AMBIENT_IS_SET %d: %w", c, e)
		case r != 0:
			return fmt.Errorf("ambient capability %d is set", c)
		}
	}
	return nil
}

// ParseStatus parses /proc/<pid>/status into its fields.
func ParseStatus(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// KillAll SIGKILLs every process of the sandbox user and waits (up to about
// a second) until none is left running; it returns how many there were. This
// is how ship recovers when user code exhausted the sandbox's pids limit (a
// fork bomb): no process can be started until they are gone.
//
// The signal is sent with kill(2) for pid -1 from a locked thread whose
// effective uid is the sandbox user's and whose effective set lacks CAP_KILL,
// so the kernel signals exactly the processes that user may signal (its own)
// and none it is forking meanwhile escapes (fork waits while the kernel walks
// the process list). Ship (another uid) and pid 1 are never hit. Without
// separation (u nil) it does nothing: ship would be among the processes.
func (u *User) KillAll() (int, error) {
	if u == nil {
		return 0, errors.New("kill all: no separate sandbox user")
	}
	before := len(u.Processes())
	for round := 0; round < 20; round++ {
		if err := u.killAllOnce(); err != nil {
			return before, err
		}
		if len(u.Processes()) == 0 {
			return before, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return before, fmt.Errorf("kill all: %d processes of uid %d still running", len(u.Processes()), u.UID)
}

func (u *User) killAllOnce() error {
	runtime.LockOSThread()
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var saved [2]unix.CapUserData
	if err := unix.Capget(&hdr, &saved[0]); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("capget: %w", err)
	}
	euid := os.Geteuid()
	// Only this thread: the syscall package would change every thread.
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(u.UID), ^uintptr(0)); e != 0 {
		runtime.UnlockOSThread()
		return fmt.Errorf("setresuid -1 %d -1: %w", u.UID, e)
	}
	lowered := saved
	lowered[unix.CAP_KILL/32].Effective &^= 1 << (unix.CAP_KILL % 32)
	err := unix.Capset(&hdr, &lowered[0])
	if err == nil {
		if got := unix.Geteuid(); got != u.UID {
			err = fmt.Errorf("thread euid %d, want %d", got, u.UID)
		} else if kerr := unix.Kill(-1, unix.SIGKILL); kerr != nil && kerr != unix.ESRCH {
			err = fmt.Errorf("kill -1: %w", kerr)
		}
	}
	// Restore the thread; if that fails it stays locked and ends with its
	// goroutine instead of running others with the wrong identity.
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(euid), ^uintptr(0)); e != 0 {
		return errors.Join(err, fmt.Errorf("restore euid %d: %w", euid, e))
	}
	if cerr := unix.Capset(&hdr, &saved[0]); cerr != nil {
		return errors.Join(err, fmt.Errorf("restore capabilities: %w", cerr))
	}
	runtime.UnlockOSThread()
	return err
}

// Processes lists the pids of the live (not zombie) processes of the sandbox
// user, from /proc.
func (u *User) Processes() []int {
	var out []int
	u.eachProcess(func(pid int, _ map[string]string) { out = append(out, pid) })
	return out
}

// eachProcess calls fn with the pid and the parsed /proc status of every live (not zombie)
// process of the sandbox user.
func (u *User) eachProcess(fn func(pid int, status map[string]string)) {
	want := strconv.Itoa(u.UID)
	EachProcess(func(pid int, dir string) {
		b, err := os.ReadFile(dir + "/status")
		if err != nil {
			return
		}
		st := ParseStatus(string(b))
		uid := strings.Fields(st["Uid"])
		if len(uid) > 0 && uid[0] == want && !strings.HasPrefix(st["State"], "Z") {
			fn(pid, st)
		}
	})
}

// AtProcessLimit reports whether the sandbox user has no room left under RLIMIT_NPROC for a
// command and one child of it. The limit is ship's own, which everything it starts inherits;
// without one (runc sandboxes, where the pids cgroup refuses a fork with EAGAIN instead) it
// reports false without reading /proc. Under gVisor bay sets one below the pids cgroup's limit,
// and a fork bomb then fills it with the user's tasks: ship's fork of the next command still
// succeeds (it forks as itself), but that command's own forks fail, so ship has to tell from
// the count that the sandbox is exhausted. Threads count like processes, as the limit counts
// them.
func (u *User) AtProcessLimit() bool {
	if u == nil {
		return false
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return false
	}
	var tasks uint64
	u.eachProcess(func(_ int, st map[string]string) {
		n, err := strconv.ParseUint(strings.TrimSpace(st["Threads"]), 10, 32)
		if err != nil || n == 0 {
			n = 1
		}
		tasks += n
	})
	return tasks+2 > lim.Cur
}

// EachProcess calls fn with the pid and the /proc directory of every process.
func EachProcess(fn func(pid int, dir string)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			fn(pid, "/proc/"+e.Name())
		}
	}
}
