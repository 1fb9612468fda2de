package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// createContainer creates a hardened container from spec (see the package comment). A name in
// use wraps bay.ErrConflict; a missing volume or network wraps bay.ErrNotFound; a missing image
// is an unclassified error naming the image and how to build it.
func (d *Driver) createContainer(ctx context.Context, spec containerSpec) (string, error) {
	if err := validateSpec(spec); err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	// The engine round trips before the create do not depend on each other: they run at once,
	// so that a first start waits for the slowest of them instead of their sum.
	var (
		volErr, netErr, imgErr     error
		primary, extra, sandboxNet string
		img                        client.ImageInspectResult
		image                      = spec.Image
		cached                     []mount.Mount
		wg                         sync.WaitGroup
	)
	if spec.VolumeRef != "" {
		wg.Go(func() {
			if _, err := d.cli.VolumeInspect(ctx, spec.VolumeRef, client.VolumeInspectOptions{}); err != nil {
				volErr = fmt.Errorf("create container %s: volume %s: %w", spec.Name, spec.VolumeRef, classify(err))
			}
		})
	}
	wg.Go(func() { primary, extra, sandboxNet, netErr = d.resolveNetworks(ctx, spec) })
	wg.Go(func() {
		// A missing image: the create says so.
		if img, imgErr = d.cli.ImageInspect(ctx, spec.Image); imgErr == nil {
			image, cached = d.cache.imageForCreate(ctx, spec.Image, img)
		}
	})
	wg.Wait()
	if err := cmp.Or(volErr, netErr); err != nil {
		return "", err
	}
	opts := client.ContainerCreateOptions{
		Name:       spec.Name,
		Config:     d.containerConfig(spec),
		HostConfig: d.hostConfig(spec, primary),
	}
	if spec.Seccomp == bay.SeccompUserNamespaces {
		profile, err := userNamespacesProfile()
		if err != nil {
			return "", fmt.Errorf("create container %s: %w", spec.Name, err)
		}
		opts.HostConfig.SecurityOpt = append(opts.HostConfig.SecurityOpt, "seccomp="+profile)
	}
	if imgErr == nil {
		opts.Config.Image = image
		opts.HostConfig.Mounts = append(opts.HostConfig.Mounts, cached...)
		if caps := runtimeCaps(imageLabels(img)); len(caps) > 0 && len(spec.Command) == 0 {
			// The runtime separates privileges (its image says so): it starts as root holding
			// only these capabilities, switches itself to its own user and runs user code as
			// 1000:1000 with none. no-new-privileges and the dropped rest stay.
			opts.Config.User = "0:0"
			opts.HostConfig.CapAdd = mergeCaps(opts.HostConfig.CapAdd, caps)
		}
	}
	if primary != "" && !spec.NoNetwork && spec.JoinNet == "" {
		// API 1.41 accepts one endpoint at create; a second network is connected below.
		opts.NetworkingConfig = &network.NetworkingConfig{
			EndpointsConfig: map[string]*network.EndpointSettings{primary: {}},
		}
	}
	res, err := d.cli.ContainerCreate(ctx, opts)
	if err != nil {
		if runtimeRefused(spec.Runtime, err) {
			d.forgetRuntime(spec.Runtime)
			return "", fmt.Errorf("create container %s: %w", spec.Name,
				bay.RuntimeMissing(spec.Runtime, nil, runtimeHint(spec.Runtime)).WithCause(err))
		}
		return "", d.createError(ctx, spec, primary, err)
	}
	id := res.ID
	for _, w := range res.Warnings {
		d.log.WarnContext(ctx, "engine warning on create", "container", spec.Name, "warning", w)
	}
	if extra != "" {
		_, err := d.cli.NetworkConnect(ctx, extra, client.NetworkConnectOptions{Container: id})
		if err != nil && extra == sandboxNet {
			// The copy resolved above may have been a duplicate another bay removed since.
			if again, rerr := d.ensureSandboxNetwork(ctx); rerr == nil && again != extra {
				extra = again
				_, err = d.cli.NetworkConnect(ctx, extra, client.NetworkConnectOptions{Container: id})
			}
		}
		if err != nil {
			d.rollback(ctx, id)
			return "", fmt.Errorf("create container %s: connect network %s: %w", spec.Name, extra, classify(err))
		}
	}
	d.log.DebugContext(ctx, "container created", "container", spec.Name, "id", id, "image", spec.Image, "network", primary)
	return id, nil
}

// resolveNetworks returns the networks a container of spec joins: its primary one (given at
// create) and an extra one (connected after it), the sandbox network resolved to the id of its
// oldest copy (see ensureSandboxNetwork), which is returned as sandbox when it is one of them.
func (d *Driver) resolveNetworks(ctx context.Context, spec containerSpec) (primary, extra, sandbox string, err error) {
	switch {
	case spec.NoNetwork:
		return "none", "", "", nil
	case spec.JoinNet != "":
		// The engine (20.10) takes the owner's name before the owner exists and resolves it
		// at start, so the instance's containers are still created in parallel (shared.go).
		return "container:" + spec.JoinNet, "", "", nil
	}
	primary, extra = d.networks(spec)
	if primary == d.sandboxNet || extra == d.sandboxNet {
		id, err := d.ensureSandboxNetwork(ctx)
		if err != nil {
			return "", "", "", fmt.Errorf("create container %s: %w", spec.Name, err)
		}
		sandbox = id // the oldest copy: see ensureSandboxNetwork
		if primary == d.sandboxNet {
			primary = id
		} else {
			extra = id
		}
	}
	// The engine (20.10) accepts a missing network at create and fails only at start: check.
	for _, n := range []string{primary, extra} {
		if n == "" || n == "bridge" || n == "default" || n == sandbox {
			continue
		}
		found, err := d.networksNamed(ctx, n)
		if err != nil {
			return "", "", "", fmt.Errorf("create container %s: %w", spec.Name, err)
		}
		if len(found) == 0 {
			return "", "", "", fmt.Errorf("create container %s: network %s: %w", spec.Name, n, bay.ErrNotFound)
		}
	}
	return primary, extra, sandbox, nil
}

// LabelRuntimeCaps names, on an image, the capabilities its runtime keeps to start user code
// under another uid (comma-separated): the image builder writes it on ship's images.
const LabelRuntimeCaps = "dev.shipyard.image.runtime-caps"

// runtimeCaps reads LabelRuntimeCaps, keeping only capabilities a spec may add.
func runtimeCaps(labels map[string]string) []string {
	var out []string
	for _, c := range strings.Split(labels[LabelRuntimeCaps], ",") {
		c = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
		if c != "" && slices.Contains(bay.AddableCaps, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// mergeCaps is a with the capabilities of b it lacks.
func mergeCaps(a, b []string) []string {
	out := slices.Clone(a)
	for _, c := range b {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// createError explains a failed create: a 404 is a missing image or a missing network.
func (d *Driver) createError(ctx context.Context, spec containerSpec, primary string, err error) error {
	if cerrdefs.IsNotFound(err) {
		if _, ierr := d.cli.ImageInspect(ctx, spec.Image); cerrdefs.IsNotFound(ierr) {
			return fmt.Errorf("create container %s: image %s not found locally; build it with `bay image build`: %w",
				spec.Name, spec.Image, err)
		}
		if primary != "" {
			return fmt.Errorf("create container %s: network %s: %w", spec.Name, primary, classify(err))
		}
	}
	if cerrdefs.IsConflict(err) {
		return fmt.Errorf("create container %s: name already in use: %w", spec.Name, classify(err))
	}
	return fmt.Errorf("create container %s: %w", spec.Name, classify(err))
}

// rollback force-removes a half-created container on a detached context.
func (d *Driver) rollback(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	defer cancel()
	if err := d.removeContainer(ctx, id); err != nil {
		d.log.ErrorContext(ctx, "rollback: remove half-created container", "id", id, "err", err)
	}
}

func validateSpec(s containerSpec) error {
	switch {
	case s.Image == "":
		return errors.New("no image")
	case len(s.Command) > 0 && s.RuntimePort != 0:
		return errors.New("a one-shot container has no runtime port")
	case len(s.Command) == 0 && (s.RuntimePort <= 0 || s.RuntimePort > 65535):
		return fmt.Errorf("invalid runtime port %d", s.RuntimePort)
	case s.VolumeRef != "" && !path.IsAbs(s.MountPath):
		return fmt.Errorf("volume %s needs an absolute mount path, got %q", s.VolumeRef, s.MountPath)
	case strings.HasPrefix(s.VolumeRef, "/"):
		return fmt.Errorf("volume ref %q is a path; only named volumes are supported", s.VolumeRef)
	case s.Network == "host" || s.Network == "none" || strings.HasPrefix(s.Network, "container:"):
		return fmt.Errorf("network %q is not allowed", s.Network)
	case s.JoinNet != "" && (s.Network != "" || s.PolicyNet != "" || s.NoNetwork || len(s.DNS) > 0 || len(s.ExtraHosts) > 0 || s.Hostname != "" || len(s.ExtraPorts) > 0):
		return errors.New("a container joining another's network namespace has no network, DNS, hosts, hostname or ports of its own")
	case s.NanoCPUs < 0 || s.MemoryBytes < 0 || s.PidsLimit < 0 || s.ShmBytes < 0 || s.TmpBytes < 0:
		return errors.New("negative resource limit")
	case s.Seccomp != bay.SeccompDefault && s.Seccomp != bay.SeccompUserNamespaces:
		return fmt.Errorf("unknown seccomp filter %q", s.Seccomp)
	}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) {
			return fmt.Errorf("mount %s:%s: source and target must be absolute paths", m.Source, m.Target)
		}
	}
	return nil
}

// networks returns the network the container is created on ("" = default bridge) and a second
// one to connect before start ("" = none).
func (d *Driver) networks(spec containerSpec) (primary, extra string) {
	if spec.PolicyNet != "" {
		if spec.Network != "" {
			return spec.Network, spec.PolicyNet
		}
		return spec.PolicyNet, ""
	}
	configured := d.cfg.Network
	if configured == "" || (d.cfg.ConnectMode == ConnectHostPort && configured != "bridge") {
		// host_port mode reaches runtimes through published ports, not a configured network;
		// either way they are kept apart from each other.
		configured = d.sandboxNet
	}
	switch {
	case spec.Network != "" && configured != "" && spec.Network != configured:
		return spec.Network, configured
	case spec.Network != "":
		return spec.Network, ""
	default:
		return configured, ""
	}
}

func (d *Driver) publishes() bool {
	switch d.cfg.ConnectMode {
	case ConnectHostPort:
		return true
	case ConnectAuto:
		return d.cfg.PublishPorts
	}
	return false
}

func runtimePort(p int) network.Port {
	port, _ := network.PortFrom(uint16(p), network.TCP)
	return port
}

func (d *Driver) containerConfig(spec containerSpec) *container.Config {
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bay.LabelManaged] = "true"
	labels[bay.LabelRuntimePort] = strconv.Itoa(spec.RuntimePort)
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	user := spec.User
	if user == "" {
		user = DefaultUser
	}
	stop := int(d.cfg.StopTimeout / time.Second)
	cfg := &container.Config{
		Hostname:    spec.Hostname,
		User:        user,
		Env:         env,
		Labels:      labels,
		Image:       spec.Image,
		StopTimeout: &stop,
	}
	if len(spec.Command) > 0 {
		// A one-shot runs its argv as given: no shell, no image entrypoint in between.
		delete(labels, bay.LabelRuntimePort)
		cfg.Entrypoint, cfg.Cmd, cfg.WorkingDir = spec.Command[:1], spec.Command[1:], spec.WorkDir
		return cfg
	}
	if spec.JoinNet != "" {
		// Its port is the owner's to expose (the bay.runtime_port label names it).
		return cfg
	}
	cfg.ExposedPorts = network.PortSet{runtimePort(spec.RuntimePort): {}}
	for _, p := range spec.ExtraPorts {
		cfg.ExposedPorts[runtimePort(p)] = struct{}{}
	}
	return cfg
}

func (d *Driver) hostConfig(spec containerSpec, primary string) *container.HostConfig {
	pids := spec.PidsLimit
	if pids == 0 {
		pids = d.cfg.DefaultPidsLimit
	}
	tmp := spec.TmpBytes
	if tmp == 0 {
		tmp = d.cfg.DefaultTmpBytes
	}
	tmpfs := fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", tmp)
	noInit := false
	hc := &container.HostConfig{
		CapDrop:        []string{"ALL"},
		CapAdd:         spec.CapAdd,
		SecurityOpt:    []string{"no-new-privileges:true"},
		Privileged:     false,
		Runtime:        spec.Runtime,
		ReadonlyRootfs: true, // see the package comment
		Tmpfs:          map[string]string{"/tmp": tmpfs, "/var/tmp": tmpfs},
		Init:           &noInit,
		Resources: container.Resources{
			NanoCPUs:  spec.NanoCPUs,
			Memory:    spec.MemoryBytes,
			PidsLimit: &pids,
		},
	}
	if spec.Runtime == bay.ContainerRuntimeRunsc {
		n := bay.RunscProcessLimit(pids)
		hc.Ulimits = append(hc.Ulimits, &container.Ulimit{Name: "nproc", Soft: n, Hard: n})
	}
	if spec.ShmBytes > 0 {
		hc.ShmSize = spec.ShmBytes
	}
	hc.DNS = spec.DNS
	hc.ExtraHosts = spec.ExtraHosts
	if spec.MemoryBytes > 0 {
		hc.MemorySwap = spec.MemoryBytes // swap cannot bypass the memory limit
	}
	if primary != "" {
		hc.NetworkMode = container.NetworkMode(primary)
	}
	if spec.VolumeRef != "" {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: spec.VolumeRef, Target: spec.MountPath})
	}
	for _, m := range spec.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	if spec.NamesDir != "" {
		// The engine leaves out its own files where a mount covers them (names.go).
		for _, f := range []string{resolvConfFile, hostsFile} {
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: path.Join(spec.NamesDir, f), Target: "/etc/" + f, ReadOnly: true})
		}
	}
	if len(spec.Command) > 0 {
		// A one-shot's output is read back through the logs: bound what the engine keeps of it
		// on disk (the reader caps what it stores).
		hc.LogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": oneShotLogSize, "max-file": "2"}}
		return hc
	}
	if d.publishes() && spec.JoinNet == "" {
		hostPortStr := ""
		if d.cfg.HostPort > 0 {
			hostPortStr = strconv.Itoa(d.cfg.HostPort)
		}
		hc.PortBindings = network.PortMap{
			runtimePort(spec.RuntimePort): {{HostIP: d.publishIP, HostPort: hostPortStr}},
		}
		// The runtimes sharing this container's network namespace are reached through it.
		for _, p := range spec.ExtraPorts {
			hc.PortBindings[runtimePort(p)] = []network.PortBinding{{HostIP: d.publishIP}}
		}
	}
	return hc
}

// oneShotLogSize bounds each of the two log files the engine keeps of a one-shot's output.
const oneShotLogSize = "64m"

// startContainer starts a created (or exited) container and returns the endpoint bay reaches
// its runtime at. A missing container wraps bay.ErrNotFound; a container that is not running
// right after start (its process exited at once) or has no reachable address is an error.
// A one-shot has no endpoint and may exit at once: it returns "" as soon as it started.
func (d *Driver) startContainer(ctx context.Context, id string, oneShot bool) (string, error) {
	delay := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, err := d.cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
		if err == nil {
			break
		}
		// The engine resolves the container's networks by name at start: while another bay's
		// duplicate of the isolated network exists (see ensureSandboxNetwork) the name is
		// ambiguous. Remove the younger copies and try again.
		if attempt == 5 || !strings.Contains(err.Error(), "is ambiguous") {
			return "", fmt.Errorf("start container %s: %w", id, classify(err))
		}
		d.log.DebugContext(ctx, "network name ambiguous at start, removing duplicates", "id", id, "err", err)
		if _, nerr := d.ensureSandboxNetwork(ctx); nerr != nil {
			return "", fmt.Errorf("start container %s: %w (then: %w)", id, classify(err), nerr)
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return "", fmt.Errorf("start container %s: %w", id, err)
		}
		delay *= 2
	}
	if oneShot {
		d.log.DebugContext(ctx, "one-shot container started", "id", id)
		return "", nil
	}
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("start container %s: inspect: %w", id, classify(err))
	}
	c := res.Container
	if c.State == nil || !c.State.Running {
		code, msg := 0, ""
		if c.State != nil {
			code, msg = c.State.ExitCode, c.State.Error
		}
		return "", fmt.Errorf("start container %s: not running after start (exit code %d %s)", id, code, msg)
	}
	endpoint := d.endpoint(c)
	if c.HostConfig != nil && c.HostConfig.NetworkMode.IsContainer() {
		if endpoint, err = d.sharedEndpoint(ctx, c); err != nil {
			return "", fmt.Errorf("start container %s: %w", id, err)
		}
	}
	if endpoint == "" {
		return "", fmt.Errorf("start container %s: no reachable address in connect mode %s", id, d.cfg.ConnectMode)
	}
	d.log.DebugContext(ctx, "container started", "id", id, "endpoint", endpoint)
	return endpoint, nil
}

// endpoint resolves the runtime's base URL of a running container: its IP on the configured
// network, its primary network, or any network (container_network, auto); else the published
// port on the host address (host_port, auto). "" when not running or not resolvable, and for a
// container that joins another's network namespace (sharedEndpoint).
func (d *Driver) endpoint(c container.InspectResponse) string {
	if c.Config == nil {
		return ""
	}
	return d.endpointAt(c, containerPort(c.Config.Labels, c.Config.ExposedPorts))
}

// endpointAt is the base URL of port in the network namespace of c, a running container that
// holds its own (endpoint's rules).
func (d *Driver) endpointAt(c container.InspectResponse, port int) string {
	if c.State == nil || !c.State.Running || c.NetworkSettings == nil || port == 0 {
		return ""
	}
	primary := ""
	if c.HostConfig != nil {
		if c.HostConfig.NetworkMode.IsContainer() {
			return ""
		}
		primary = string(c.HostConfig.NetworkMode)
	}
	if d.cfg.ConnectMode != ConnectHostPort {
		if ip := d.pickIP(c.NetworkSettings.Networks, primary); ip != "" {
			return "http://" + hostPort(ip, strconv.Itoa(port))
		}
	}
	if d.cfg.ConnectMode != ConnectContainerNetwork {
		for _, b := range c.NetworkSettings.Ports[runtimePort(port)] {
			if b.HostPort != "" {
				return "http://" + hostPort(d.cfg.HostAddress, b.HostPort)
			}
		}
	}
	return ""
}

// pickIP chooses the address on the configured network, then the primary one, then the first
// network by name.
func (d *Driver) pickIP(nets map[string]*network.EndpointSettings, primary string) string {
	for _, name := range append([]string{d.cfg.Network, primary}, slices.Sorted(maps.Keys(nets))...) {
		if ep := nets[name]; name != "" && ep != nil && ep.IPAddress.IsValid() {
			return ep.IPAddress.String()
		}
	}
	return ""
}

// containerPort is the runtime port: the bay.runtime_port label, else the only exposed port.
func containerPort(labels map[string]string, exposed network.PortSet) int {
	if p, err := strconv.Atoi(labels[bay.LabelRuntimePort]); err == nil && p > 0 {
		return p
	}
	if len(exposed) == 1 {
		for p := range exposed {
			return int(p.Num())
		}
	}
	return 0
}

// mapState maps engine states onto bay's: dead and restarting count as exited (no restart
// policy is ever set, so restarting means the process died).
func mapState(s container.ContainerState) bay.ContainerState {
	switch s {
	case container.StateRunning:
		return bay.ContainerRunning
	case container.StateCreated:
		return bay.ContainerCreated
	case container.StateRemoving:
		return bay.ContainerRemoving
	case container.StatePaused:
		return bay.ContainerPaused
	default:
		return bay.ContainerExited
	}
}

// removeContainer force-removes a container (SIGKILL, then delete with its anonymous volumes)
// and returns once it is gone, within ctx's deadline (RemoveTimeout when ctx has none). A
// missing container is success; so is one whose removal another caller started, once that
// removal has finished (so that the container's volume can be deleted right after).
//
// A container whose create is still under way is not missing: the engine lists it as soon as
// its configuration is written, but answers 404 to inspect and remove until the create has
// finished (copying the image's files into a fresh volume can take seconds). Such a container
// is waited for and then removed; otherwise a create sent by a bay that died, or abandoned by
// a client that gave up, would finish after its "successful" removal and leak.
func (d *Driver) removeContainer(ctx context.Context, id string) error {
	if id == "" {
		// An empty filter below would match every container.
		return errors.New("remove container: empty container id")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RemoveTimeout)
		defer cancel()
	}
	delay := 10 * time.Millisecond
	for {
		_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			d.log.DebugContext(ctx, "container removed", "id", id)
			return nil
		case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
			d.log.DebugContext(ctx, "container removal already in progress, waiting for it", "id", id)
			return d.waitGone(ctx, id)
		case !cerrdefs.IsNotFound(err):
			return fmt.Errorf("remove container %s: %w", id, classify(err))
		}
		creating, lerr := d.listed(ctx, id)
		switch {
		case lerr != nil:
			return fmt.Errorf("remove container %s: %w", id, lerr)
		case !creating:
			return nil
		}
		d.log.DebugContext(ctx, "container is still being created, waiting to remove it", "id", id)
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("remove container %s: still being created: %w", id, err)
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// listed reports whether the engine lists a container with this id (or id prefix) or name.
// It lists everything and compares here: the engine's id filter resolves through an index that
// a container only joins once its create has finished, which is the very case asked about.
func (d *Driver) listed(ctx context.Context, ref string) (bool, error) {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return false, fmt.Errorf("list containers: %w", classify(err))
	}
	for _, c := range res.Items {
		if strings.HasPrefix(c.ID, ref) || slices.Contains(c.Names, "/"+ref) {
			return true, nil
		}
	}
	return false, nil
}

// sleepCtx waits for d or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitGone polls until the container no longer exists (10 ms doubling to 250 ms) or ctx ends.
func (d *Driver) waitGone(ctx context.Context, id string) error {
	delay := 10 * time.Millisecond
	for {
		_, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("remove container %s: waiting for a removal in progress: %w", id, ctx.Err())
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("remove container %s: waiting for a removal in progress: %w", id, err)
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// listContainers lists containers in any state carrying all the given labels.
func (d *Driver) listContainers(ctx context.Context, labels map[string]string) ([]containerInfo, error) {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers %v: %w", labels, classify(err))
	}
	return d.summaryInfos(res.Items), nil
}

// summaryInfo is a list entry as containerInfo.
func (d *Driver) summaryInfo(c container.Summary) containerInfo {
	info := containerInfo{
		ID:        c.ID,
		Image:     c.Image,
		State:     mapState(c.State),
		Labels:    c.Labels,
		CreatedAt: time.Unix(c.Created, 0),
	}
	if len(c.Names) > 0 {
		info.Name = strings.TrimPrefix(c.Names[0], "/")
	}
	if info.State == bay.ContainerRunning {
		info.Endpoint = d.summaryEndpoint(c)
	}
	return info
}

// summaryEndpoint is endpoint for a list entry (same rules, from the summary's fields).
func (d *Driver) summaryEndpoint(c container.Summary) string {
	return d.summaryEndpointAt(c, containerPort(c.Labels, nil))
}

// summaryEndpointAt is endpointAt for a list entry.
func (d *Driver) summaryEndpointAt(c container.Summary, port int) string {
	if port == 0 || netOwnerOf(c.HostConfig.NetworkMode) != "" {
		return ""
	}
	if d.cfg.ConnectMode != ConnectHostPort && c.NetworkSettings != nil {
		if ip := d.pickIP(c.NetworkSettings.Networks, c.HostConfig.NetworkMode); ip != "" {
			return "http://" + hostPort(ip, strconv.Itoa(port))
		}
	}
	if d.cfg.ConnectMode != ConnectContainerNetwork {
		for _, p := range c.Ports {
			if int(p.PrivatePort) == port && p.PublicPort != 0 && p.Type == "tcp" {
				return "http://" + hostPort(d.cfg.HostAddress, strconv.Itoa(int(p.PublicPort)))
			}
		}
	}
	return ""
}

func labelFilters(labels map[string]string) client.Filters {
	f := client.Filters{}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		f.Add("label", k+"="+labels[k])
	}
	return f
}
