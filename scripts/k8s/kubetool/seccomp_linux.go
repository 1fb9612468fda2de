package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// seccompProfile writes the Localhost seccomp profile of the Kubernetes driver's
// user-namespace opt-in (bay.SeccompUserNamespaces; driver.k8s.seccomp_userns_profile names
// it under the kubelet's seccomp root): the engine's default filter plus clone, clone3,
// unshare, setns and chroot without conditions, which is what a process needs to make user
// and PID namespaces of its own without any capability (Chromium's sandbox does). The default
// allows those calls only with CAP_SYS_ADMIN, which sandboxes never have; everything else it
// refuses stays refused. It is the Docker driver's filter for the same opt-in.
//
// containerd reads a Localhost profile as an OCI seccomp section, without the Docker format's
// conditions: the profile is rendered here for this node's kernel and architectures and for a
// container holding none of the capabilities the conditions name (bay grants at most SETUID,
// SETGID and KILL, which none of them name).
func seccompProfile(args []string) error {
	fs := flag.NewFlagSet("seccomp", flag.ExitOnError)
	out := fs.String("out", "", "file to write")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("-out is required")
	}
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
		Names:  []string{"clone", "clone3", "unshare", "setns", "chroot"},
		Action: specs.ActAllow,
	}})
	docker, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("seccomp profile: %w", err)
	}
	noCaps := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	oci, err := seccomp.LoadProfile(string(docker), noCaps)
	if err != nil {
		return fmt.Errorf("seccomp profile: %w", err)
	}
	b, err := json.MarshalIndent(oci, "", " ")
	if err != nil {
		return fmt.Errorf("seccomp profile: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}
