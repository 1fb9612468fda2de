package sdk

import (
	"context"
	"net/http"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// InvokeSkill calls POST /v1/skills/{name}/invoke: the inputs (req.Inputs, a JSON object) are
// checked against the skill's interface.inputs (a validation_error lists each violation in
// details.errors), then the skill runs as an audited exec. With req.Wait nil or true it
// returns once the exec is over, with the outputs; with false the queued record at once.
// A knowledge skill is a validation_error ("not invocable").
func (c *Client) InvokeSkill(ctx context.Context, name string, req bayapi.InvokeSkillRequest) (*bayapi.InvokeSkillResponse, error) {
	if err := checkID("skill", name); err != nil {
		return nil, err
	}
	var out bayapi.InvokeSkillResponse
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: skillPath(name) + "/invoke", jsonBody: req, timeout: 30 * time.Minute}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
