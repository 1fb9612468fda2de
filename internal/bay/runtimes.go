package bay

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// Container runtimes a profile may ask for (Profile.Runtime, InstanceSpec.Runtime): the
// low-level runtime that runs its containers. "" is the platform's default (runc on a Docker
// engine unless its operator changed the default; the cluster's default handler on
// Kubernetes). runsc is gVisor: the containers' system calls are served by a user-space
// kernel instead of the host's (docs/gvisor.md).
const (
	ContainerRuntimeDefault = ""
	ContainerRuntimeRunc    = "runc"
	ContainerRuntimeRunsc   = "runsc"
)

// ContainerRuntimes are the values a profile's runtime key accepts.
var ContainerRuntimes = []string{ContainerRuntimeRunc, ContainerRuntimeRunsc}

// ValidContainerRuntime reports whether rt is "" or one of ContainerRuntimes.
func ValidContainerRuntime(rt string) bool {
	return rt == ContainerRuntimeDefault || slices.Contains(ContainerRuntimes, rt)
}

// RuntimeChecker is implemented by drivers that can tell whether their platform runs
// containers under a container runtime (a Docker engine lists its runtimes; a cluster has a
// RuntimeClass or not). It is optional: without it, a missing runtime is found at the first
// start.
type RuntimeChecker interface {
	// CheckRuntime returns nil when containers can run under rt ("" always can), an error
	// of RuntimeMissing when the platform lacks it, and any other error when the platform
	// did not say.
	CheckRuntime(ctx context.Context, rt string) error
}

// ReasonRuntimeMissing is details.reason of the validation_error of a runtime the platform
// lacks.
const ReasonRuntimeMissing = "runtime_missing"

// RuntimeMissing is the validation_error (400) of a container runtime the platform lacks:
// details {reason: runtime_missing, runtime, available, hint}. available lists what the
// platform offers (the engine's runtimes, the cluster's RuntimeClasses); hint says how to get
// rt there.
func RuntimeMissing(rt string, available []string, hint string) *Error {
	msg := "Container runtime " + rt + " is not available on the container platform"
	if len(available) > 0 {
		msg += " (it has: " + strings.Join(available, ", ") + ")"
	}
	if available == nil {
		available = []string{}
	}
	return Errorf(CodeValidation, "%s: %s", msg, hint).WithDetails(map[string]any{
		"reason": ReasonRuntimeMissing, "runtime": rt, "available": available, "hint": hint,
	})
}

// IsRuntimeMissing reports whether the first *Error in err's chain is a RuntimeMissing one.
func IsRuntimeMissing(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeValidation && e.Details["reason"] == ReasonRuntimeMissing
}

// RunscProcessLimit is the RLIMIT_NPROC user code under gVisor gets for a pids limit (the
// Docker driver's per container; on Kubernetes, the nodes' runsc handler's for the kubelet's
// podPidsLimit, which bounds a Pod, and so one gVisor sandbox, as a whole).
//
// Under runc the pids cgroup holds user code alone: a fork at the limit fails with EAGAIN, and
// ship recovers by killing the sandbox user's processes. Under gVisor the cgroup also counts
// the sandbox kernel's own threads and the stub process it keeps per user task (about two host
// tasks per user task plus a few dozen of its own), and when the kernel cannot create a thread
// it dies, taking every process of the sandbox with it. gVisor enforces RLIMIT_NPROC on user
// tasks (processes and threads alike, per uid) with EAGAIN, so a limit below the point where
// the cgroup would run out keeps the sandbox alive and ship's recovery working. Measured on
// this project's machines with a fork loop and a thread loop as uid 1000: the sandbox survived
// at (pids-48)/2 for pids limits of 64, 256, 512, 1024 and 4096, and died past about
// (pids-30)/2.
func RunscProcessLimit(pids int64) int64 {
	return max((pids-48)/2, 8)
}

// RunscPodTasks is what a Kubernetes Pod under runsc holds in its pids cgroup beyond a Docker
// container under runsc: the pause container and a file proxy (gofer) per container. An idle
// ship Pod under runsc held about 54 host tasks on the test node (31-41 under runc); with the
// Docker driver's reserve alone, a fork bomb in a resumed session filled the cgroup and
// gVisor's kernel died.
const RunscPodTasks = 32

// RunscPodProcessLimit is the RLIMIT_NPROC of a node's runsc handler whose kubelet bounds each
// Pod to podPids tasks (podPidsLimit): Kubernetes has no per-Pod rlimit, so the node's handler
// sets it for every Pod it runs.
func RunscPodProcessLimit(podPids int64) int64 {
	return RunscProcessLimit(podPids - RunscPodTasks)
}
