package k8s

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// WaitInstance waits (watching the Pod) for the primary container of a one-shot to end, then
// reads its stdout and stderr back from the kubelet's log of it, apart, and its exit. When ctx
// ends first the Pod's active deadline is cut to one second, so that the kubelet kills the
// process but keeps the Pod and its log; the output it left is still copied.
//
// The two streams are read apart through the API's log "stream" option, which needs the
// PodLogsQuerySplitStreams feature gate on the API server and the kubelet (alpha in 1.37;
// scripts/k8s enables it): without it the API server refuses the option and WaitInstance says
// so, rather than return both streams merged. The kubelet keeps containerLogMaxSize of output
// (scripts/k8s: 64 MiB; the kubelet's default is 10 MiB) and rotates the rest away: a one-shot
// that writes more loses the beginning of its output.
func (d *Driver) WaitInstance(ctx context.Context, name string, stdout, stderr io.Writer) (bay.Exit, error) {
	// The Pod is found, and later stopped and read, even when ctx has already ended.
	dctx, cancel := detached(ctx)
	defer cancel()
	pods := d.cs.Pods(d.cfg.Namespace)
	pod, err := pods.Get(dctx, name)
	if err != nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: %w", name, classify(err))
	}
	if len(pod.Spec.Containers) == 0 {
		return bay.Exit{}, fmt.Errorf("wait instance %s: the Pod has no containers", name)
	}
	primary := pod.Spec.Containers[0].Name
	pod, ended := d.waitTerminated(ctx, pod, primary)
	if ended != nil && ctx.Err() == nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: %w", name, ended)
	}
	if ended != nil {
		ended = ctx.Err()
		if err := d.stopPod(dctx, pod); err != nil {
			return bay.Exit{}, fmt.Errorf("wait instance %s: %w (then the stop: %w)", name, ended, err)
		}
		if pod, err = d.waitTerminated(dctx, pod, primary); err != nil {
			return bay.Exit{}, fmt.Errorf("wait instance %s: %w (then the stop: %w)", name, ended, err)
		}
	}
	for _, s := range []struct {
		stream string
		w      io.Writer
	}{{kube.LogStreamStdout, stdout}, {kube.LogStreamStderr, stderr}} {
		if err := d.copyLog(dctx, name, primary, s.stream, s.w); err != nil {
			return bay.Exit{}, fmt.Errorf("wait instance %s: %w", name, err)
		}
	}
	t := terminated(pod, primary)
	exit := bay.Exit{Code: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled"}
	if ended != nil {
		return exit, fmt.Errorf("wait instance %s: %w", name, ended)
	}
	return exit, nil
}

// terminated is the ended state of the Pod's container c, nil while it has not ended.
func terminated(p *kube.Pod, c string) *kube.ContainerStateTerminated {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == c {
			return s.State.Terminated
		}
	}
	return nil
}

// waitTerminated watches the Pod until its container c has ended and returns the Pod as it
// was then; a deleted Pod wraps bay.ErrNotFound, an ended ctx its error.
func (d *Driver) waitTerminated(ctx context.Context, pod *kube.Pod, c string) (*kube.Pod, error) {
	pods := d.cs.Pods(d.cfg.Namespace)
	sel := kube.NameSelector(pod.Name)
	for {
		if terminated(pod, c) != nil {
			return pod, nil
		}
		if err := ctx.Err(); err != nil {
			return pod, err
		}
		w, err := pods.Watch(ctx, kube.ListOptions{FieldSelector: sel, ResourceVersion: pod.ResourceVersion})
		if err != nil {
			return pod, classify(err)
		}
		for ev := range w.Events() {
			if ev.Type == kube.Deleted {
				w.Stop()
				return pod, fmt.Errorf("pod %s was deleted: %w", pod.Name, bay.ErrNotFound)
			}
			if ev.Type == kube.Added || ev.Type == kube.Modified {
				pod = ev.Object
				if terminated(pod, c) != nil {
					w.Stop()
					return pod, nil
				}
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return pod, err
		}
		// The watch ended (the server's timeout, an expired version): read the Pod again.
		p, err := pods.Get(ctx, pod.Name)
		if err != nil {
			return pod, classify(err)
		}
		pod = p
	}
}

// stopPod has the kubelet kill the Pod's containers while keeping the Pod and its logs: its
// active deadline is cut to one second past its start, which has passed (a Pod's deadline may
// be set or shortened, never lengthened). The kubelet stops the containers with the Pod's
// termination grace (stopGrace).
func (d *Driver) stopPod(ctx context.Context, pod *kube.Pod) error {
	patch := []byte(`{"spec":{"activeDeadlineSeconds":1}}`)
	_, err := d.cs.Pods(d.cfg.Namespace).Patch(ctx, pod.Name, kube.StrategicMergePatchType, patch)
	if err != nil {
		return fmt.Errorf("stop pod %s: %w", pod.Name, classify(err))
	}
	return nil
}

// copyLog copies one stream of container c's log into w.
func (d *Driver) copyLog(ctx context.Context, pod, c, stream string, w io.Writer) error {
	rc, err := d.cs.PodLogs(ctx, d.cfg.Namespace, pod, kube.LogOptions{Container: c, Stream: stream})
	if err != nil {
		// The API server refuses the option (422) or the kubelet (400) without the gate.
		if (kube.HasReason(err, kube.ReasonInvalid) || kube.HasReason(err, kube.ReasonBadRequest)) && strings.Contains(err.Error(), "stream") {
			return fmt.Errorf("read the %s of container %s: the cluster cannot return it apart from the other stream; enable the feature gate PodLogsQuerySplitStreams on the API server and the kubelets: %w", strings.ToLower(stream), c, err)
		}
		return fmt.Errorf("read the %s of container %s: %w", strings.ToLower(stream), c, classify(err))
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("read the %s of container %s: %w", strings.ToLower(stream), c, err)
	}
	return nil
}
