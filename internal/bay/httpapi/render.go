package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
)

// The one place where the services' domain values become wire types.

// rendered adapts the idempotency layer's hook to a service's typed hook: the record stores
// the rendered response, in the same transaction as the effect. nil stays nil.
func rendered[T, W any](hook idempotency.Hook, render func(T) W) bay.TxHook[T] {
	if hook == nil {
		return nil
	}
	return func(ctx context.Context, tx bay.Tx, v T) error { return hook(ctx, tx, render(v)) }
}

// wireDetails is an error's details with time values in the wire's time format.
func wireDetails(d map[string]any) map[string]any {
	var out map[string]any
	for k, v := range d {
		if t, ok := v.(time.Time); ok {
			if out == nil {
				out = make(map[string]any, len(d))
				for k2, v2 := range d {
					out[k2] = v2
				}
			}
			out[k] = bayapi.FormatTime(t)
		}
	}
	if out == nil {
		return d
	}
	return out
}

// optional is nil for "", else a pointer to a copy of s.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func renderCargo(c *bay.Cargo) *bayapi.CargoResponse {
	return &bayapi.CargoResponse{
		ID: c.ID, Managed: c.Managed, ManagedBySandboxID: optional(c.ManagedBySandboxID), Backend: bay.BackendDockerVolume,
		SizeLimitMB: c.SizeLimitMB, CreatedAt: bayapi.NewTime(c.CreatedAt), LastAccessedAt: bayapi.NewTime(c.LastAccessedAt),
	}
}

func renderCargoList(p *bay.Page[*bay.Cargo]) *bayapi.CargoList {
	out := &bayapi.CargoList{Items: make([]bayapi.CargoResponse, 0, len(p.Items)), NextCursor: optional(p.NextCursor)}
	for _, c := range p.Items {
		out.Items = append(out.Items, *renderCargo(c))
	}
	return out
}

func renderExecution(e *bay.Execution) *bayapi.ExecutionHistoryEntry {
	return &bayapi.ExecutionHistoryEntry{
		ID: e.ID, SessionID: optional(e.SessionID), ExecType: e.ExecType, Code: e.Code, Success: e.Success,
		ExecutionTimeMS: e.ExecutionTimeMS, Output: e.Output, Error: e.Error, PayloadRef: e.PayloadRef,
		Description: e.Description, Tags: e.Tags, Notes: e.Notes, LearnEnabled: e.LearnEnabled,
		LearnStatus: e.LearnStatus, LearnError: e.LearnError, LearnProcessedAt: bayapi.TimePtr(e.LearnProcessedAt),
		CreatedAt: bayapi.NewTime(e.CreatedAt),
	}
}

func renderExecutionPage(p *bay.ExecutionPage) *bayapi.ExecutionHistoryList {
	out := &bayapi.ExecutionHistoryList{Entries: make([]bayapi.ExecutionHistoryEntry, 0, len(p.Entries)), Total: p.Total}
	for _, e := range p.Entries {
		out.Entries = append(out.Entries, *renderExecution(e))
	}
	return out
}

// replyAs writes render(v) as a 200 JSON response, or err in the error envelope.
func replyAs[T, W any](s *Server, w http.ResponseWriter, r *http.Request, v T, err error, render func(T) W) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, render(v))
}
