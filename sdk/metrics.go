package sdk

import (
	"context"
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// SandboxMetrics calls GET /v1/sandboxes/{id}/metrics: the sandbox's resource use now (CPU,
// memory and pids of its running containers, its cargo's disk use against the limit). It
// never starts compute. Errors: not_found; unavailable when bay's driver cannot report use.
func (c *Client) SandboxMetrics(ctx context.Context, id string) (*SandboxMetrics, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	var out SandboxMetrics
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathSandboxMetrics, id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
