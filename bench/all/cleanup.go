package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay/docker"
)

// cleaner remembers everything the benchmark created so that it is removed at the end, even
// after a failure or Ctrl-C: raw containers and volumes (Engine API) and sandboxes (bay's
// DELETE). A final sweep by label removes whatever a crash between create and register left.
type cleaner struct {
	mu         sync.Mutex
	containers map[string]bool
	volumes    map[string]bool
	sandboxes  map[string]bool
}

func newCleaner() *cleaner {
	return &cleaner{containers: map[string]bool{}, volumes: map[string]bool{}, sandboxes: map[string]bool{}}
}

func (c *cleaner) set(m map[string]bool, k string, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v {
		m[k] = true
	} else {
		delete(m, k)
	}
}

func (c *cleaner) container(id string)     { c.set(c.containers, id, true) }
func (c *cleaner) containerGone(id string) { c.set(c.containers, id, false) }
func (c *cleaner) volume(n string)         { c.set(c.volumes, n, true) }
func (c *cleaner) volumeGone(n string)     { c.set(c.volumes, n, false) }
func (c *cleaner) sandbox(id string)       { c.set(c.sandboxes, id, true) }
func (c *cleaner) sandboxGone(id string)   { c.set(c.sandboxes, id, false) }

func (c *cleaner) pendingSandboxes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.sandboxes))
}

// raw removes the remembered raw containers and volumes, then sweeps this run's labels.
func (c *cleaner) raw(ctx context.Context, cli *client.Client, runID string, log *slog.Logger) {
	c.mu.Lock()
	cs, vs := slices.Collect(maps.Keys(c.containers)), slices.Collect(maps.Keys(c.volumes))
	c.mu.Unlock()
	f := make(client.Filters).Add("label", labelRun+"="+runID)
	if res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, it := range res.Items {
			cs = append(cs, it.ID)
		}
	}
	for _, id := range slices.Compact(slices.Sorted(slices.Values(cs))) {
		if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			log.Warn("cleanup: remove container", "id", id, "err", err)
		}
	}
	if res, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f}); err == nil {
		for _, v := range res.Items {
			vs = append(vs, v.Name)
		}
	}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(vs))) {
		if _, err := cli.VolumeRemove(ctx, n, client.VolumeRemoveOptions{Force: true}); err != nil && !isNotFound(err) {
			log.Warn("cleanup: remove volume", "name", n, "err", err)
		}
	}
}

// leftovers counts what bayLeftovers removed.
type leftovers struct {
	WarmContainers, OtherContainers, Volumes int
}

// bayLeftovers removes containers and volumes that carry this bay instance's label after bay
// has stopped: the warm pool (bay keeps it across restarts) and anything a DELETE answered 204
// for but did not remove. Those other containers are a finding about bay's delete path.
func bayLeftovers(ctx context.Context, cli *client.Client, instanceID string, log *slog.Logger) (leftovers, error) {
	f := make(client.Filters).Add("label", "bay.instance_id="+instanceID)
	var n leftovers
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return n, fmt.Errorf("list bay containers: %w", err)
	}
	var cargos []string
	for _, it := range res.Items {
		if it.Labels["bay.owner"] == "warm-pool" {
			n.WarmContainers++
		} else {
			n.OtherContainers++
			log.Warn("cleanup: bay left a container of a deleted sandbox", "id", it.ID, "sandbox", it.Labels["bay.sandbox_id"], "state", it.State)
		}
		if id := it.Labels["bay.cargo_id"]; id != "" {
			cargos = append(cargos, id)
		}
		if _, err := cli.ContainerRemove(ctx, it.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			log.Warn("cleanup: remove bay container", "id", it.ID, "err", err)
		}
	}
	// Cargo volumes carry the instance label; the names of the containers' cargos are added
	// in case a label is missing.
	names := map[string]bool{}
	if vres, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f}); err == nil {
		for _, v := range vres.Items {
			names[v.Name] = true
		}
	}
	for _, id := range cargos {
		names["bay-cargo-"+id] = true
	}
	// Through the driver: a size-bounded cargo also has a loop-mounted file to remove.
	drv, err := docker.New(docker.DefaultConfig(), log)
	if err != nil {
		return n, fmt.Errorf("docker driver for the cleanup: %w", err)
	}
	defer drv.Close()
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if _, err := cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); isNotFound(err) {
			continue
		}
		if err := drv.DeleteVolume(ctx, name); err != nil {
			log.Warn("cleanup: remove bay volume", "name", name, "err", err)
			continue
		}
		n.Volumes++
	}
	return n, nil
}

// detached returns a context that survives the run's cancellation (Ctrl-C) for cleanup.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
