package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// CreateNetwork creates a bridge network with labels; an existing network of that name is
// success. The engine (API 1.41 without CheckDuplicate, which this client no longer sends)
// accepts duplicate names, so creation is serialised in this process and, should another
// process have raced us, every duplicate but the oldest is removed again.
func (d *Driver) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	if name == "" {
		return fmt.Errorf("create network: empty name")
	}
	d.netMu.Lock()
	defer d.netMu.Unlock()
	existing, err := d.networksNamed(ctx, name)
	if err != nil {
		return fmt.Errorf("create network %s: %w", name, err)
	}
	if len(existing) > 0 {
		return nil
	}
	res, err := d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels})
	if err != nil {
		return fmt.Errorf("create network %s: %w", name, classify(err))
	}
	d.log.Debug("network created", "network", name, "id", res.ID)

	all, err := d.networksNamed(ctx, name)
	if err != nil || len(all) < 2 {
		return nil // ours exists; a failed re-check changes nothing
	}
	slices.SortFunc(all, oldestFirst)
	if all[0].ID != res.ID {
		if _, err := d.cli.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}); err != nil {
			d.log.Warn("remove duplicate network", "network", name, "id", res.ID, "err", err)
		}
	}
	return nil
}

// RemoveNetwork removes the network (every network of that name); missing is success; a network
// with running containers attached wraps bay.ErrConflict.
func (d *Driver) RemoveNetwork(ctx context.Context, name string) error {
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
			return fmt.Errorf("remove network %s: in use: %w", name, classifyAs(bay.ErrConflict, err))
		default:
			return fmt.Errorf("remove network %s: %w", name, classify(err))
		}
	}
	if len(nets) > 0 {
		d.log.Debug("network removed", "network", name)
	}
	return nil
}

// ListNetworks lists the networks carrying all the given labels, one per name: the oldest, the
// one CreateNetwork keeps when the engine holds duplicates.
func (d *Driver) ListNetworks(ctx context.Context, labels map[string]string) ([]bay.NetworkInfo, error) {
	res, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("list networks %v: %w", labels, classify(err))
	}
	nets := res.Items
	slices.SortFunc(nets, oldestFirst)
	out := make([]bay.NetworkInfo, 0, len(nets))
	seen := make(map[string]bool, len(nets))
	for _, n := range nets {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		out = append(out, bay.NetworkInfo{Name: n.Name, ID: n.ID, Labels: n.Labels, CreatedAt: n.Created})
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
