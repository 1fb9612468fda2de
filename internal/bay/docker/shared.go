package docker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// One network namespace per instance. Under runc the containers of a multi-container instance
// share one network namespace, as the containers of a Kubernetes Pod do. The instance's network
// owner, the first container marked StartFirst (else the first), is the only one attached to a
// network: the sandbox network, or its policy's under allowlist and none. The others are
// created in the engine's network mode "container:<the owner's engine name>" and are started
// once it runs (the StartFirst order). Nothing else of theirs is shared: each keeps its own
// pid, mount, IPC and user namespaces, its limits and its user.
//
// What the joined containers share with the owner besides interfaces and loopback: its
// hostname, /etc/hosts and /etc/resolv.conf (the engine refuses a hostname, extra hosts or DNS
// servers of their own in that mode). The owner's hosts file therefore maps the short name and
// the engine name of every container of the instance to 127.0.0.1, so that "ship" and
// "browser" still name each other, and its hostname is the one of a single container,
// "sandbox", as in a Pod of the Kubernetes driver. Bay reaches each runtime at the owner's
// address on the runtime's own port (in host_port mode the owner publishes every runtime port of
// the instance): a joined container has no address of its own.
//
// Before, each container joined the sandbox network and a bridge of the instance's own,
// "<instance>-net", on which they reached each other by name, and gull's container start, on
// the path of a browser sandbox's first call, took the engine 440 ms on the two networks
// against 255 ms now on one (medians of six runs' p50 of `bench/all -only browser` on this
// project's two-core host; the raw gull container's start and inspect took 202 ms). Instances
// made that way are still listed and destroyed with their network.
//
// Under gVisor each container is a sandbox with a network stack of its own, which another
// sandbox cannot share: a runsc container in mode "container:" of another runsc container saw
// a loopback of its own and nothing else (tried on this project's engine). Instances under
// runsc keep the bridge of their own, with the name files of names.go.
//
// A joined container keeps the namespace its owner had when it started. When the owner stops,
// the engine takes the interfaces out of that namespace, and a restarted owner gets a new one
// that the joined containers never see. Bay never restarts a container (a dead one makes the
// whole instance dead, and the session is replaced), but an operator or the engine may: the
// driver reports a joined container whose owner does not run, or started after it, as exited,
// so that the instance is not running and bay replaces it.
//
// Sharing loopback means that the runtimes' ports are one port space (ContainerSpec.Port must
// differ within an instance, as in a Pod) and that abstract Unix sockets, which the kernel
// scopes by network namespace, are common to the instance.

// netLayout is how the containers of one instance are networked.
type netLayout struct {
	shared bool // the containers share the network namespace of the owner's
	owner  int  // the index of the network owner in the spec; -1 unless shared
}

// layoutOf returns spec's layout: shared for a multi-container instance not under runsc.
func layoutOf(spec bay.InstanceSpec) netLayout {
	if len(spec.Containers) < 2 || spec.Runtime == bay.ContainerRuntimeRunsc {
		return netLayout{owner: -1}
	}
	owner := 0
	for i, c := range spec.Containers {
		if c.StartFirst {
			owner = i
			break
		}
	}
	return netLayout{shared: true, owner: owner}
}

// joined reports whether the container at index i joins the owner's network namespace.
func (l netLayout) joined(i int) bool { return l.shared && i != l.owner }

// peerHosts are the owner's extra hosts entries: every container of the instance, by its name
// and its engine name, on loopback.
func peerHosts(spec bay.InstanceSpec) []string {
	out := make([]string, 0, 2*len(spec.Containers))
	for _, c := range spec.Containers {
		out = append(out, c.Name+":127.0.0.1", containerName(spec.Name, true, c.Name)+":127.0.0.1")
	}
	return out
}

// peerPorts are the runtime ports of the containers that join the owner's namespace.
func peerPorts(spec bay.InstanceSpec, l netLayout) []int {
	var out []int
	for i, c := range spec.Containers {
		if l.joined(i) && c.Port > 0 {
			out = append(out, c.Port)
		}
	}
	return out
}

// netOwnerOf returns the reference (engine name or id) of the container whose network
// namespace a container in network mode mode joins, "" when it has its own.
func netOwnerOf(mode string) string {
	if m := container.NetworkMode(mode); m.IsContainer() {
		return m.ConnectedContainer()
	}
	return ""
}

// sharedEndpoint is the endpoint of c, a running container that joins another's network
// namespace: that container's address with c's own runtime port.
func (d *Driver) sharedEndpoint(ctx context.Context, c container.InspectResponse) (string, error) {
	ref := netOwnerOf(string(c.HostConfig.NetworkMode))
	res, err := d.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect network owner %s: %w", ref, classify(err))
	}
	return d.endpointAt(res.Container, containerPort(c.Config.Labels, nil)), nil
}

// summaryInfos are the list entries as containerInfo. A running entry that joins another's
// network namespace gets its endpoint at that container's address; when that container is
// not among the entries or does not run, the entry is reported exited, as it can never be
// reached again.
func (d *Driver) summaryInfos(items []container.Summary) []containerInfo {
	infos := make([]containerInfo, len(items))
	byRef := make(map[string]int, 2*len(items))
	for i, c := range items {
		infos[i] = d.summaryInfo(c)
		byRef[c.ID] = i
		for _, n := range c.Names {
			byRef[strings.TrimPrefix(n, "/")] = i
		}
	}
	for i, c := range items {
		ref := netOwnerOf(c.HostConfig.NetworkMode)
		infos[i].NetOwner = ref
		if ref == "" || infos[i].State != bay.ContainerRunning {
			continue
		}
		j, ok := byRef[ref]
		if !ok || mapState(items[j].State) != bay.ContainerRunning {
			infos[i].State, infos[i].Endpoint = bay.ContainerExited, ""
			continue
		}
		infos[i].Endpoint = d.summaryEndpointAt(items[j], containerPort(c.Labels, nil))
	}
	return infos
}

// markStale reports as exited each running container of infos that joined the network
// namespace of a container that has started again since (the engine's start times), and so
// holds a namespace without interfaces. It asks the engine about those containers only.
func (d *Driver) markStale(ctx context.Context, infos []containerInfo) error {
	refs := map[string]bool{}
	for _, c := range infos {
		if c.NetOwner != "" && c.State == bay.ContainerRunning {
			refs[c.ID], refs[c.NetOwner] = true, true
		}
	}
	if len(refs) == 0 {
		return nil
	}
	var (
		mu      sync.Mutex
		started = map[string]time.Time{} // by the reference asked about
		errs    []error
		wg      sync.WaitGroup
	)
	for ref := range refs {
		wg.Go(func() {
			res, err := d.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case cerrdefs.IsNotFound(err):
				// Gone since the list: its zero start time marks a joined container stale, and
				// an owner that is gone leaves its joined containers stale too.
			case err != nil:
				errs = append(errs, fmt.Errorf("inspect container %s: %w", ref, classify(err)))
			case res.Container.State != nil && res.Container.State.Running:
				if t, perr := time.Parse(time.RFC3339Nano, res.Container.State.StartedAt); perr == nil {
					started[ref] = t
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	for i, c := range infos {
		if c.NetOwner == "" || c.State != bay.ContainerRunning {
			continue
		}
		own, okOwn := started[c.NetOwner]
		self, okSelf := started[c.ID]
		if !okOwn || !okSelf || own.After(self) {
			infos[i].State, infos[i].Endpoint = bay.ContainerExited, ""
		}
	}
	return nil
}
