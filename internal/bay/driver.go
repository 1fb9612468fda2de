package bay

import (
	"context"
	"io"
	"sync"
	"time"
)

// This file is the whole driver contract: what bay asks of a container platform (the Docker
// engine, Kubernetes) and what it may rely on in return. The unit of compute is an *instance*:
// everything one session of a sandbox runs — one or more runtime containers sharing the
// sandbox's cargo volume, their network, and its policy — created and started all-or-nothing
// and destroyed as one. Docker realises an instance as containers (several share the network
// namespace of one, or under gVisor a network of their own); Kubernetes as one Pod. The services above never name containers,
// networks or hostnames: they hand in an InstanceSpec and get endpoints back.

// ContainerState is a driver-neutral container state.
type ContainerState string

const (
	ContainerCreated  ContainerState = "created"
	ContainerRunning  ContainerState = "running"
	ContainerExited   ContainerState = "exited"
	ContainerRemoving ContainerState = "removing"
	ContainerPaused   ContainerState = "paused"
)

// Mount is an extra host folder mounted into a container (a skill, read-only).
type Mount struct {
	Source   string // host path
	Target   string // absolute path in the container
	ReadOnly bool
	// Snapshot says that Source (a directory tree or one file, ReadOnly) is content of bay's
	// own that never changes under that path (a skill version, a skills index): a driver may
	// deliver a copy of it read from bay's filesystem instead of binding the path (the
	// Kubernetes driver does, since the path exists on bay's host only). Without it the
	// mount is a live folder that the platform binds as it is.
	Snapshot bool
}

// NetworkMode says what an instance may reach.
type NetworkMode string

const (
	// NetworkIsolated: the instance's containers reach each other (by container name) and
	// nothing of other instances; what lies beyond (the host, private ranges, the internet) is
	// the host guard's and, later, the egress policy's to decide.
	NetworkIsolated NetworkMode = "isolated"
	// NetworkNone: loopback only. NetworkAllowlist: only the names and ranges of Allow, through
	// bay's resolver and egress gateway. NetworkOpen: what NetworkIsolated reaches. See
	// netpolicy.go.
	NetworkNone      NetworkMode = "none"
	NetworkAllowlist NetworkMode = "allowlist"
	NetworkOpen      NetworkMode = "open"
)

// NetworkPolicy is an instance's (and a sandbox's) network policy. The zero value is
// NetworkIsolated. Allow and Deny are entries of ParseNetworkEntry, used by NetworkAllowlist.
type NetworkPolicy struct {
	Mode  NetworkMode `json:"mode"`
	Allow []string    `json:"allow,omitempty"`
	Deny  []string    `json:"deny,omitempty"`
}

// Limits bound one container. Zero values take the driver's defaults (no CPU or memory limit,
// the driver's pids limit).
type Limits struct {
	NanoCPUs    int64
	MemoryBytes int64
	PidsLimit   int64
	// ShmBytes sizes /dev/shm (a browser needs more than the engine's 64 MiB); 0 = default.
	ShmBytes int64
	// TmpBytes bounds each of /tmp and /var/tmp; 0 = the driver's default. The root
	// filesystem is read-only, so these, /dev/shm and the cargo are the only places a
	// container can write: nothing user code writes grows the host's disk unbounded.
	// Drivers back them with memory counted in MemoryBytes.
	TmpBytes int64
}

// ContainerSpec is one container of an instance. Every driver hardens every container
// whatever the spec says: all capabilities dropped but CapAdd, no-new-privileges, never
// privileged, the given non-root user, runtime ports reachable by bay only.
type ContainerSpec struct {
	// Name is unique within the instance (lowercase letters, digits, '-'); the instance's
	// other containers reach this one by it.
	Name        string
	RuntimeType string // RuntimeShip, RuntimeGull: which runtime client talks to it
	Image       string // must exist on the platform (there is no registry)
	Env         map[string]string
	// Port is the runtime's HTTP port in the container. It differs from the other containers'
	// of the instance: they may share one network namespace (a Pod; the Docker driver).
	Port   int
	Limits Limits
	User   string   // "uid:gid"; "" = the driver's default (1000:1000)
	CapAdd []string // capabilities the runtime needs on top of none (e.g. SETUID)
	Mounts []Mount
	// Seccomp is the system-call filter: SeccompDefault or SeccompUserNamespaces.
	Seccomp string
	// Command, when set, makes the container a one-shot: it runs this argv (replacing the
	// image's entrypoint and command) in WorkDir instead of a runtime, Port and CapAdd must be
	// empty, the image's runtime capabilities are not granted, and the process may exit at
	// once. WaitInstance collects its output and exit; DestroyInstance removes it.
	Command []string
	WorkDir string // absolute; "" = the image's
	// StartFirst asks the driver to start this container before the instance's others, which
	// it starts once the platform has started this one: a runtime that is slow to become
	// ready (gull's Chromium) then does not share its start with the others'. A driver that
	// starts an instance's containers together (a pod) ignores it.
	StartFirst bool
}

// Seccomp filters a ContainerSpec may ask for.
const (
	// SeccompDefault is the platform's default filter.
	SeccompDefault = ""
	// SeccompUserNamespaces is the default filter plus what making user and PID namespaces
	// takes without capabilities (clone, unshare, setns, chroot): opt-in, for a runtime that
	// sandboxes its own children, such as Chromium's renderers.
	SeccompUserNamespaces = "userns"
)

// AddableCaps are the only capabilities a ContainerSpec may add back (CapAdd, without the CAP_
// prefix): what a runtime needs to run user processes under another uid and signal them.
// Drivers refuse any other.
var AddableCaps = []string{"SETUID", "SETGID", "KILL"}

// InstanceSpec is everything a driver needs to run one session.
type InstanceSpec struct {
	// Name identifies the instance on the platform (unique; derived from the session id).
	// The driver derives the names of the objects it creates from it.
	Name string
	// Labels are written on every object of the instance; ListInstances filters on them.
	Labels map[string]string
	// VolumeRef is the cargo volume (a driver ref from CreateVolume), mounted read-write at
	// MountPath in every container. It must exist; "" = no cargo volume.
	VolumeRef string
	MountPath string
	// Containers are started together; the first is the primary (at least one).
	Containers []ContainerSpec
	Network    NetworkPolicy
	// Runtime is the container runtime of every container of the instance ("" = the
	// platform's default; ContainerRuntimes). A platform that lacks it refuses the create with
	// an error of RuntimeMissing.
	Runtime string
	// LateStart lets CreateInstance return once the containers marked StartFirst run, with the
	// others still starting in the background (Instance.Late): a caller can use the first
	// while the rest start. It changes nothing for a spec without both kinds of container, nor
	// on a platform that starts an instance's containers together (a pod).
	LateStart bool
	// LateStartHold, with LateStart, makes the late containers wait for the caller's
	// Late.Begin (typically once the first runtimes are ready, so that their own start does
	// not compete with the late containers' for the host's cores), at most this long: a
	// caller that never calls Begin delays the late start by this much, no more. 0 starts
	// them at once.
	LateStartHold time.Duration
}

// InstanceContainer is what a driver reports about one container of an instance.
type InstanceContainer struct {
	Name        string
	RuntimeType string
	ID          string // the platform's id, for logs and operators
	State       ContainerState
	// Endpoint is the runtime's base URL as bay reaches it ("http://10.1.2.3:8123"); "" unless
	// the container runs and is reachable.
	Endpoint string
}

// Instance is what a driver reports about an instance.
type Instance struct {
	Name      string
	Labels    map[string]string
	CreatedAt time.Time
	// Containers are in spec order. An instance whose creation was interrupted (a bay killed
	// mid-create) may have fewer than its spec, or none and only leftovers such as a network:
	// it is still listed, so that it can be destroyed.
	Containers []InstanceContainer
	// Late is set only in what CreateInstance returns for a spec with LateStart when it
	// returned before every container was started: those it left starting are in state
	// ContainerCreated, without an endpoint, until Late ends.
	Late *LateStart
}

// LateStart is the background start of the containers CreateInstance returned without. It ends
// once they all run (Wait returns the whole instance, every container running with its
// endpoint) or once it failed (Wait returns the error) after the driver removed everything of
// the instance, early containers included, as a failed CreateInstance does: the instance is
// still all-or-nothing. It is bounded by CreateInstance's ctx, so a ctx that ends first fails
// it. DestroyInstance meanwhile removes the late containers too (the late start then fails,
// unless it had just finished): nothing of the instance is left once both have returned.
type LateStart struct {
	done  chan struct{}
	begin chan struct{}
	once  sync.Once
	inst  Instance
	err   error
}

// NewLateStart returns a late start that has not ended (for drivers).
func NewLateStart() *LateStart {
	return &LateStart{done: make(chan struct{}), begin: make(chan struct{})}
}

// Begin lets a late start held by InstanceSpec.LateStartHold go on now; later calls do nothing.
func (l *LateStart) Begin() { l.once.Do(func() { close(l.begin) }) }

// Hold waits, for drivers, until the caller's Begin, hold passed or ctx ended, and returns
// ctx's error in the last case. hold 0 returns at once.
func (l *LateStart) Hold(ctx context.Context, hold time.Duration) error {
	if hold <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-l.begin:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Finish ends the late start with its outcome; a driver calls it exactly once.
func (l *LateStart) Finish(inst Instance, err error) {
	inst.Late = nil
	l.inst, l.err = inst, err
	close(l.done)
}

// Done is closed once the late start has ended.
func (l *LateStart) Done() <-chan struct{} { return l.done }

// Wait waits for the end of the late start and returns its outcome, or ctx's error when ctx
// ends first (the start goes on).
func (l *LateStart) Wait(ctx context.Context) (Instance, error) {
	select {
	case <-l.done:
		if l.err != nil {
			return Instance{}, l.err
		}
		return l.inst, nil
	case <-ctx.Done():
		return Instance{}, ctx.Err()
	}
}

// Running reports whether the instance has containers and every one of them runs: a session
// whose sidecar died is dead as a whole.
func (i Instance) Running() bool {
	if len(i.Containers) == 0 {
		return false
	}
	for _, c := range i.Containers {
		if c.State != ContainerRunning {
			return false
		}
	}
	return true
}

// Driver runs instances and keeps cargo volumes. Every method is bounded by ctx. Errors wrap
// ErrNotFound / ErrConflict where those apply and are otherwise unclassified (internal).
// Implementations: internal/bay/docker (the real engine) and internal/bay/fake (scriptable);
// both pass internal/bay/drivertest.
type Driver interface {
	// Ping checks that the platform is reachable.
	Ping(ctx context.Context) error

	// CreateVolume creates a volume and returns its driver ref. Creating a volume that
	// already exists with the same name succeeds (idempotent retry; the existing one is kept).
	CreateVolume(ctx context.Context, spec VolumeSpec) (ref string, err error)
	// DeleteVolume removes a volume; a missing volume is success; a volume still in use by a
	// container wraps ErrConflict.
	DeleteVolume(ctx context.Context, ref string) error
	// InspectVolume returns the volume or an error wrapping ErrNotFound.
	InspectVolume(ctx context.Context, ref string) (VolumeInfo, error)
	// ListVolumes lists volumes carrying all the given labels.
	ListVolumes(ctx context.Context, labels map[string]string) ([]VolumeInfo, error)

	// CreateInstance creates and starts every container of spec and returns the instance with
	// an endpoint per container (with spec.LateStart it may return earlier: see
	// InstanceSpec.LateStart and Instance.Late). It is all-or-nothing: on any failure, or when ctx ends, it
	// removes what it made (on a context of its own) before returning the error. A name in use
	// wraps ErrConflict; a missing volume ErrNotFound; a missing image is an unclassified error
	// that names the image and says how to build it. It does not wait for the runtimes to
	// answer: readiness is the runtime clients' business.
	CreateInstance(ctx context.Context, spec InstanceSpec) (Instance, error)
	// InspectInstance returns the instance as the platform has it now, or an error wrapping
	// ErrNotFound when nothing of it exists. A container that runs but can never be reached
	// again (it lost the network namespace it shared with another) is reported exited.
	InspectInstance(ctx context.Context, name string) (Instance, error)
	// DestroyInstance removes everything of the instance, including parts whose creation is
	// still under way, and returns once they are gone (a missing instance is success). Bounded
	// by ctx: well under a second on an idle engine, longer under load, so callers give it a
	// generous detached deadline.
	DestroyInstance(ctx context.Context, name string) error
	// ListInstances lists the instances (whole or partial) carrying all the given labels.
	ListInstances(ctx context.Context, labels map[string]string) ([]Instance, error)
	// WatchDeaths calls died with the name of every instance one of whose containers stops
	// running (exits, is killed, is OOM-killed), among the instances carrying all the given
	// labels, until ctx ends (nil) or the platform's event stream fails (its error; the caller
	// watches again). died runs on the watcher's goroutine and must not block. Deaths are
	// hints that make the next call re-check the instance at once: a missed one only waits
	// for the next liveness probe.
	WatchDeaths(ctx context.Context, labels map[string]string, died func(instance string)) error
	// WaitInstance waits for the primary container of an instance (a one-shot: see
	// ContainerSpec.Command) to exit, then copies its whole stdout and stderr into the writers
	// (a second call, e.g. after a bay restart, copies them again) and returns how it ended.
	// When ctx ends first (a timeout, a cancel) it kills the process, still copies the output
	// it left, and returns the exit with an error wrapping ctx's. A missing instance wraps
	// ErrNotFound. The platform keeps a bounded amount of output (Docker: 128 MiB a stream).
	WaitInstance(ctx context.Context, name string, stdout, stderr io.Writer) (Exit, error)
}

// InstanceFileSweeper is a Driver that keeps files of its own per instance beside the
// platform's objects (the Docker driver: the name files of instances under gVisor). Orphan GC
// removes those of instances of which nothing exists any more.
type InstanceFileSweeper interface {
	// StaleInstanceFiles lists the instances whose files were written before olderThan (the
	// driver may ask for an older age) and of which the platform has nothing.
	StaleInstanceFiles(ctx context.Context, olderThan time.Time) ([]string, error)
	// RemoveInstanceFiles removes an instance's files; missing ones are success.
	RemoveInstanceFiles(ctx context.Context, instance string) error
}

// SnapshotCollector is implemented by drivers that keep copies of snapshot mounts
// (Mount.Snapshot) as objects of their own, shared by instances and outliving each (the
// Kubernetes driver's ConfigMaps). The orphan GC asks it to remove the unused ones.
type SnapshotCollector interface {
	// CollectSnapshots removes the copies labelled with deployment ("" = those without a
	// deployment label) that no instance mounts and that were last used before usedBefore;
	// with dryRun it removes nothing. It returns what it removed (or would), and an error
	// joining the removals that failed.
	CollectSnapshots(ctx context.Context, deployment string, usedBefore time.Time, dryRun bool) ([]string, error)
}

// Exit is how a one-shot container ended.
type Exit struct {
	Code      int
	OOMKilled bool // killed by the kernel for exceeding its memory limit
}

// VolumeSpec describes a cargo volume.
type VolumeSpec struct {
	Name   string
	Labels map[string]string
	// SizeBytes bounds what the volume holds: writes beyond it fail inside the sandbox with
	// "No space left on device" and the host is untouched. 0 = unbounded. A driver that
	// cannot enforce a bound creates the volume unbounded and reports SizeBytes 0 for it.
	SizeBytes int64
}

// VolumeInfo is what a driver reports about one volume.
type VolumeInfo struct {
	Name      string
	Labels    map[string]string
	CreatedAt time.Time
	// SizeBytes is the enforced bound (0 = none); UsedBytes what the volume holds now, -1
	// when the driver cannot tell cheaply.
	SizeBytes int64
	UsedBytes int64
}
