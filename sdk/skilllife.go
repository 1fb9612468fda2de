package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// The skill lifecycle: payloads, candidates, evaluations, releases, health, rollback, and the
// replay of a released browser skill.

// skillPath fills the {name} parameter of pattern with the escaped value.
func lifePath(pattern, name, value string) string {
	return strings.Replace(pattern, "{"+name+"}", esc(value), 1)
}

// call sends a JSON request and decodes the answer into a new T.
func call[T any](ctx context.Context, c *Client, method, path string, q url.Values, body any) (*T, error) {
	var out T
	if err := c.doJSON(ctx, &request{method: method, path: path, query: q, jsonBody: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSkillPayload stores a JSON object or array (POST /v1/skills/payloads); kind "" is
// generic. Errors: payload_too_large beyond bay's blob bound.
func (c *Client) CreateSkillPayload(ctx context.Context, payload any, kind string) (*SkillPayloadRef, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	return call[SkillPayloadRef](ctx, c, http.MethodPost, bayapi.PathSkillPayloads, nil,
		bayapi.CreatePayloadRequest{Payload: raw, Kind: optStr(kind)})
}

// GetSkillPayload reads a payload by its "blob:<id>" reference.
func (c *Client) GetSkillPayload(ctx context.Context, ref string) (*SkillPayload, error) {
	if err := checkID("payload", ref); err != nil {
		return nil, err
	}
	return call[SkillPayload](ctx, c, http.MethodGet, bayapi.PathSkillPayloads+"/"+esc(ref), nil, nil)
}

// CreateSkillCandidate proposes a skill from executions of the caller (POST
// /v1/skills/candidates).
func (c *Client) CreateSkillCandidate(ctx context.Context, req CandidateRequest) (*SkillCandidate, error) {
	return call[SkillCandidate](ctx, c, http.MethodPost, bayapi.PathSkillCandidates, nil, req.wire())
}

// GetSkillCandidate reads a candidate.
func (c *Client) GetSkillCandidate(ctx context.Context, id string) (*SkillCandidate, error) {
	if err := checkID("candidate", id); err != nil {
		return nil, err
	}
	return call[SkillCandidate](ctx, c, http.MethodGet, lifePath(bayapi.PathSkillCandidate, "candidate_id", id), nil, nil)
}

// SkillListRequest filters the candidate and release lists (zero values do not filter; Limit
// 0 = bay's default 100).
type SkillListRequest struct {
	SkillKey   string
	Status     string // candidates only
	Stage      string // releases only
	ActiveOnly bool   // releases only
	Limit      int
	Offset     int
}

func (r SkillListRequest) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"skill_key": r.SkillKey, "status": r.Status, "stage": r.Stage} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if r.ActiveOnly {
		q.Set("active_only", "true")
	}
	if r.Limit > 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	if r.Offset > 0 {
		q.Set("offset", strconv.Itoa(r.Offset))
	}
	return q
}

// ListSkillCandidates lists the caller's candidates, newest first.
func (c *Client) ListSkillCandidates(ctx context.Context, req SkillListRequest) (*SkillCandidateList, error) {
	return call[SkillCandidateList](ctx, c, http.MethodGet, bayapi.PathSkillCandidates, req.query(), nil)
}

// EvaluateSkillCandidate records an evaluation; a failing one rejects the candidate.
func (c *Client) EvaluateSkillCandidate(ctx context.Context, id string, req EvaluateRequest) (*SkillEvaluation, error) {
	if err := checkID("candidate", id); err != nil {
		return nil, err
	}
	return call[SkillEvaluation](ctx, c, http.MethodPost, lifePath(bayapi.PathSkillEvaluate, "candidate_id", id), nil, req.wire())
}

// PromoteSkillCandidate releases a candidate whose latest evaluation passed (conflict
// otherwise).
func (c *Client) PromoteSkillCandidate(ctx context.Context, id string, req PromoteRequest) (*SkillRelease, error) {
	if err := checkID("candidate", id); err != nil {
		return nil, err
	}
	return call[SkillRelease](ctx, c, http.MethodPost, lifePath(bayapi.PathSkillPromote, "candidate_id", id), nil, req.wire())
}

// DeleteSkillCandidate soft-deletes a candidate no active release uses.
func (c *Client) DeleteSkillCandidate(ctx context.Context, id, reason string) (*Deleted, error) {
	if err := checkID("candidate", id); err != nil {
		return nil, err
	}
	return call[Deleted](ctx, c, http.MethodDelete, lifePath(bayapi.PathSkillCandidate, "candidate_id", id), nil,
		bayapi.DeleteReasonRequest{Reason: optStr(reason)})
}

// ListSkillReleases lists the caller's releases, newest first.
func (c *Client) ListSkillReleases(ctx context.Context, req SkillListRequest) (*SkillReleaseList, error) {
	return call[SkillReleaseList](ctx, c, http.MethodGet, bayapi.PathSkillReleases, req.query(), nil)
}

// SkillReleaseHealth reports a release's health over its window.
func (c *Client) SkillReleaseHealth(ctx context.Context, id string) (*ReleaseHealth, error) {
	if err := checkID("release", id); err != nil {
		return nil, err
	}
	return call[ReleaseHealth](ctx, c, http.MethodGet, lifePath(bayapi.PathSkillHealth, "release_id", id), nil, nil)
}

// DeleteSkillRelease soft-deletes a release (even the active one).
func (c *Client) DeleteSkillRelease(ctx context.Context, id, reason string) (*Deleted, error) {
	if err := checkID("release", id); err != nil {
		return nil, err
	}
	return call[Deleted](ctx, c, http.MethodDelete, lifePath(bayapi.PathSkillRelease, "release_id", id), nil,
		bayapi.DeleteReasonRequest{Reason: optStr(reason)})
}

// RollbackSkillRelease makes a new active release from the one before id.
func (c *Client) RollbackSkillRelease(ctx context.Context, id string) (*SkillRelease, error) {
	if err := checkID("release", id); err != nil {
		return nil, err
	}
	return call[SkillRelease](ctx, c, http.MethodPost, lifePath(bayapi.PathSkillRollback, "release_id", id), nil, nil)
}

// RunBrowserSkill replays the active release of a browser skill in the sandbox's browser.
func (c *Client) RunBrowserSkill(ctx context.Context, id, skillKey string, req SkillRunRequest) (*SkillRunResult, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	if err := checkID("skill", skillKey); err != nil {
		return nil, err
	}
	p := lifePath(sbPath(bayapi.PathBrowserSkillRun, id), "skill_key", skillKey)
	var out SkillRunResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: p, jsonBody: req.wire(),
		timeout: c.execTimeout(req.Timeout, DefaultBrowserBatchTimeout)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BrowserTrace reads a browser trace of the caller by its "blob:<id>" reference.
func (c *Client) BrowserTrace(ctx context.Context, id, ref string) (*BrowserTrace, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	if err := checkID("trace", ref); err != nil {
		return nil, err
	}
	return call[BrowserTrace](ctx, c, http.MethodGet, lifePath(sbPath(bayapi.PathBrowserTrace, id), "trace_ref", ref), nil, nil)
}
