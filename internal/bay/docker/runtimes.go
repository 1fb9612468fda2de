package docker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// runtimeHint says how to register a missing runtime with this kind of engine.
func runtimeHint(rt string) string {
	if rt == bay.ContainerRuntimeRunsc {
		return "register gVisor with the engine: scripts/gvisor.sh builds runsc and adds it to /etc/docker/daemon.json's runtimes (docs/gvisor.md)"
	}
	return "add it to the engine's runtimes in /etc/docker/daemon.json and reload the engine"
}

// CheckRuntime implements bay.RuntimeChecker from the runtimes the engine lists (docker info).
// A runtime seen once is remembered (the engine only loses one when its operator removes it,
// and the create then says so, which forgets it again); a missing one is asked for anew each
// time, so that a runtime registered while bay runs is found at the next create.
func (d *Driver) CheckRuntime(ctx context.Context, rt string) error {
	if rt == bay.ContainerRuntimeDefault {
		return nil
	}
	d.rtMu.Lock()
	seen := d.runtimes[rt]
	d.rtMu.Unlock()
	if seen {
		return nil
	}
	info, err := d.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("check runtime %s: engine info: %w", rt, classify(err))
	}
	available := slices.Sorted(maps.Keys(info.Info.Runtimes))
	d.rtMu.Lock()
	defer d.rtMu.Unlock()
	if d.runtimes == nil {
		d.runtimes = map[string]bool{}
	}
	for _, name := range available {
		d.runtimes[name] = true
	}
	if d.runtimes[rt] {
		return nil
	}
	return bay.RuntimeMissing(rt, available, runtimeHint(rt))
}

// forgetRuntime drops rt from the runtimes seen, after the engine refused it.
func (d *Driver) forgetRuntime(rt string) {
	d.rtMu.Lock()
	delete(d.runtimes, rt)
	d.rtMu.Unlock()
}

// runtimeRefused reports whether a create's error is the engine refusing its runtime (Docker
// 20.10: "Unknown runtime specified runsc"; later: "unknown or invalid runtime name: runsc"): the
// runtime was removed from the engine since it was seen.
func runtimeRefused(rt string, err error) bool {
	if rt == "" || !cerrdefs.IsInvalidArgument(err) {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown runtime") || strings.Contains(msg, "runtime name")
}
