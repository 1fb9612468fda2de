package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

// routeJobs adds the jobs API (see shipapi.PathJobs) when the server has a
// jobs manager.
func (s *Server) routeJobs(mux *http.ServeMux) {
	if s.Jobs == nil {
		return
	}
	mux.HandleFunc("POST "+shipapi.PathJobs, s.startJob)
	mux.HandleFunc("GET "+shipapi.PathJobs, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, shipapi.ListJobsResponse{Jobs: s.Jobs.List()})
	})
	mux.HandleFunc("GET "+shipapi.PathJobs+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		info, err := s.Jobs.Get(r.PathValue("id"))
		s.reply(w, r, info, err)
	})
	mux.HandleFunc("GET "+shipapi.PathJobs+"/{id}"+shipapi.PathJobOutputSuffix, s.jobOutput)
	mux.HandleFunc("POST "+shipapi.PathJobs+"/{id}"+shipapi.PathJobCancelSuffix, func(w http.ResponseWriter, r *http.Request) {
		info, err := s.Jobs.Cancel(r.Context(), r.PathValue("id"))
		s.reply(w, r, info, err)
	})
}

func (s *Server) startJob(w http.ResponseWriter, r *http.Request) {
	var req shipapi.StartJobRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.Jobs.Start(req)
	s.reply(w, r, info, err)
}

// jobOutput is GET /jobs/{id}/output?stdout_offset=N&stderr_offset=M&display_offset=D&wait_ms=W&max_bytes=B.
func (s *Server) jobOutput(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var offs [3]int64
	for i, k := range []string{"stdout_offset", "stderr_offset", "display_offset"} {
		n, err := queryInt(q.Get(k), 1<<62)
		if err != nil {
			s.writeError(w, r, apierr.Newf(shipapi.CodeBadRequest, "%s must be a byte offset (an integer >= 0)", k))
			return
		}
		offs[i] = n
	}
	wait, err := queryInt(q.Get("wait_ms"), shipapi.MaxJobWaitMS)
	if err != nil {
		s.writeError(w, r, apierr.Newf(shipapi.CodeBadRequest, "wait_ms must be an integer from 0 to %d", shipapi.MaxJobWaitMS))
		return
	}
	maxBytes, err := queryInt(q.Get("max_bytes"), shipapi.MaxJobReadBytes)
	if err != nil {
		s.writeError(w, r, apierr.Newf(shipapi.CodeBadRequest, "max_bytes must be an integer from 0 to %d", shipapi.MaxJobReadBytes))
		return
	}
	out, err := s.Jobs.Output(r.Context(), r.PathValue("id"), offs, int(maxBytes), time.Duration(wait)*time.Millisecond)
	s.reply(w, r, out, err)
}

// queryInt parses an optional query integer in [0, max] (absent: 0).
func queryInt(v string, max int64) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, strconv.ErrRange
	}
	return n, nil
}
