package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

var _ bay.UsageReporter = (*Driver)(nil)

// InstanceUsage reads one stats sample of every running container of the instance (the
// engine's one-shot stats: no second sample, so no CPU percentage, the cumulative CPU time
// instead) and measures the cargo volume with du in the primary container, as the
// container's user, inside its limits.
func (d *Driver) InstanceUsage(ctx context.Context, name string) (bay.InstanceUsage, error) {
	inst, err := d.InspectInstance(ctx, name)
	if err != nil {
		return bay.InstanceUsage{}, err
	}
	out := bay.InstanceUsage{VolumeUsedBytes: -1}
	for i, c := range inst.Containers {
		if c.State != bay.ContainerRunning {
			continue
		}
		u, mountPath, err := d.containerUsage(ctx, c.ID)
		if err != nil {
			return bay.InstanceUsage{}, fmt.Errorf("usage of instance %s: %w", name, err)
		}
		u.Name = c.Name
		out.Containers = append(out.Containers, u)
		if i == 0 && mountPath != "" {
			n, err := d.diskUsed(ctx, c.ID, mountPath)
			if err != nil {
				d.log.WarnContext(ctx, "cargo volume use not measured", "instance", name, "err", err)
			} else {
				out.VolumeUsedBytes = n
			}
		}
	}
	return out, nil
}

// containerUsage returns a container's use and the mount path of its volume ("" if none).
func (d *Driver) containerUsage(ctx context.Context, id string) (bay.ContainerUsage, string, error) {
	ins, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return bay.ContainerUsage{}, "", fmt.Errorf("inspect container %s: %w", id, classify(err))
	}
	res, err := d.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{Stream: false})
	if err != nil {
		return bay.ContainerUsage{}, "", fmt.Errorf("stats of container %s: %w", id, classify(err))
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&st); err != nil {
		return bay.ContainerUsage{}, "", fmt.Errorf("stats of container %s: decode: %w", id, err)
	}
	u := bay.ContainerUsage{
		CPUSeconds:  float64(st.CPUStats.CPUUsage.TotalUsage) / 1e9,
		MemoryBytes: memoryInUse(st.MemoryStats),
		Pids:        int64(st.PidsStats.Current),
		PidsLimit:   int64(st.PidsStats.Limit),
	}
	if hc := ins.Container.HostConfig; hc != nil {
		u.NanoCPUs = hc.NanoCPUs
		u.MemoryLimitBytes = hc.Memory
		if hc.PidsLimit != nil && *hc.PidsLimit > 0 {
			u.PidsLimit = *hc.PidsLimit
		}
	}
	mountPath := ""
	for _, m := range ins.Container.Mounts {
		if m.Type == mount.TypeVolume {
			mountPath = m.Destination
			break
		}
	}
	return u, mountPath, nil
}

// memoryInUse is what `docker stats` shows: usage minus the inactive page cache.
func memoryInUse(m container.MemoryStats) int64 {
	used := m.Usage
	for _, k := range []string{"inactive_file", "total_inactive_file"} {
		if v, ok := m.Stats[k]; ok && v < used {
			return int64(used - v)
		}
	}
	return int64(used)
}

// diskUsed runs `du -sxb path` in the container and returns the byte count.
func (d *Driver) diskUsed(ctx context.Context, id, path string) (int64, error) {
	ex, err := d.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd: []string{"du", "-sxb", path}, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return 0, fmt.Errorf("exec du in %s: %w", id, classify(err))
	}
	att, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, fmt.Errorf("attach du in %s: %w", id, classify(err))
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&limitedBuffer{&stdout, 4096}, &limitedBuffer{&stderr, 4096}, att.Reader)
		done <- err
	}()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case err := <-done:
		if err != nil {
			return 0, fmt.Errorf("read du output: %w", err)
		}
	}
	// du exits 1 when some entry is unreadable but still prints the total of what it read.
	field, _, _ := strings.Cut(strings.TrimSpace(stdout.String()), "\t")
	n, err := strconv.ParseInt(field, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("du in %s printed %q (stderr %q)", id, stdout.String(), stderr.String())
	}
	return n, nil
}

// limitedBuffer keeps the first max bytes written and discards the rest.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
