package bayapi

// Operability endpoints: readiness, Prometheus metrics and per-sandbox resource use.

// Paths of the operability endpoints.
const (
	// PathReady answers 200 when bay's database and container engine answer (readiness);
	// PathHealth is liveness only.
	PathReady = "/readyz"
	// PathMetrics serves Prometheus metrics (text exposition format; authenticated).
	PathMetrics = "/metrics"
	// PathSandboxMetrics is one sandbox's current resource use.
	PathSandboxMetrics = "/v1/sandboxes/{sandbox_id}/metrics"
)

// ReadyResponse is the 200 body of GET /readyz: each check by name ("database", "engine")
// with "ok". A failing check answers 503 unavailable with details.checks naming each check
// "ok", "fail" or "timeout".
type ReadyResponse struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// SandboxMetrics is GET /v1/sandboxes/{id}/metrics: the sandbox's resource use now. Without
// running compute (status idle, expired, ...) Containers is empty and the disk use is null:
// usage is read from the running containers.
type SandboxMetrics struct {
	SandboxID string `json:"sandbox_id"`
	Status    string `json:"status"`
	// Containers are the running containers of the current session, the primary first.
	Containers []ContainerMetrics `json:"containers"`
	// Disk is the cargo volume's use against the cargo's size limit.
	Disk DiskMetrics `json:"disk"`
}

// ContainerMetrics is one container's resource use.
type ContainerMetrics struct {
	Name string `json:"name"`
	// CPUSeconds is the CPU time consumed since the container started (all cores).
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPULimitCores is the CPU limit in cores (null = unlimited).
	CPULimitCores *float64 `json:"cpu_limit_cores"`
	MemoryBytes   int64    `json:"memory_bytes"`
	// MemoryLimitBytes is null when the container has no memory limit.
	MemoryLimitBytes *int64 `json:"memory_limit_bytes"`
	Pids             int64  `json:"pids"`
	// PidsLimit is null when unlimited.
	PidsLimit *int64 `json:"pids_limit"`
}

// DiskMetrics is the cargo's use.
type DiskMetrics struct {
	// UsedBytes is measured in the running primary container (null without running compute).
	UsedBytes  *int64 `json:"used_bytes"`
	LimitBytes int64  `json:"limit_bytes"`
}
