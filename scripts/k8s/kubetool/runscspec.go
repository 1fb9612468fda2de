package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// runscSpec writes the base OCI spec of the node's runsc handler (containerd's
// base_runtime_spec): the spec on stdin (`ctr oci spec`, containerd's default, which the CRI
// plugin starts from when a handler names none) with RLIMIT_NPROC at bay.RunscPodProcessLimit of
// the kubelet's podPidsLimit. Kubernetes has no per-Pod rlimit, so the limit the Docker driver
// sets per container under gVisor is the handler's here: the Pod's pids cgroup also counts
// gVisor's own tasks, and without it a fork bomb fills the cgroup and gVisor's kernel dies with
// every process of the Pod.
func runscSpec(args []string) error {
	fs := flag.NewFlagSet("runsc-spec", flag.ExitOnError)
	pids := fs.Int64("pids-limit", 0, "the kubelet's podPidsLimit")
	_ = fs.Parse(args)
	if *pids <= 0 {
		return fmt.Errorf("-pids-limit %d: want the kubelet's podPidsLimit", *pids)
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	// Decoded loosely, so that every field of containerd's spec is written back as it came.
	var spec map[string]any
	if err := json.Unmarshal(in, &spec); err != nil {
		return fmt.Errorf("the spec on stdin: %w", err)
	}
	proc, ok := spec["process"].(map[string]any)
	if !ok {
		return fmt.Errorf("the spec on stdin has no process")
	}
	n := bay.RunscPodProcessLimit(*pids)
	limits := []any{map[string]any{"type": "RLIMIT_NPROC", "hard": n, "soft": n}}
	old, _ := proc["rlimits"].([]any)
	for _, l := range old {
		if m, ok := l.(map[string]any); !ok || m["type"] != "RLIMIT_NPROC" {
			limits = append(limits, l)
		}
	}
	proc["rlimits"] = limits
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(spec)
}
