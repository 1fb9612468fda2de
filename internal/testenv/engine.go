package testenv

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"
)

// EngineClient returns a client of the Docker engine the environment names, after checking
// that the engine answers and that image exists (there is no registry: a missing image must
// be built). The caller closes the client.
func EngineClient(ctx context.Context, image string) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("the Docker engine is not reachable: %w", err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		cli.Close()
		return nil, fmt.Errorf("image %s is missing (build it with `make images`): %w", image, err)
	}
	return cli, nil
}
