package bay

import "context"

// ContainerUsage is one running container's resource use as its platform reports it. Zero
// limits mean unlimited.
type ContainerUsage struct {
	Name string // the spec's container name
	// CPUSeconds is the CPU time consumed since the container started, all cores together.
	CPUSeconds       float64
	NanoCPUs         int64
	MemoryBytes      int64 // in use, page cache that can be reclaimed excluded
	MemoryLimitBytes int64
	Pids             int64 // processes and threads
	PidsLimit        int64
}

// InstanceUsage is a running instance's resource use.
type InstanceUsage struct {
	// Containers are the instance's running containers in spec order.
	Containers []ContainerUsage
	// VolumeUsedBytes is the use of the cargo volume measured in the primary container; -1
	// when it could not be measured.
	VolumeUsedBytes int64
}

// UsageReporter is implemented by drivers that can report the resource use of a running
// instance. It is a separate port so that a driver can come without it; bay then answers
// per-sandbox metrics with 503 unavailable.
type UsageReporter interface {
	// InstanceUsage reads the use of the named instance now. A missing instance wraps
	// ErrNotFound.
	InstanceUsage(ctx context.Context, name string) (InstanceUsage, error)
}
