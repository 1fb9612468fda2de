package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// WaitInstance waits for the primary container to stop (killing it when ctx ends first), then
// reads its whole output back from the engine's logs (see oneShotLogSize) and its exit code.
// The logs are read once the process has ended rather than followed: a follower can miss the
// last partial line the engine flushes as the process exits.
func (d *Driver) WaitInstance(ctx context.Context, name string, stdout, stderr io.Writer) (bay.Exit, error) {
	// The instance is found, and later killed and read, even when ctx has already ended.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	defer cancel()
	// A single-container instance's container bears its name: one inspect finds it; another
	// instance is looked up by its label.
	id := name
	if _, err := d.cli.ContainerInspect(dctx, name, client.ContainerInspectOptions{}); err != nil {
		inst, err := d.InspectInstance(dctx, name)
		if err != nil {
			return bay.Exit{}, fmt.Errorf("wait instance: %w", err)
		}
		id = inst.Containers[0].ID
	}
	ended := d.waitStopped(ctx, id)
	if ended != nil && ctx.Err() == nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: %w", name, ended)
	}
	if ended != nil {
		ended = ctx.Err()
		if _, err := d.cli.ContainerKill(dctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			d.log.DebugContext(ctx, "kill of a one-shot failed (it may have ended)", "id", id, "err", err)
		}
		if err := d.waitStopped(dctx, id); err != nil {
			return bay.Exit{}, fmt.Errorf("wait instance %s: %w (then the kill: %w)", name, ended, err)
		}
	}
	logs, err := d.cli.ContainerLogs(dctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: logs: %w", name, classify(err))
	}
	_, cerr := stdcopy.StdCopy(stdout, stderr, logs)
	logs.Close()
	if cerr != nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: read output: %w", name, cerr)
	}
	ins, err := d.cli.ContainerInspect(dctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: inspect: %w", name, classify(err))
	}
	if ins.Container.State == nil {
		return bay.Exit{}, fmt.Errorf("wait instance %s: the engine reports no state", name)
	}
	exit := bay.Exit{Code: ins.Container.State.ExitCode, OOMKilled: ins.Container.State.OOMKilled}
	if ended != nil {
		return exit, fmt.Errorf("wait instance %s: %w", name, ended)
	}
	return exit, nil
}

// waitStopped returns once the container is not running, or ctx's error.
func (d *Driver) waitStopped(ctx context.Context, id string) error {
	res := d.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-res.Result:
		return nil
	case err := <-res.Error:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return classify(err)
	case <-ctx.Done():
		return ctx.Err()
	}
}
