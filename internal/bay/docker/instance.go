package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// An instance on the engine is one container per spec container, every one labelled
// bay.instance=<instance name>. A single-container instance's container is named like the
// instance and joins the sandbox network. The containers of a multi-container instance share
// the network namespace of one of them, which alone joins the sandbox network (shared.go).
// Under runsc, where they cannot, a multi-container instance also gets a bridge of its own,
// "<instance>-net", on which its containers reach each other by name; each of them joins the
// sandbox network too, so that bay reaches it the same way. Under an open network policy those
// containers are created on the sandbox network while the engine makes the instance's bridge
// (60-140 ms each, measured on a loaded two-core host), and join the bridge once both exist.

// containerSpec is what createContainer needs for one container.
type containerSpec struct {
	Name        string
	Image       string
	Hostname    string
	Env         map[string]string
	Labels      map[string]string
	VolumeRef   string // cargo volume, mounted read-write at MountPath
	MountPath   string
	Mounts      []bay.Mount
	RuntimePort int
	NanoCPUs    int64
	MemoryBytes int64
	PidsLimit   int64 // 0 = the driver's default
	ShmBytes    int64 // 0 = the engine's default
	TmpBytes    int64 // 0 = the driver's default
	Seccomp     string
	Runtime     string // the container runtime ("" = the engine's default)
	User        string
	CapAdd      []string
	Network     string   // extra network to join ("" = the driver's)
	Command     []string // a one-shot's argv (see bay.ContainerSpec.Command)
	WorkDir     string
	NoNetwork   bool // loopback only: a one-shot in bay.NetworkNone
	// PolicyNet replaces the driver's network for a closed policy (policy.go); DNS are the
	// container's DNS servers ("" and nil: the engine's).
	PolicyNet string
	DNS       []netip.Addr
	// NamesDir holds the resolv.conf and hosts bound over the engine's ("" = the engine's;
	// names.go).
	NamesDir string
	// JoinNet is the engine name of the container whose network namespace this one joins
	// ("" = a namespace of its own; shared.go). ExtraHosts ("name:address") and ExtraPorts (the
	// runtime ports of the containers that join it, exposed and published with its own) are
	// the owner's.
	JoinNet    string
	ExtraHosts []string
	ExtraPorts []int
}

// containerInfo is what the engine reports about one container.
type containerInfo struct {
	ID        string
	Name      string
	Image     string
	State     bay.ContainerState
	Labels    map[string]string
	CreatedAt time.Time
	Endpoint  string
	NetOwner  string // the container whose network namespace this one joins ("" = its own)
}

// networkInfo is what the engine reports about one network.
type networkInfo struct {
	Name      string
	ID        string
	Labels    map[string]string
	CreatedAt time.Time
}

// singleHostname is the hostname of a single-container instance's container.
const singleHostname = "sandbox"

var containerNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

func validateInstance(spec bay.InstanceSpec) error {
	if spec.Name == "" {
		return errors.New("instance without a name")
	}
	if len(spec.Containers) == 0 {
		return errors.New("instance without containers")
	}
	switch spec.Network.Mode {
	case "", bay.NetworkIsolated, bay.NetworkOpen, bay.NetworkNone, bay.NetworkAllowlist:
	default:
		return fmt.Errorf("network mode %q is not supported", spec.Network.Mode)
	}
	if !bay.ValidContainerRuntime(spec.Runtime) {
		return fmt.Errorf("container runtime %q is not supported", spec.Runtime)
	}
	seen := map[string]bool{}
	ports := map[int]string{}
	for _, c := range spec.Containers {
		if other, ok := ports[c.Port]; ok && c.Port != 0 {
			return fmt.Errorf("containers %s and %s both listen on port %d; the containers of an instance share one network", other, c.Name, c.Port)
		}
		ports[c.Port] = c.Name
		if !containerNameRE.MatchString(c.Name) {
			return fmt.Errorf("container name %q: want lowercase letters, digits and '-', at most 32", c.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("container name %q used twice", c.Name)
		}
		seen[c.Name] = true
		if len(c.Command) > 0 && (c.Port != 0 || len(c.CapAdd) > 0) {
			return fmt.Errorf("container %s: a one-shot container has no runtime port and adds no capability", c.Name)
		}
		if len(c.Command) > 0 && c.WorkDir != "" && !strings.HasPrefix(c.WorkDir, "/") {
			return fmt.Errorf("container %s: work dir %q is not absolute", c.Name, c.WorkDir)
		}
		for _, cp := range c.CapAdd {
			if !slices.Contains(bay.AddableCaps, strings.TrimPrefix(strings.ToUpper(cp), "CAP_")) {
				return fmt.Errorf("container %s: capability %s may not be added", c.Name, cp)
			}
		}
	}
	return nil
}

// instanceNetwork is the bridge of a multi-container instance under runsc (and of those made
// before its containers shared a network namespace).
func instanceNetwork(instance string) string { return instance + "-net" }

// containerName is the engine name of container c of an instance.
func containerName(instance string, multi bool, c string) string {
	if !multi {
		return instance
	}
	return instance + "-" + c
}

// CreateInstance creates every container of spec, starts those marked StartFirst, then the
// others, and returns their endpoints; with spec.LateStart it returns once the first are
// started and starts the others in the background (bay.Instance.Late), after the caller's
// Late.Begin or spec.LateStartHold. Any failure (or ctx
// ending), also of a late start, destroys what was made, on a detached context, before the
// error is returned.
func (d *Driver) CreateInstance(ctx context.Context, spec bay.InstanceSpec) (inst bay.Instance, err error) {
	if err := validateInstance(spec); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	// A runtime the engine lacks is refused before anything is made (the engine would refuse
	// each container's create); an engine that does not say lets the creates find out.
	if err := d.CheckRuntime(ctx, spec.Runtime); bay.IsRuntimeMissing(err) {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	began := time.Now()
	// A bounded cargo's file is not mounted after a host reboot; without it the containers
	// would get its empty, unreadable mount point.
	if err := d.ensureLoopCargo(ctx, spec.VolumeRef); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: cargo %s: %w", spec.Name, spec.VolumeRef, err)
	}
	multi := len(spec.Containers) > 1
	lay := layoutOf(spec)
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bay.LabelInstance] = spec.Name
	labels[bay.LabelManaged] = "true"

	// On failure, remove what this call made, including a container whose create may still
	// complete at the engine after ctx ended (removeContainer waits for it), but never the
	// holder of a name that turned out to be in use.
	var made []string
	madeNet := ""
	namesDir := ""            // the instance's name files, once this call made them (names.go)
	var netDone chan struct{} // closed once the instance network made in the background is settled
	defer func() {
		if err == nil {
			return
		}
		if netDone != nil {
			<-netDone
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
		defer cancel()
		d.rollbackInstance(dctx, spec.Name, made, madeNet, namesDir != "")
	}()

	// A one-shot in mode none is never called by bay: it gets no interface but loopback.
	// A runtime in mode none must stay reachable, so it sits on the sealed bridge instead.
	oneShotNone := spec.Network.Mode == bay.NetworkNone && len(spec.Containers) == 1 && len(spec.Containers[0].Command) > 0
	var pn policyNet
	if !oneShotNone {
		if pn, err = d.preparePolicy(ctx, spec); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
		}
	}
	if usesNames(spec, oneShotNone) {
		if namesDir, err = d.writeNames(ctx, spec.Name, pn); err != nil {
			if bay.IsConflict(err) {
				namesDir = "" // another create's
			}
			return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
		}
	}
	network := ""
	var netErr error // the background network's error, valid once netDone is closed
	switch {
	case lay.shared:
		// One network namespace for all: no network of the instance's own.
	case multi && pn.name != "":
		// A closed policy's instance network is made first: it is the containers' primary one.
		network = instanceNetwork(spec.Name)
		if err := d.createClosedInstanceNetwork(ctx, network, labels); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
		}
		madeNet = network
	case multi:
		network = instanceNetwork(spec.Name)
		netDone = make(chan struct{})
		madeNet = network // removed on failure even when its create failed half-way (by name)
		go func() {
			defer close(netDone)
			netErr = d.createNetwork(ctx, network, labels)
		}()
	}
	createNet := network // the network the containers are created on ("" = the driver's)
	if netDone != nil {
		createNet = ""
	}
	tPrepared := time.Now()
	inst = bay.Instance{Name: spec.Name, Labels: labels, CreatedAt: time.Now().UTC(),
		Containers: make([]bay.InstanceContainer, len(spec.Containers))}
	// The containers are created in parallel: the engine spends most of a create copying the
	// image's files into the cargo volume's mount, which it can do for two at once.
	made = make([]string, len(spec.Containers))
	cerrs := make([]error, len(spec.Containers))
	policyEnv := peersBypassProxy(pn.env, spec, multi)
	var cwg sync.WaitGroup
	for i, c := range spec.Containers {
		cs := containerSpec{
			Name:        containerName(spec.Name, multi, c.Name),
			Image:       c.Image,
			Hostname:    singleHostname,
			Env:         withEnv(c.Env, policyEnv),
			Labels:      maps.Clone(labels),
			VolumeRef:   spec.VolumeRef,
			MountPath:   spec.MountPath,
			Mounts:      c.Mounts,
			RuntimePort: c.Port,
			NanoCPUs:    c.Limits.NanoCPUs,
			MemoryBytes: c.Limits.MemoryBytes,
			PidsLimit:   c.Limits.PidsLimit,
			ShmBytes:    c.Limits.ShmBytes,
			TmpBytes:    c.Limits.TmpBytes,
			Seccomp:     c.Seccomp,
			Runtime:     spec.Runtime,
			User:        c.User,
			CapAdd:      c.CapAdd,
			Network:     createNet,
			Command:     c.Command,
			WorkDir:     c.WorkDir,
			NoNetwork:   oneShotNone,
			PolicyNet:   pn.name,
			DNS:         pn.dns,
			NamesDir:    namesDir,
		}
		switch {
		case lay.joined(i):
			cs.JoinNet = containerName(spec.Name, multi, spec.Containers[lay.owner].Name)
			cs.Hostname, cs.Network, cs.PolicyNet, cs.DNS = "", "", "", nil
		case lay.shared:
			cs.ExtraHosts, cs.ExtraPorts = peerHosts(spec), peerPorts(spec, lay)
		case multi:
			cs.Hostname = c.Name
		}
		cs.Labels[bay.LabelContainerName] = c.Name
		cs.Labels[bay.LabelRuntimeType] = c.RuntimeType
		cs.Labels[bay.LabelContainerSlot] = strconv.Itoa(i)
		cwg.Go(func() {
			id, err := d.createContainer(ctx, cs)
			switch {
			case err == nil:
				made[i] = id
			case !bay.IsConflict(err):
				made[i] = cs.Name // a create that may still complete at the engine
			}
			if err == nil && netDone != nil {
				// createNetwork ends with ctx; its error is reported once, below.
				if <-netDone; netErr == nil {
					if _, cerr := d.cli.NetworkConnect(ctx, network, client.NetworkConnectOptions{Container: id}); cerr != nil {
						err = fmt.Errorf("create container %s: connect network %s: %w", cs.Name, network, classify(cerr))
					}
				}
			}
			cerrs[i] = err
			inst.Containers[i] = bay.InstanceContainer{Name: c.Name, RuntimeType: c.RuntimeType, ID: id, State: bay.ContainerCreated}
		})
	}
	cwg.Wait()
	made = slices.DeleteFunc(made, func(s string) bool { return s == "" })
	if netDone != nil {
		<-netDone
		cerrs = append(cerrs, netErr)
	}
	if err := errors.Join(cerrs...); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}

	tCreated := time.Now()
	// Containers marked StartFirst are started before the others, which start once the engine
	// has started those: two starts at once each took the engine about twice as long as one
	// (measured on a loaded two-core host), and the first marked is the runtime slowest to
	// become ready.
	first, rest := splitStartFirst(spec)
	lateStart := spec.LateStart && len(first) > 0 && len(rest) > 0
	if lay.shared && len(first) == 0 {
		// The network owner runs before the containers that join its namespace.
		first, rest = []int{lay.owner}, slices.DeleteFunc(rest, func(i int) bool { return i == lay.owner })
	}
	if err := d.startSome(ctx, spec, lay, pn, inst, first); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	if lateStart {
		// The rest start in the background; what this call made is theirs to remove if that
		// fails (the deferred rollback above sees no error).
		late := bay.NewLateStart()
		early := inst
		early.Containers = slices.Clone(inst.Containers)
		early.Late = late
		// The late start fills in its own copy: inst is this function's named result, which
		// the return below overwrites with early while the goroutine may still be using it.
		full := inst
		tFirst := time.Now()
		lctx, done := d.beginLate(ctx, spec.Name)
		go func() {
			defer done()
			err := late.Hold(lctx, spec.LateStartHold)
			tHeld := time.Now()
			if err == nil {
				err = d.startSome(lctx, spec, lay, pn, full, rest)
			}
			if err == nil && namesDir != "" {
				// Every container has its address now. The early ones are asked to reach a
				// late one only once it is ready, which is after this.
				err = d.completeHosts(lctx, namesDir, spec, full)
			}
			if err == nil {
				err = lctx.Err()
			}
			if err != nil {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
				d.rollbackInstance(dctx, spec.Name, made, madeNet, namesDir != "")
				cancel()
				late.Finish(bay.Instance{}, fmt.Errorf("create instance %s: late start: %w", spec.Name, err))
				return
			}
			d.log.DebugContext(ctx, "instance created, late containers started", "instance", spec.Name, "containers", len(full.Containers),
				"prepare_ms", ms(tPrepared.Sub(began)), "create_ms", ms(tCreated.Sub(tPrepared)), "first_start_ms", ms(tFirst.Sub(tCreated)),
				"held_ms", ms(tHeld.Sub(tFirst)),
				"late_start_ms", ms(time.Since(tHeld)))
			late.Finish(full, nil)
		}()
		d.log.DebugContext(ctx, "instance created, first containers started", "instance", spec.Name, "started", len(first), "late", len(rest),
			"prepare_ms", ms(tPrepared.Sub(began)), "create_ms", ms(tCreated.Sub(tPrepared)), "start_ms", ms(time.Since(tCreated)))
		return early, nil
	}
	if err := d.startSome(ctx, spec, lay, pn, inst, rest); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	if namesDir != "" {
		if err := d.completeHosts(ctx, namesDir, spec, inst); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	d.log.DebugContext(ctx, "instance created", "instance", spec.Name, "containers", len(inst.Containers),
		"prepare_ms", ms(tPrepared.Sub(began)), "create_ms", ms(tCreated.Sub(tPrepared)), "start_ms", ms(time.Since(tCreated)))
	return inst, nil
}

// splitStartFirst returns the indexes of spec's containers marked StartFirst and of the others.
func splitStartFirst(spec bay.InstanceSpec) (first, rest []int) {
	for i, c := range spec.Containers {
		if c.StartFirst {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	return first, rest
}

// startSome starts the containers of inst at the given indexes in parallel (the network owner
// among them first, alone), records their endpoints and states in inst.Containers (each
// goroutine its own element), then registers those with an address of their own with the
// egress gateway under a closed policy.
func (d *Driver) startSome(ctx context.Context, spec bay.InstanceSpec, lay netLayout, pn policyNet, inst bay.Instance, idx []int) error {
	if lay.shared && len(idx) > 1 && slices.Contains(idx, lay.owner) {
		if err := d.startSome(ctx, spec, lay, pn, inst, []int{lay.owner}); err != nil {
			return err
		}
		idx = slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return i == lay.owner })
	}
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for j, i := range idx {
		wg.Go(func() {
			ep, err := d.startContainer(ctx, inst.Containers[i].ID, len(spec.Containers[i].Command) > 0)
			if err != nil {
				errs[j] = fmt.Errorf("container %s: %w", inst.Containers[i].Name, err)
				return
			}
			inst.Containers[i].Endpoint, inst.Containers[i].State = ep, bay.ContainerRunning
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	started := make([]bay.InstanceContainer, 0, len(idx))
	for _, i := range idx {
		if !lay.joined(i) { // a joined container has the owner's address, registered with it
			started = append(started, inst.Containers[i])
		}
	}
	if err := d.registerEgress(ctx, spec, pn, started); err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	return nil
}

// rollbackInstance removes the containers (ids or names), the network and the name files a
// failed create made.
func (d *Driver) rollbackInstance(ctx context.Context, name string, made []string, network string, names bool) {
	if d.egress != nil {
		d.egress.Unregister(name)
	}
	var wg sync.WaitGroup
	for _, id := range made {
		wg.Go(func() {
			if err := d.removeContainer(ctx, id); err != nil {
				d.log.ErrorContext(ctx, "rollback: remove half-created container", "instance", name, "container", id, "err", err)
			}
		})
	}
	wg.Wait()
	if network != "" {
		if err := d.removeNetwork(ctx, network); err != nil {
			d.log.ErrorContext(ctx, "rollback: remove the instance network", "instance", name, "network", network, "err", err)
		}
	}
	if names {
		if err := d.removeNames(name); err != nil {
			d.log.ErrorContext(ctx, "rollback: remove the name files", "instance", name, "err", err)
		}
	}
}

// objects are an instance's engine objects.
type objects struct {
	containers []containerInfo
	networks   []networkInfo
}

// instanceObjects finds the objects of one instance: those labelled with its name, and a
// container or network named exactly like it (created by a bay that labelled single-container
// sessions differently). The container list is unfiltered: the engine's filters resolve
// through an index that a container joins only once its create has finished, and a create
// still under way must be found.
func (d *Driver) instanceObjects(ctx context.Context, name string) (objects, error) {
	var o objects
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return o, fmt.Errorf("list containers: %w", classify(err))
	}
	for _, c := range res.Items {
		info := d.summaryInfo(c)
		if c.Labels[bay.LabelInstance] == name || (c.Labels[bay.LabelInstance] == "" && info.Name == name) {
			o.containers = append(o.containers, info)
		}
	}
	nets, err := d.listNetworks(ctx, map[string]string{bay.LabelInstance: name})
	if err != nil {
		return o, err
	}
	o.networks = nets
	return o, nil
}

// InspectInstance returns the instance's containers as the engine has them now. A container
// that joined the network namespace of one that does not run, or that has started again since,
// is reported exited: it can never be reached again (shared.go).
func (d *Driver) InspectInstance(ctx context.Context, name string) (bay.Instance, error) {
	if name == "" {
		return bay.Instance{}, errors.New("inspect instance: empty name")
	}
	list, err := d.listContainers(ctx, map[string]string{bay.LabelInstance: name})
	if err != nil {
		return bay.Instance{}, fmt.Errorf("inspect instance %s: %w", name, err)
	}
	if len(list) == 0 {
		return bay.Instance{}, fmt.Errorf("inspect instance %s: %w", name, bay.ErrNotFound)
	}
	if err := d.markStale(ctx, list); err != nil {
		return bay.Instance{}, fmt.Errorf("inspect instance %s: %w", name, err)
	}
	return assemble(name, list, nil), nil
}

// DestroyInstance stops the instance's running containers gracefully (SIGTERM, stopGrace
// seconds), removes them in parallel (each waited for, including one whose create is still
// under way), then its network.
func (d *Driver) DestroyInstance(ctx context.Context, name string) error {
	if name == "" {
		// An empty name would match every unlabelled container.
		return errors.New("destroy instance: empty name")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RemoveTimeout)
		defer cancel()
	}
	d.endLate(ctx, name)
	if d.egress != nil {
		d.egress.Unregister(name)
	}
	o, err := d.instanceObjects(ctx, name)
	if err != nil {
		return fmt.Errorf("destroy instance %s: %w", name, err)
	}
	// The single container's name is known even before the engine lists it.
	ids := map[string]bool{name: true}
	var running []string
	for _, c := range o.containers {
		ids[c.ID] = true
		if c.State == bay.ContainerRunning {
			running = append(running, c.ID)
		}
	}
	d.stopGracefully(ctx, running)
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for id := range ids {
		wg.Go(func() { errs <- d.removeContainer(ctx, id) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		return fmt.Errorf("destroy instance %s: %w", name, err)
	}
	for _, n := range o.networks {
		if err := d.removeNetwork(ctx, n.Name); err != nil {
			return fmt.Errorf("destroy instance %s: %w", name, err)
		}
	}
	// Once no container binds them; whether the instance ran under runsc is not asked.
	if err := d.removeNames(name); err != nil {
		return fmt.Errorf("destroy instance %s: %w", name, err)
	}
	return nil
}

// stopGrace bounds how long a runtime gets to shut down on SIGTERM before it is killed: gull
// closes Chromium so that the browser profile (cookies) reaches the cargo, which takes well
// under a second; a runtime that does not exit by then is killed.
const stopGrace = 3

// stopGracefully stops the running containers in parallel with SIGTERM and stopGrace seconds
// to exit. Failures are left to the forced removal that follows.
func (d *Driver) stopGracefully(ctx context.Context, ids []string) {
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			grace := stopGrace
			if _, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &grace}); err != nil {
				d.log.DebugContext(ctx, "graceful stop failed; removing by force", "id", id, "err", err)
			}
		})
	}
	wg.Wait()
}

// ListInstances lists the instances with objects carrying all the given labels; objects without
// an instance label (made by an older bay) count as an instance named like the object.
func (d *Driver) ListInstances(ctx context.Context, labels map[string]string) ([]bay.Instance, error) {
	cs, err := d.listContainers(ctx, labels)
	if err != nil {
		return nil, err
	}
	ns, err := d.listNetworks(ctx, labels)
	if err != nil {
		return nil, err
	}
	byName := map[string][]containerInfo{}
	netsByName := map[string][]networkInfo{}
	for _, c := range cs {
		n := cmpOr(c.Labels[bay.LabelInstance], c.Name)
		byName[n] = append(byName[n], c)
	}
	for _, nw := range ns {
		n := cmpOr(nw.Labels[bay.LabelInstance], nw.Name)
		netsByName[n] = append(netsByName[n], nw)
		if _, ok := byName[n]; !ok {
			byName[n] = nil
		}
	}
	out := make([]bay.Instance, 0, len(byName))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, assemble(n, byName[n], netsByName[n]))
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// assemble builds an Instance from its objects: containers in slot order, labels and creation
// time from the oldest object.
func assemble(name string, cs []containerInfo, ns []networkInfo) bay.Instance {
	slices.SortFunc(cs, func(a, b containerInfo) int {
		sa, _ := strconv.Atoi(a.Labels[bay.LabelContainerSlot])
		sb, _ := strconv.Atoi(b.Labels[bay.LabelContainerSlot])
		if sa != sb {
			return sa - sb
		}
		return strings.Compare(a.Name, b.Name)
	})
	inst := bay.Instance{Name: name}
	take := func(labels map[string]string, t time.Time) {
		if inst.CreatedAt.IsZero() || t.Before(inst.CreatedAt) {
			inst.CreatedAt, inst.Labels = t, labels
		}
	}
	for _, c := range cs {
		take(c.Labels, c.CreatedAt)
		cname := cmpOr(c.Labels[bay.LabelContainerName], c.Labels[bay.LabelRuntimeType])
		inst.Containers = append(inst.Containers, bay.InstanceContainer{
			Name: cmpOr(cname, c.Name), RuntimeType: cmpOr(c.Labels[bay.LabelRuntimeType], bay.RuntimeShip),
			ID: c.ID, State: c.State, Endpoint: c.Endpoint,
		})
	}
	for _, n := range ns {
		take(n.Labels, n.CreatedAt)
	}
	return inst
}

// WatchDeaths follows the engine's "die" events of containers carrying the labels.
func (d *Driver) WatchDeaths(ctx context.Context, labels map[string]string, died func(instance string)) error {
	f := labelFilters(labels)
	f.Add("type", "container")
	f.Add("event", "die")
	res := d.cli.Events(ctx, client.EventsListOptions{Filters: f})
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-res.Err:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch container deaths: %w", classify(err))
		case m := <-res.Messages:
			attrs := m.Actor.Attributes
			if name := cmpOr(attrs[bay.LabelInstance], attrs["name"]); name != "" {
				died(name)
			}
		}
	}
}

// lateRun is a late start under way (CreateInstance with spec.LateStart).
type lateRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// beginLate registers the late start of instance name: its context, which endLate cancels,
// and the function its goroutine calls when it has ended (rolled back or not).
func (d *Driver) beginLate(ctx context.Context, name string) (context.Context, func()) {
	lctx, cancel := context.WithCancel(ctx)
	r := &lateRun{cancel: cancel, done: make(chan struct{})}
	d.lateMu.Lock()
	if d.lates == nil {
		d.lates = map[string]*lateRun{}
	}
	d.lates[name] = r
	d.lateMu.Unlock()
	return lctx, func() {
		d.lateMu.Lock()
		if d.lates[name] == r {
			delete(d.lates, name)
		}
		d.lateMu.Unlock()
		cancel()
		close(r.done)
	}
}

// endLate stops the late start of instance name, if one is under way in this process, and
// waits (at most until ctx ends) until it has ended: a destroy racing it would otherwise
// remove containers the late start is still starting or rolling back, and each would meet
// the other's removals (the engine refuses a second removal in progress) while the
// instance's volume stays in use.
func (d *Driver) endLate(ctx context.Context, name string) {
	d.lateMu.Lock()
	r := d.lates[name]
	d.lateMu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
}
