package sdk

import (
	"context"
	"net/http"
	"time"
)

// InvokeSkill calls POST /v1/skills/{name}/invoke: the inputs (req.Inputs, a JSON object) are
// checked against the skill's interface.inputs (a validation_error lists each violation in
// details.errors), then the skill runs as an audited exec. Unless req.NoWait it returns once
// the exec is over, with the outputs; with NoWait the queued record at once.
// A knowledge skill is a validation_error ("not invocable").
func (c *Client) InvokeSkill(ctx context.Context, name string, req InvokeRequest) (*InvokeResult, error) {
	if err := checkID("skill", name); err != nil {
		return nil, err
	}
	var out InvokeResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: skillPath(name) + "/invoke", jsonBody: req.wire(), timeout: 30 * time.Minute}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
