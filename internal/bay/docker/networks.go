package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/hostlock"
)

// createNetwork creates a bridge network with labels; an existing network of that name is
// success. The engine (API 1.41 without CheckDuplicate, which this client no longer sends)
// accepts duplicate names, so creation is serialised in this process and, should another
// process have raced us, every duplicate but the oldest is removed again.
func (d *Driver) createNetwork(ctx context.Context, name string, labels map[string]string) error {
	if name == "" {
		return fmt.Errorf("create network: empty name")
	}
	d.netMu.Lock()
	defer d.netMu.Unlock()
	if err := d.createNetworkLocked(ctx, name, labels, nil); err != nil {
		return err
	}
	return d.guardNetwork(ctx, name)
}

// NetworkGuard installs the host firewall for a bridge network (its id and driver options)
// that runtimes join; see internal/bay/netguard.
type NetworkGuard func(ctx context.Context, id string, options map[string]string) error

// SetNetworkGuard sets the guard called for the sandbox network and every network made by
// CreateNetwork before a container joins it. Call it before the driver is used.
func (d *Driver) SetNetworkGuard(g NetworkGuard) { d.guard = g }

// guardNetwork runs the guard for every network named name.
func (d *Driver) guardNetwork(ctx context.Context, name string) error {
	if d.guard == nil {
		return nil
	}
	nets, err := d.networksNamed(ctx, name)
	for _, n := range nets {
		if err == nil {
			err = d.guard(ctx, n.ID, n.Options)
		}
	}
	if err != nil {
		return fmt.Errorf("network %s: host firewall: %w", name, err)
	}
	return nil
}

// createNetworkLocked is createNetwork with driver options, under netMu.
func (d *Driver) createNetworkLocked(ctx context.Context, name string, labels, options map[string]string) error {
	existing, err := d.networksNamed(ctx, name)
	if err != nil {
		return fmt.Errorf("create network %s: %w", name, err)
	}
	if len(existing) > 0 {
		return nil
	}
	res, err := d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels, Options: options})
	if err != nil {
		return fmt.Errorf("create network %s: %w", name, classify(err))
	}
	d.log.DebugContext(ctx, "network created", "network", name, "id", res.ID)

	all, err := d.networksNamed(ctx, name)
	if err != nil || len(all) < 2 {
		return nil // ours exists; a failed re-check changes nothing
	}
	slices.SortFunc(all, oldestFirst)
	if all[0].ID != res.ID {
		if _, err := d.cli.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}); err != nil {
			d.log.WarnContext(ctx, "remove duplicate network", "network", name, "id", res.ID, "err", err)
		}
	}
	return nil
}

// SandboxNetwork is the network runtimes join when driver.docker.network is not set: a bridge
// of bay's own with inter-container communication off, so that code in one sandbox cannot
// reach another sandbox's unauthenticated runtime port (on the engine's default bridge it
// can). Bay, on the host, still reaches every container; the containers of one
// multi-container session talk over their session network.
const SandboxNetwork = "shipyard-sandboxes"

// iccOption is the bridge driver option that turns inter-container communication off.
const iccOption = "com.docker.network.bridge.enable_icc"

// ensureSandboxNetwork returns the id of the oldest copy of SandboxNetwork, creating the
// network when missing and removing younger copies, and refuses one whose inter-container
// communication is on (made by someone else under our name). The engine allows duplicate
// names: bays on one host create the network under a machine-wide lock, but bays on several
// hosts sharing a remote engine may each create it; while two copies exist a container on the
// network fails to start ("ambiguous": the engine resolves a container's networks by name at
// start), which startContainer answers by calling this again and retrying. It is resolved on
// every call, so a network pruned meanwhile is recreated.
func (d *Driver) ensureSandboxNetwork(ctx context.Context) (string, error) {
	nets, err := d.networksNamed(ctx, d.sandboxNet)
	if err != nil {
		return "", fmt.Errorf("network %s: %w", d.sandboxNet, err)
	}
	if len(nets) == 0 {
		if nets, err = d.createSandboxNetwork(ctx); err != nil {
			return "", err
		}
	}
	slices.SortFunc(nets, oldestFirst)
	// Younger copies, whoever made them, only make the name ambiguous: every bay uses the
	// oldest. One still in use (it should not be) is left and reported.
	for _, n := range nets[1:] {
		if _, err := d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.WarnContext(ctx, "remove a duplicate of the sandbox network", "network", d.sandboxNet, "id", n.ID, "err", err)
		}
	}
	if nets[0].Options[iccOption] != "false" {
		return "", fmt.Errorf("network %s exists with inter-container communication on, which would let sandboxes reach each other; remove it (bay recreates it isolated) or set driver.docker.network", d.sandboxNet)
	}
	if d.guard != nil {
		if err := d.guard(ctx, nets[0].ID, nets[0].Options); err != nil {
			return "", fmt.Errorf("network %s: host firewall: %w", d.sandboxNet, err)
		}
	}
	return nets[0].ID, nil
}

// createSandboxNetwork creates the sandbox network under a machine-wide lock (bays on one
// host never make duplicates; a duplicate that one of them has started a container on could
// not be removed again) and returns its copies.
func (d *Driver) createSandboxNetwork(ctx context.Context) ([]network.Summary, error) {
	sum := sha256.Sum256([]byte(d.cfg.Socket + "\x00" + d.sandboxNet))
	unlock, err := hostlock.Acquire(ctx, "shipyard-network-"+hex.EncodeToString(sum[:8]), nil)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", d.sandboxNet, err)
	}
	defer unlock()
	d.netMu.Lock()
	err = d.createNetworkLocked(ctx, d.sandboxNet, map[string]string{"dev.shipyard.network": "sandboxes"},
		map[string]string{iccOption: "false"})
	d.netMu.Unlock()
	if err != nil {
		return nil, err
	}
	nets, err := d.networksNamed(ctx, d.sandboxNet)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", d.sandboxNet, err)
	}
	if len(nets) == 0 {
		return nil, fmt.Errorf("network %s: gone right after its creation: %w", d.sandboxNet, bay.ErrNotFound)
	}
	return nets, nil
}

// removeNetwork removes the network (every network of that name); missing is success; a network
// with running containers attached wraps bay.ErrConflict.
func (d *Driver) removeNetwork(ctx context.Context, name string) error {
	nets, err := d.networksNamed(ctx, name)
	if err != nil {
		return fmt.Errorf("remove network %s: %w", name, err)
	}
	for _, n := range nets {
		_, err := d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		switch {
		case err == nil, cerrdefs.IsNotFound(err):
		case cerrdefs.IsConflict(err), cerrdefs.IsPermissionDenied(err):
			// 20.10 answers 403 "network ... has active endpoints".
			return fmt.Errorf("remove network %s: in use: %w", name, bay.Classified(bay.ErrConflict, err))
		default:
			return fmt.Errorf("remove network %s: %w", name, classify(err))
		}
	}
	if len(nets) > 0 {
		d.log.DebugContext(ctx, "network removed", "network", name)
	}
	return nil
}

// listNetworks lists the networks carrying all the given labels, one per name: the oldest, the
// one createNetwork keeps when the engine holds duplicates.
func (d *Driver) listNetworks(ctx context.Context, labels map[string]string) ([]networkInfo, error) {
	res, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("list networks %v: %w", labels, classify(err))
	}
	nets := res.Items
	slices.SortFunc(nets, oldestFirst)
	out := make([]networkInfo, 0, len(nets))
	seen := make(map[string]bool, len(nets))
	for _, n := range nets {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		out = append(out, networkInfo{Name: n.Name, ID: n.ID, Labels: n.Labels, CreatedAt: n.Created})
	}
	return out, nil
}

// networksNamed lists the networks whose name is exactly name (the engine's filter matches
// substrings).
func (d *Driver) networksNamed(ctx context.Context, name string) ([]network.Summary, error) {
	res, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("name", name)})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", classify(err))
	}
	var out []network.Summary
	for _, n := range res.Items {
		if n.Name == name {
			out = append(out, n)
		}
	}
	return out, nil
}

// oldestFirst orders networks by creation, then id: among duplicates of one name the first is
// the one kept.
func oldestFirst(a, b network.Summary) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}
