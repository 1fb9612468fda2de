package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// StopChild freezes, with SIGSTOP from the host, the child named comm of the process initPID
// (a container's init as the engine reports it: State.Pid) and returns the function that
// resumes it. Tests use it to freeze a sandbox's runtime, which the sandbox itself holds no
// capability to do.
func StopChild(initPID int, comm string) (resume func(), err error) {
	init := strconv.Itoa(initPID)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		name, _ := os.ReadFile(d + "/comm")
		stat, _ := os.ReadFile(d + "/stat")
		// stat: "pid (comm) state ppid ..."
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if strings.TrimSpace(string(name)) == comm && len(f) > 1 && f[1] == init {
			pid, _ := strconv.Atoi(filepath.Base(d))
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return nil, fmt.Errorf("SIGSTOP %s (host pid %d): %w", comm, pid, err)
			}
			return func() { _ = syscall.Kill(pid, syscall.SIGCONT) }, nil
		}
	}
	return nil, fmt.Errorf("no %s process under the process %s", comm, init)
}
