package docker

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
)

// EngineInfo reports the engine's name, version and the endpoint bay talks to (what the
// Docker CLI calls its context), for health reports.
func (d *Driver) EngineInfo(ctx context.Context) (name, version, endpoint string, err error) {
	v, err := d.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "docker", "", d.cfg.Socket, fmt.Errorf("engine version: %w", classify(err))
	}
	return "docker", v.Version, d.cfg.Socket, nil
}
