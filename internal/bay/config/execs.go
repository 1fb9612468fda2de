package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ExecsConfig configures the audited one-shot executions (POST /v1/sandbox/execs, ours).
type ExecsConfig struct {
	// Enabled serves the exec endpoints (false: they answer 503).
	Enabled bool `yaml:"enabled"`
	// WorkspaceRoot is the Linux host directory of the project workspaces ("" = "workspace"
	// under BAY_DATA_DIR, or under the working directory).
	WorkspaceRoot string `yaml:"workspace_root"`
	// WorkspaceRootWin and WorkspaceRootWSL are the same directory for Docker Desktop driven
	// from Windows (D:\shipyard\ws) or from WSL2 (/mnt/d/shipyard/ws); either derives the other.
	WorkspaceRootWin string `yaml:"workspace_root_win"`
	WorkspaceRootWSL string `yaml:"workspace_root_wsl"`
	// Runtime picks which root applies: auto (detected), linux, windows or wsl.
	Runtime string `yaml:"runtime"`
	// ContainerRuntime is the container runtime of the execs' containers, as a profile's
	// runtime is of its sandboxes' (execs have no profile): runc or runsc (gVisor,
	// docs/gvisor.md); unset = the platform's default. Not to be confused with Runtime.
	ContainerRuntime string `yaml:"container_runtime"`
	// Image runs execs whose skill's manifest names none.
	Image string `yaml:"image"`
	// MaxConcurrentExecs run at once; QueueSize more wait (then 429).
	MaxConcurrentExecs int `yaml:"max_concurrent_execs"`
	QueueSize          int `yaml:"queue_size"`
	// AdoptInterval is how often bay looks for the open execs of another bay instance of its
	// database that went away for good (its heartbeat older than
	// gc.orphan_container.grace_seconds, and at least 18 s), to finish them (ours, default 60 s).
	AdoptInterval time.Duration `yaml:"adopt_interval_seconds"`
	// Policy holds the operator's ceilings over the system defaults (0 or "" = the default).
	Policy ExecsPolicyConfig `yaml:"policy"`
}

// ExecsPolicyConfig is the settings layer of the exec policy merge.
type ExecsPolicyConfig struct {
	NetMode                string  `yaml:"net_mode"`
	TimeoutMS              int64   `yaml:"timeout_ms"`
	MaxStdoutBytes         int64   `yaml:"max_stdout_bytes"`
	MaxStderrBytes         int64   `yaml:"max_stderr_bytes"`
	MaxArtifactsBytesTotal int64   `yaml:"max_artifacts_bytes_total"`
	MemoryMB               int64   `yaml:"memory_mb"`
	CPUCores               float64 `yaml:"cpu_cores"`
	Pids                   int64   `yaml:"pids"`
	MaxInputBytes          int64   `yaml:"max_input_bytes"`
	MaxInputsBytesTotal    int64   `yaml:"max_inputs_bytes_total"`
	MaxOutputBytes         int64   `yaml:"max_output_bytes"`
	MaxOutputsBytesTotal   int64   `yaml:"max_outputs_bytes_total"`
}

func defaultExecs() ExecsConfig {
	return ExecsConfig{Enabled: true, Runtime: "auto", Image: "ship:latest", MaxConcurrentExecs: 2, QueueSize: 16, AdoptInterval: time.Minute}
}

func (e *ExecsConfig) validate(add func(key, format string, args ...any)) {
	if !slices.Contains([]string{"auto", "linux", "windows", "wsl"}, e.Runtime) {
		add("execs.runtime", "must be auto, linux, windows or wsl, got %q", e.Runtime)
	}
	if !bay.ValidContainerRuntime(e.ContainerRuntime) {
		add("execs.container_runtime", "must be runc or runsc (gVisor, docs/gvisor.md), or unset for the platform's default; got %q", e.ContainerRuntime)
	}
	if e.Image == "" {
		add("execs.image", "is required")
	}
	if e.MaxConcurrentExecs < 1 || e.MaxConcurrentExecs > 256 {
		add("execs.max_concurrent_execs", "must be 1..256, got %d", e.MaxConcurrentExecs)
	}
	if e.AdoptInterval <= 0 {
		add("execs.adopt_interval_seconds", "must be > 0 seconds, got %v", e.AdoptInterval)
	}
	if e.QueueSize < 0 || e.QueueSize > 10000 {
		add("execs.queue_size", "must be 0..10000, got %d", e.QueueSize)
	}
	if m := e.Policy.NetMode; m != "" && m != "none" && m != "allowlist" && m != "open" {
		add("execs.policy.net_mode", "must be none, allowlist or open, got %q", m)
	}
	for key, v := range map[string]float64{
		"timeout_ms": float64(e.Policy.TimeoutMS), "max_stdout_bytes": float64(e.Policy.MaxStdoutBytes),
		"max_stderr_bytes": float64(e.Policy.MaxStderrBytes), "max_artifacts_bytes_total": float64(e.Policy.MaxArtifactsBytesTotal),
		"memory_mb": float64(e.Policy.MemoryMB), "cpu_cores": e.Policy.CPUCores, "pids": float64(e.Policy.Pids),
		"max_input_bytes": float64(e.Policy.MaxInputBytes), "max_inputs_bytes_total": float64(e.Policy.MaxInputsBytesTotal),
		"max_output_bytes": float64(e.Policy.MaxOutputBytes), "max_outputs_bytes_total": float64(e.Policy.MaxOutputsBytesTotal),
	} {
		if v < 0 {
			add("execs.policy."+key, "must be >= 0 (0 = the default), got %s", fmt.Sprint(v))
		}
	}
}
