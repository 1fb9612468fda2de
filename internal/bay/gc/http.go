package gc

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// maxRunBody bounds the body of POST /v1/admin/gc/run.
const maxRunBody = 64 << 10

// HandleRun serves POST /v1/admin/gc/run: an optional JSON body {"tasks": [...], "dry_run":
// bool}; the tasks list selects what runs (nil = every enabled task, whether or not the
// background loop is enabled). Responses: 200 with the run result (api/bayapi.GCRunResponse
// plus a per-task "note"), 423 gc_running while a cycle is in flight, 400 validation_error for
// an unknown task, 422 validation_error for a malformed body. Authentication is the caller's
// middleware's job.
func (s *Scheduler) HandleRun(w http.ResponseWriter, r *http.Request) {
	var req bayapi.GCRunRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRunBody))
	if err != nil {
		writeError(w, r, 422, bay.Errorf(bay.CodeValidation, "request body unreadable or larger than %d bytes", maxRunBody))
		return
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, r, 422, bay.Errorf(bay.CodeValidation, "invalid JSON body: expected {\"tasks\": [string] | null, \"dry_run\": bool}"))
			return
		}
	}
	res, err := s.RunOnce(r.Context(), RunOptions{Tasks: req.Tasks, DryRun: req.DryRun})
	if err != nil {
		writeError(w, r, 0, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// HandleStatus serves GET /v1/admin/gc/status (api/bayapi.GCStatusResponse).
func (s *Scheduler) HandleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes the one error envelope; status 0 = the code's status. Only classified
// messages are sent; anything else becomes a generic internal error.
func writeError(w http.ResponseWriter, r *http.Request, status int, err error) {
	var be *bay.Error
	if !errors.As(err, &be) {
		be = bay.Errorf(bay.CodeInternal, "GC run failed")
	}
	if status == 0 {
		status = bayapi.StatusOf(be.Code)
	}
	reqID := w.Header().Get(bayapi.HeaderRequestID) // set by the API's middleware, if any
	if reqID == "" {
		reqID = r.Header.Get(bayapi.HeaderRequestID)
	}
	writeJSON(w, status, bayapi.ErrorEnvelope{Error: bayapi.ErrorBody{
		Code: be.Code, Message: be.Message, RequestID: reqID, Details: be.Details,
	}})
}
