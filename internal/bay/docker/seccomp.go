package docker

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// userNamespacesProfile is the engine's default seccomp profile plus clone, clone3, unshare,
// setns and chroot without conditions: what a process needs to make user and PID namespaces
// of its own without any capability (Chromium's sandbox does, for its renderers). The
// default profile allows those calls only with CAP_SYS_ADMIN, which sandboxes never have.
// Everything else the default refuses stays refused.
var userNamespacesProfile = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
		Names:  []string{"clone", "clone3", "unshare", "setns", "chroot"},
		Action: specs.ActAllow,
	}})
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	return string(b), nil
})
