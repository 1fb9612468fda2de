package k8s

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
)

// CreateInstance creates the instance's Secret, NetworkPolicy and Pod, and waits (by watching
// the Pod) until every container runs, a container cannot start, or PodStartupTimeout passes.
// Any failure, or ctx ending, deletes what this call made on a detached context. A name in
// use wraps bay.ErrConflict and touches nothing of its holder.
func (d *Driver) CreateInstance(ctx context.Context, spec bay.InstanceSpec) (inst bay.Instance, err error) {
	if err := validateInstance(spec); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bay.LabelInstance] = spec.Name
	labels[bay.LabelManaged] = "true"
	meta, err := d.objectMeta(spec.Name, labels)
	if err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	// Snapshot mounts are read first: one that cannot be delivered refuses the create before
	// anything is made.
	files, err := d.packSnapshots(spec)
	if err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	if spec.VolumeRef != "" {
		if _, err := d.InspectVolume(ctx, spec.VolumeRef); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: volume: %w", spec.Name, err)
		}
	}

	var made []string // kinds this call created, for the rollback
	defer func() {
		if err == nil {
			return
		}
		dctx, cancel := detached(ctx)
		defer cancel()
		d.deleteObjects(dctx, spec.Name, made, 0)
	}()

	// The policy is rendered first: one this driver cannot enforce is refused before anything
	// is made (names without a gateway; a gateway Service that cannot be read).
	gw, err := d.gateway(ctx, spec.Network)
	if err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: network policy: %w", spec.Name, err)
	}
	np, err := d.networkPolicy(spec, meta, map[string]string{d.labels.key(bay.LabelInstance): hashValue(spec.Name)}, gw)
	if err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: network policy: %w", spec.Name, err)
	}
	secrets := d.cs.Secrets(d.cfg.Namespace)
	if _, err := secrets.Create(ctx, d.instanceSecret(spec, meta)); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: secret: %w", spec.Name, classify(err))
	}
	made = append(made, "secret")
	if d.cfg.NetworkPolicy {
		if _, err := d.cs.NetworkPolicies(d.cfg.Namespace).Create(ctx, np); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: network policy: %w", spec.Name, classify(err))
		}
		made = append(made, "networkpolicy")
	}
	pod, err := d.instancePod(spec, meta, files)
	if err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	var ann string
	if gw != nil {
		if ann, err = gw.routeThroughGateway(pod, spec); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
		}
	}
	if barrier := d.networkBarrier(ctx, spec, np, gw); barrier != "" {
		setEnv(pod, kube.EnvVar{Name: runtimekit.EnvNetworkBarrier, Value: barrier})
	}
	// The ConfigMaps are not rolled back with the rest: they are content-addressed and shared,
	// and one this create made and no Pod uses is the orphan GC's (CollectSnapshots).
	if err := d.ensureSnapshots(ctx, spec, files); err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	created, err := d.cs.Pods(d.cfg.Namespace).Create(ctx, pod)
	if err != nil {
		if !kube.IsAlreadyExists(err) {
			made = append(made, "pod") // a create whose answer was lost may still have happened
		}
		return bay.Instance{}, fmt.Errorf("create instance %s: pod: %w", spec.Name, classify(err))
	}
	made = append(made, "pod")
	running, err := d.waitRunning(ctx, created, isOneShot(spec))
	if err != nil {
		return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
	}
	// A one-shot's command runs at once and may have ended already (a Pod the gateway then
	// forgets): it is not waited for, and its first connections may meet a gateway that does
	// not know it yet (refused, as everything unknown is).
	if gw != nil && !isOneShot(spec) {
		if err := d.waitApplied(ctx, gw, spec.Name, ann); err != nil {
			return bay.Instance{}, fmt.Errorf("create instance %s: %w", spec.Name, err)
		}
	}
	d.log.Debug("instance created", "instance", spec.Name, "pod_ip", running.Status.PodIP)
	return d.instance(running), nil
}

// waitRunning watches the Pod until every container runs (and the Pod has an address), then
// returns it; a one-shot's container may also have ended already. A container that cannot
// start (its image missing or not pullable, its configuration refused) or that ended fails at
// once with the cause; an unschedulable Pod is waited for (a claim may still bind) and its
// cause reported at the timeout.
func (d *Driver) waitRunning(ctx context.Context, pod *kube.Pod, oneShot bool) (*kube.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.PodStartupTimeout)
	defer cancel()
	cause := "not scheduled yet"
	rv := pod.ResourceVersion
	for {
		done, why, err := startState(pod, oneShot)
		if done || err != nil {
			return pod, err
		}
		cause = why
		w, err := d.cs.Pods(d.cfg.Namespace).Watch(ctx, kube.ListOptions{
			FieldSelector:   kube.NameSelector(pod.Name),
			ResourceVersion: rv,
		})
		if err != nil {
			return nil, d.startTimeout(ctx, fmt.Errorf("watch pod: %w", classify(err)), cause)
		}
		for ev := range w.Events() {
			switch ev.Type {
			case kube.Deleted:
				w.Stop()
				return nil, fmt.Errorf("pod %s was deleted while starting", pod.Name)
			case kube.Error, kube.Bookmark:
				continue // an error ends the watch; watched again from rv below
			}
			pod, rv = ev.Object, ev.Object.ResourceVersion
			done, why, err := startState(pod, oneShot)
			if done || err != nil {
				w.Stop()
				return pod, err
			}
			cause = why
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, d.startTimeout(ctx, ctx.Err(), cause)
		}
		// The watch ended (the server's timeout, or an expired version): read the Pod again.
		p, err := d.cs.Pods(d.cfg.Namespace).Get(ctx, pod.Name)
		if err != nil {
			return nil, d.startTimeout(ctx, fmt.Errorf("get pod: %w", classify(err)), cause)
		}
		pod, rv = p, p.ResourceVersion
	}
}

// startTimeout explains a start that ended without the Pod running: the caller's context, or
// the startup timeout with the last known cause.
func (d *Driver) startTimeout(ctx context.Context, err error, cause string) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pod did not start within %v (%s): %w", d.cfg.PodStartupTimeout, cause, err)
	}
	return fmt.Errorf("%s: %w", cause, err)
}

// imageErrors are the waiting reasons that mean the image will not come.
var imageErrors = []string{"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ImageInspectError"}

// startState says whether every container of the Pod runs (done), else why not: err for a
// cause that will not pass, why for one that may. A one-shot is done once its container
// started, whether it still runs or has ended (its exit is WaitInstance's to report).
func startState(p *kube.Pod, oneShot bool) (done bool, why string, err error) {
	if p.DeletionTimestamp != nil {
		return false, "", errors.New("pod is being deleted")
	}
	if oneShot {
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running != nil || (s.State.Terminated != nil && s.State.Terminated.Reason != "StartError" && s.State.Terminated.Reason != "ContainerCannotRun") {
				return true, "", nil
			}
		}
	}
	if p.Status.Phase == kube.PodFailed || p.Status.Phase == kube.PodSucceeded {
		return false, "", fmt.Errorf("pod %s: %s %s", strings.ToLower(string(p.Status.Phase)), p.Status.Reason, p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == kube.PodScheduled && c.Status == kube.ConditionFalse {
			why = fmt.Sprintf("%s: %s", c.Reason, c.Message) // e.g. Unschedulable: 0/1 nodes are available...
		}
	}
	statuses := map[string]kube.ContainerStatus{}
	for _, s := range p.Status.ContainerStatuses {
		statuses[s.Name] = s
	}
	images := map[string]string{}
	for _, c := range p.Spec.Containers {
		images[c.Name] = c.Image
	}
	running := 0
	for _, c := range p.Spec.Containers {
		s, ok := statuses[c.Name]
		switch {
		case !ok:
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			t := s.State.Terminated
			return false, "", fmt.Errorf("container %s ended at start: %s (exit code %d) %s", c.Name, t.Reason, t.ExitCode, strings.TrimSpace(t.Message))
		case s.State.Waiting != nil:
			w := s.State.Waiting
			switch {
			case w.Reason == "ErrImageNeverPull":
				return false, "", fmt.Errorf("container %s: image %s not found locally on the node (image pull policy Never; import it into the node's container runtime, or build it with `bay image build`): %s", c.Name, c.Image, w.Message)
			case slices.Contains(imageErrors, w.Reason):
				return false, "", fmt.Errorf("container %s: image %s cannot be pulled: %s: %s", c.Name, c.Image, w.Reason, w.Message)
			case w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "failed to sync"):
				// The kubelet's watch of the Pod's Secrets or ConfigMaps had not synced yet (a
				// busy node): it retries, bounded by the start timeout.
				why = fmt.Sprintf("container %s: %s %s", c.Name, w.Reason, w.Message)
			case w.Reason == "CreateContainerConfigError", w.Reason == "CreateContainerError", w.Reason == "RunContainerError":
				return false, "", fmt.Errorf("container %s: %s: %s", c.Name, w.Reason, w.Message)
			case w.Reason != "":
				why = fmt.Sprintf("container %s: %s %s", c.Name, w.Reason, w.Message)
			}
		}
	}
	if running == len(p.Spec.Containers) && p.Status.PodIP != "" {
		return true, "", nil
	}
	if why == "" && p.Spec.NodeName == "" {
		why = "not scheduled yet"
	}
	if why == "" {
		why = fmt.Sprintf("%d of %d containers running", running, len(p.Spec.Containers))
	}
	return false, why, nil
}

// instance describes a Pod as an instance.
func (d *Driver) instance(p *kube.Pod) bay.Instance {
	labels := decodeLabels(p.Annotations, p.Labels)
	inst := bay.Instance{Name: p.Name, Labels: labels, CreatedAt: p.CreationTimestamp.UTC()}
	statuses := map[string]kube.ContainerStatus{}
	for _, s := range p.Status.ContainerStatuses {
		statuses[s.Name] = s
	}
	for _, c := range containerList(p) {
		s, ok := statuses[c.Name]
		ic := bay.InstanceContainer{Name: c.Name, RuntimeType: c.RuntimeType, State: bay.ContainerCreated}
		if ok {
			ic.ID = s.ContainerID
			switch {
			case p.DeletionTimestamp != nil:
				ic.State = bay.ContainerRemoving
			case s.State.Running != nil:
				ic.State = bay.ContainerRunning
			case s.State.Terminated != nil:
				ic.State = bay.ContainerExited
			}
		}
		if ic.State == bay.ContainerRunning && p.Status.PodIP != "" && c.Port > 0 {
			ic.Endpoint = d.endpoint(p.Name, p.Status.PodIP, c.Port)
		}
		inst.Containers = append(inst.Containers, ic)
	}
	return inst
}

// endpoint is a runtime's base URL: its Pod address, or the proxy forwarder's path to it
// ("" when the forwarder cannot start, which is logged).
func (d *Driver) endpoint(pod, ip string, port int) string {
	if d.cfg.ConnectMode != ConnectProxy {
		return "http://" + net.JoinHostPort(ip, strconv.Itoa(port))
	}
	base, err := d.proxyBase()
	if err != nil {
		d.log.Error("no endpoint through the API server", "pod", pod, "err", err)
		return ""
	}
	return base + "/" + pod + "/" + strconv.Itoa(port)
}

// InspectInstance returns the instance as the cluster has it now: its Pod, or, when only a
// Secret or NetworkPolicy of an interrupted create is left, an instance without containers.
func (d *Driver) InspectInstance(ctx context.Context, name string) (bay.Instance, error) {
	if name == "" {
		return bay.Instance{}, errors.New("inspect instance: empty name")
	}
	p, err := d.cs.Pods(d.cfg.Namespace).Get(ctx, name)
	if err == nil {
		return d.instance(p), nil
	}
	if !kube.IsNotFound(err) {
		return bay.Instance{}, fmt.Errorf("inspect instance %s: %w", name, classify(err))
	}
	s, err := d.cs.Secrets(d.cfg.Namespace).Get(ctx, name)
	if err != nil {
		return bay.Instance{}, fmt.Errorf("inspect instance %s: %w", name, classify(err))
	}
	if s.Labels[labelManagedBy] != managedBy {
		return bay.Instance{}, fmt.Errorf("inspect instance %s: %w", name, bay.ErrNotFound)
	}
	return bay.Instance{Name: name, Labels: decodeLabels(s.Annotations, s.Labels), CreatedAt: s.CreationTimestamp.UTC()}, nil
}

// DestroyInstance deletes the Pod (its containers get stopGrace seconds to exit), the Secret
// and the NetworkPolicy, and returns once the Pod is gone from the API. A missing instance is
// success.
func (d *Driver) DestroyInstance(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("destroy instance: empty name")
	}
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if err := d.deleteObjects(ctx, name, []string{"pod", "networkpolicy", "secret"}, stopGrace); err != nil {
		return fmt.Errorf("destroy instance %s: %w", name, err)
	}
	return nil
}

// deleteObjects deletes the named kinds of the instance's objects (a missing one is success)
// and waits for the Pod to be gone. grace is the Pod's termination grace period (0: at once).
func (d *Driver) deleteObjects(ctx context.Context, name string, kinds []string, grace int64) error {
	var errs []error
	podGone := true
	for _, k := range kinds {
		var err error
		switch k {
		case "pod":
			err = d.cs.Pods(d.cfg.Namespace).Delete(ctx, name, &grace)
			podGone = kube.IsNotFound(err)
		case "networkpolicy":
			err = d.cs.NetworkPolicies(d.cfg.Namespace).Delete(ctx, name, nil)
		case "secret":
			err = d.cs.Secrets(d.cfg.Namespace).Delete(ctx, name, nil)
		}
		if err != nil && !kube.IsNotFound(err) {
			d.log.Error("delete instance object", "instance", name, "kind", k, "err", err)
			errs = append(errs, fmt.Errorf("delete %s: %w", k, classify(err)))
		}
	}
	if !podGone {
		if err := d.waitPodGone(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitPodGone watches until the Pod is deleted from the API.
func (d *Driver) waitPodGone(ctx context.Context, name string) error {
	for {
		list, err := d.cs.Pods(d.cfg.Namespace).List(ctx, kube.ListOptions{
			FieldSelector: kube.NameSelector(name),
		})
		if err != nil {
			return fmt.Errorf("wait for pod %s to go: %w", name, classify(err))
		}
		if len(list.Items) == 0 {
			return nil
		}
		w, err := d.cs.Pods(d.cfg.Namespace).Watch(ctx, kube.ListOptions{
			FieldSelector:   kube.NameSelector(name),
			ResourceVersion: list.ResourceVersion,
		})
		if err != nil {
			return fmt.Errorf("wait for pod %s to go: %w", name, classify(err))
		}
		for ev := range w.Events() {
			if ev.Type == kube.Deleted {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for pod %s to go: %w", name, err)
		}
	}
}

// ListInstances lists the instances whose Pod, or whose Secret (an interrupted create),
// carries all the labels.
func (d *Driver) ListInstances(ctx context.Context, labels map[string]string) ([]bay.Instance, error) {
	sel, err := d.labels.selector(labels)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	pods, err := d.cs.Pods(d.cfg.Namespace).List(ctx, kube.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list instances %v: %w", labels, classify(err))
	}
	byName := map[string]bay.Instance{}
	for i := range pods.Items {
		inst := d.instance(&pods.Items[i])
		byName[inst.Name] = inst
	}
	secrets, err := d.cs.Secrets(d.cfg.Namespace).List(ctx, kube.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list instances %v: %w", labels, classify(err))
	}
	for _, s := range secrets.Items {
		if _, ok := byName[s.Name]; !ok {
			byName[s.Name] = bay.Instance{Name: s.Name, Labels: decodeLabels(s.Annotations, s.Labels), CreatedAt: s.CreationTimestamp.UTC()}
		}
	}
	out := make([]bay.Instance, 0, len(byName))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[n])
	}
	return out, nil
}

// WatchDeaths watches the Pods carrying the labels and reports an instance each time another
// of its containers has terminated, or its Pod was deleted behind the driver's back.
func (d *Driver) WatchDeaths(ctx context.Context, labels map[string]string, died func(instance string)) error {
	sel, err := d.labels.selector(labels)
	if err != nil {
		return fmt.Errorf("watch deaths: %w", err)
	}
	pods := d.cs.Pods(d.cfg.Namespace)
	ended := map[string]int{} // pod uid -> terminated containers already reported
	terminated := func(p *kube.Pod) int {
		n := 0
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				n++
			}
		}
		return n
	}
	list, err := pods.List(ctx, kube.ListOptions{LabelSelector: sel})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watch deaths: list pods: %w", classify(err))
	}
	for i := range list.Items {
		ended[string(list.Items[i].UID)] = terminated(&list.Items[i])
	}
	rv := list.ResourceVersion
	for {
		w, err := pods.Watch(ctx, kube.ListOptions{LabelSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch deaths: %w", classify(err))
		}
		for ev := range w.Events() {
			if ev.Type == kube.Error {
				w.Stop()
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watch deaths: %w", ev.Err)
			}
			p := ev.Object
			rv = p.ResourceVersion
			uid := string(p.UID)
			name := p.Labels[d.labels.key(bay.LabelInstance)]
			if name == "" || strings.HasPrefix(name, hashedPrefix) {
				name = p.Name
			}
			switch ev.Type {
			case kube.Deleted:
				if n := terminated(p); n == 0 || n > ended[uid] {
					died(name)
				}
				delete(ended, uid)
			case kube.Added, kube.Modified:
				if n := terminated(p); n > ended[uid] {
					ended[uid] = n
					died(name)
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil
		}
		// The server ended the watch (its timeout); go on from the last version seen.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}
