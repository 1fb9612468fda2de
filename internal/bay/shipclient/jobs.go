package shipclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// jobCallTimeout bounds a jobs call that does not wait (start, get, list).
const jobCallTimeout = 30 * time.Second

// StartJob calls POST /jobs. Ship starts nothing when it has a job with req.ID already, so a
// retry is safe.
func (c *Client) StartJob(ctx context.Context, endpoint string, req shipapi.StartJobRequest) (*shipapi.JobInfo, error) {
	var out shipapi.JobInfo
	cwd := ""
	if req.Cwd != nil {
		cwd = *req.Cwd
	}
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathJobs, req, &out, jobCallTimeout, cwd)
	return &out, err
}

// GetJob calls GET /jobs/{id}.
func (c *Client) GetJob(ctx context.Context, endpoint, id string) (*shipapi.JobInfo, error) {
	var out shipapi.JobInfo
	err := c.doJSON(ctx, endpoint, http.MethodGet, shipapi.PathJobs+"/"+url.PathEscape(id), nil, &out, jobCallTimeout, "")
	return &out, err
}

// CancelJob calls POST /jobs/{id}/cancel, which answers once the job ended.
func (c *Client) CancelJob(ctx context.Context, endpoint, id string) (*shipapi.JobInfo, error) {
	var out shipapi.JobInfo
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathJobs+"/"+url.PathEscape(id)+shipapi.PathJobCancelSuffix, nil, &out, time.Minute, "")
	return &out, err
}

// JobOutput calls GET /jobs/{id}/output from the given offsets (stdout, stderr, and a kernel
// job's display stream), waiting at most wait for new bytes (0: no wait).
func (c *Client) JobOutput(ctx context.Context, endpoint, id string, offs [3]int64, wait time.Duration, maxBytes int) (*shipapi.JobOutputResponse, error) {
	var out shipapi.JobOutputResponse
	q := url.Values{}
	q.Set("stdout_offset", fmt.Sprint(offs[0]))
	q.Set("stderr_offset", fmt.Sprint(offs[1]))
	if offs[2] > 0 {
		q.Set("display_offset", fmt.Sprint(offs[2]))
	}
	q.Set("wait_ms", fmt.Sprint(wait.Milliseconds()))
	if maxBytes > 0 {
		q.Set("max_bytes", fmt.Sprint(maxBytes))
	}
	err := c.doJSON(ctx, endpoint, http.MethodGet, shipapi.PathJobs+"/"+url.PathEscape(id)+shipapi.PathJobOutputSuffix+"?"+q.Encode(), nil, &out, wait+jobCallTimeout, "")
	return &out, err
}

// IsJobUnknown reports whether err is ship's answer that it has no such job (a runtime that
// restarted on a fresh filesystem, or a job it pruned).
func IsJobUnknown(err error) bool {
	var e *bay.Error
	if !errors.As(err, &e) || e.Details == nil {
		return false
	}
	return e.Details["ship_status"] == http.StatusNotFound && e.Details["ship_code"] == shipapi.CodeNotFound
}
