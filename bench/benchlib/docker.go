package benchlib

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// ContainerMemory is a container's memory as the Engine API reports it (one-shot stats).
type ContainerMemory struct {
	// Usage is the cgroup's charged memory (cgroup v1 memory.usage_in_bytes, v2
	// memory.current), page cache included.
	Usage int64 `json:"usage_bytes"`
	// WorkingSet is Usage minus inactive file cache, what `docker stats` shows and what the
	// kernel cannot reclaim cheaply: the figure used for capacity planning.
	WorkingSet int64 `json:"working_set_bytes"`
	// RSS is anonymous memory (v1 total_rss / v2 anon).
	RSS int64 `json:"rss_bytes"`
}

// ReadContainerMemory takes one stats sample of a running container.
func ReadContainerMemory(ctx context.Context, cli *client.Client, id string) (ContainerMemory, error) {
	res, err := cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return ContainerMemory{}, fmt.Errorf("stats %s: %w", id, err)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return ContainerMemory{}, fmt.Errorf("stats %s: decode: %w", id, err)
	}
	m := st.MemoryStats
	out := ContainerMemory{Usage: int64(m.Usage)}
	inactive := m.Stats["total_inactive_file"] // cgroup v1
	if v, ok := m.Stats["inactive_file"]; ok && inactive == 0 {
		inactive = v // cgroup v2
	}
	if inactive < m.Usage {
		out.WorkingSet = int64(m.Usage - inactive)
	}
	if v, ok := m.Stats["total_rss"]; ok {
		out.RSS = int64(v)
	} else {
		out.RSS = int64(m.Stats["anon"])
	}
	return out, nil
}
