package httpapi

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
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
	r := &bayapi.CargoResponse{
		ID: c.ID, Managed: c.Managed, ManagedBySandboxID: optional(c.ManagedBySandboxID), Backend: bay.BackendDockerVolume,
		SizeLimitMB: c.SizeLimitMB, CreatedAt: bayapi.NewTime(c.CreatedAt), LastAccessedAt: bayapi.NewTime(c.LastAccessedAt),
	}
	if u := c.Usage; u != nil {
		r.SizeLimitEnforced = &u.Enforced
		if u.UsedBytes >= 0 {
			r.SizeUsedBytes = &u.UsedBytes
		}
	}
	return r
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
		CreatedAt: bayapi.NewTime(e.CreatedAt), Images: e.Images, ImageCount: len(e.Images),
	}
}

// renderExecutionPage renders a history page. Its entries carry image_count but not the
// images themselves, so that a page of plots stays small; GET of one entry has them.
func renderExecutionPage(p *bay.ExecutionPage) *bayapi.ExecutionHistoryList {
	out := &bayapi.ExecutionHistoryList{Entries: make([]bayapi.ExecutionHistoryEntry, 0, len(p.Entries)), Total: p.Total}
	for _, e := range p.Entries {
		r := renderExecution(e)
		r.Images = nil
		out.Entries = append(out.Entries, *r)
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

func renderPython(r *bay.PythonResult) *bayapi.PythonExecResponse {
	images := r.Images
	if images == nil {
		images = []map[string]string{}
	}
	return &bayapi.PythonExecResponse{
		Success: r.Success, Output: r.Text, Stdout: r.Stdout, Stderr: r.Stderr, Error: r.Error,
		Data:            bayapi.PythonExecData{ExecutionCount: r.ExecutionCount, Output: shipapi.PythonOutput{Text: r.Text, Images: images}},
		ExecutionID:     r.ExecutionID,
		ExecutionTimeMS: r.ExecutionTimeMS, Code: r.Code,
		KernelRestarted: r.KernelRestarted, KernelNotice: r.KernelNotice,
		OutputTruncated: r.OutputTruncated, ImagesTruncated: r.ImagesTruncated, ErrorTruncated: r.ErrorTruncated, Notice: r.Notice, TimedOut: r.TimedOut,
	}
}

func renderShell(r *bay.ShellResult) *bayapi.ShellExecResponse {
	return &bayapi.ShellExecResponse{
		Success: r.Success, Output: r.Output, Error: r.Error, ExitCode: r.ExitCode, ExecutionID: r.ExecutionID,
		ExecutionTimeMS: r.ExecutionTimeMS, Command: r.Command,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, Notice: r.Notice, TimedOut: r.TimedOut,
	}
}

func renderBrowser(r *bay.BrowserResult) *bayapi.BrowserExecResponse {
	return &bayapi.BrowserExecResponse{
		Success: r.Success, Output: r.Output, Error: r.Error, ExitCode: r.ExitCode,
		ExecutionID: r.ExecutionID, ExecutionTimeMS: r.ExecutionTimeMS, TraceRef: r.TraceRef,
	}
}

func renderBrowserBatch(r *bay.BrowserBatchResult) *bayapi.BrowserBatchResponse {
	out := &bayapi.BrowserBatchResponse{
		Results: make([]bayapi.BrowserStep, 0, len(r.Steps)), TotalSteps: r.TotalSteps, CompletedSteps: r.CompletedSteps,
		Success: r.Success, DurationMS: r.DurationMS, ExecutionID: r.ExecutionID, ExecutionTimeMS: r.ExecutionTimeMS, TraceRef: r.TraceRef,
	}
	for _, st := range r.Steps {
		out.Results = append(out.Results, bayapi.BrowserStep{Cmd: st.Cmd, Stdout: st.Stdout, Stderr: st.Stderr,
			ExitCode: st.ExitCode, StepIndex: st.StepIndex, DurationMS: st.DurationMS})
	}
	return out
}

func renderDirectory(entries []bay.FileEntry) *bayapi.DirectoryResponse {
	out := &bayapi.DirectoryResponse{Entries: make([]shipapi.FileInfo, 0, len(entries))}
	for _, f := range entries {
		out.Entries = append(out.Entries, shipapi.FileInfo{Name: f.Name, Path: f.Path, IsFile: f.IsFile, IsDir: f.IsDir, Size: f.Size, ModifiedTime: f.ModifiedTime})
	}
	return out
}

func renderSandbox(v *bay.SandboxView) *bayapi.SandboxResponse {
	out := &bayapi.SandboxResponse{
		ID: v.ID, Status: v.Status, Profile: v.ProfileID, CargoID: v.CargoID,
		Capabilities: v.Capabilities, CreatedAt: bayapi.NewTime(v.CreatedAt),
		ExpiresAt: bayapi.TimePtr(v.ExpiresAt), IdleExpiresAt: bayapi.TimePtr(v.IdleExpiresAt),
		Network: renderNetwork(v.Network),
	}
	if v.Containers != nil {
		out.Containers = make([]bayapi.ContainerRuntime, 0, len(v.Containers))
		for _, c := range v.Containers {
			out.Containers = append(out.Containers, bayapi.ContainerRuntime{Name: c.Name, RuntimeType: c.RuntimeType, Status: c.Status,
				Version: c.Version, Capabilities: c.Capabilities, Healthy: c.Healthy})
		}
	}
	return out
}

func renderSandboxList(p *bay.Page[*bay.SandboxView]) *bayapi.SandboxList {
	out := &bayapi.SandboxList{Items: make([]bayapi.SandboxResponse, 0, len(p.Items)), NextCursor: optional(p.NextCursor)}
	for _, v := range p.Items {
		out.Items = append(out.Items, *renderSandbox(v))
	}
	return out
}

// renderProfiles renders the configured profiles in config order. description and containers
// are filled only when detail is set.
func renderProfiles(profiles []bay.Profile, detail bool) *bayapi.ProfileList {
	out := &bayapi.ProfileList{Items: make([]bayapi.ProfileResponse, 0, len(profiles))}
	for i := range profiles {
		p := &profiles[i]
		prim := p.Primary()
		r := bayapi.ProfileResponse{
			ID: p.ID, Image: prim.Image, Resources: renderResources(prim.Resources),
			Capabilities: p.Capabilities(), IdleTimeout: int(p.IdleTimeout.Seconds()),
		}
		if r.Capabilities == nil {
			r.Capabilities = []string{}
		}
		if detail {
			r.Description = p.Description
			r.Containers = make([]bayapi.ProfileContainer, 0, len(p.Containers))
			for _, c := range p.Containers {
				r.Containers = append(r.Containers, bayapi.ProfileContainer{
					Name: c.Name, RuntimeType: c.RuntimeType, Capabilities: slices.Sorted(slices.Values(c.Capabilities)), Resources: renderResources(c.Resources),
				})
			}
		}
		out.Items = append(out.Items, r)
	}
	return out
}

func renderResources(r bay.Resources) bayapi.Resources {
	return bayapi.Resources{CPUs: r.CPUs, Memory: r.Memory}
}
