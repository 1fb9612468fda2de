package sdk

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// ---- audited one-shot executions ----

// execPath is an exec endpoint with its id (and, for a download, the artifact path) filled in.
func execPath(pattern, id string) string {
	return strings.Replace(pattern, "{exec_id}", esc(id), 1)
}

// CreateExec calls POST /v1/sandbox/execs: one command in a fresh container without network.
// Unless req.NoWait it returns once the exec is over (bay bounds it by its policy's
// timeout_ms); with NoWait it returns the queued or running record at once. A full queue is a
// quota_exceeded error (429) carrying retry_after_ms.
func (c *Client) CreateExec(ctx context.Context, req ExecRequest) (*Exec, error) {
	var out Exec
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: bayapi.PathExecs, jsonBody: req.wire(), timeout: 30 * time.Minute}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListExecsRequest filters GET /v1/sandbox/execs; zero fields do not filter.
type ListExecsRequest struct {
	TaskID, ProjectID, Status string
	Limit, Offset             int
}

// ListExecs calls GET /v1/sandbox/execs (the caller's execs, newest first).
func (c *Client) ListExecs(ctx context.Context, req ListExecsRequest) (*ExecList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"task_id": req.TaskID, "project_id": req.ProjectID, "status": req.Status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.Offset > 0 {
		q.Set("offset", strconv.Itoa(req.Offset))
	}
	var out ExecList
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathExecs, query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetExec calls GET /v1/sandbox/execs/{id} (the audit record).
func (c *Client) GetExec(ctx context.Context, id string) (*Exec, error) {
	if err := checkID("exec", id); err != nil {
		return nil, err
	}
	var out Exec
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: execPath(bayapi.PathExec, id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelExec calls POST /v1/sandbox/execs/{id}/cancel and returns the record as it ended.
func (c *Client) CancelExec(ctx context.Context, id string) (*Exec, error) {
	if err := checkID("exec", id); err != nil {
		return nil, err
	}
	var out Exec
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: execPath(bayapi.PathExecCancel, id), timeout: time.Minute}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecArtifacts calls GET /v1/sandbox/execs/{id}/artifacts (the manifest: path, size, sha256).
func (c *Client) ExecArtifacts(ctx context.Context, id string) (*Artifacts, error) {
	if err := checkID("exec", id); err != nil {
		return nil, err
	}
	var out Artifacts
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: execPath(bayapi.PathExecArtifacts, id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DownloadExecArtifact streams one artifact (a path relative to the exec's artifact
// directory, e.g. "stdout.txt") into w and returns the bytes written.
func (c *Client) DownloadExecArtifact(ctx context.Context, id, artifact string, w io.Writer) (int64, error) {
	if err := checkID("exec", id); err != nil {
		return 0, err
	}
	// The client escapes the path as it sends it.
	p := strings.Replace(execPath(bayapi.PathExecArtifact, id), "{path...}", artifact, 1)
	return c.streamTo(ctx, &request{method: http.MethodGet, path: p, stream: true}, w, "artifact "+artifact)
}

// ExecsHealth calls GET /v1/sandbox/health (the exec runner's runtime, workspace and engine).
func (c *Client) ExecsHealth(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathExecsHealth}, &out); err != nil {
		return nil, err
	}
	return out, nil
}
