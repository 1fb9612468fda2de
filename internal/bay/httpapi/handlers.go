package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/history"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/jobs"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

// HeaderReplayed is set to "true" on a response replayed from an Idempotency-Key record.
const HeaderReplayed = "Idempotent-Replayed"

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, s.log, err)
}

// reply writes out as a 200 JSON response, or err in the error envelope.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, out any, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ---- meta ----

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, bayapi.HealthResponse{Status: "ok", Version: s.opts.Version})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, s.openAPIDoc())
}

func (s *Server) listProfiles(w http.ResponseWriter, r *http.Request) {
	var is issues
	detail := queryBool(r, &is, "detail")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderProfiles(s.svc.Profiles(), detail != nil && *detail))
}

// ---- idempotent helpers ----

func (s *Server) writeIdem(w http.ResponseWriter, r *http.Request, res idempotency.Response, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	writeRaw(w, res.Status, res.Body)
}

func (s *Server) idemRequest(r *http.Request, body any) idempotency.Request {
	return idempotency.Request{
		Owner: Owner(r.Context()), Key: strings.TrimSpace(r.Header.Get(bayapi.HeaderIdempotencyKey)),
		Method: r.Method, Path: r.URL.Path, Body: body,
	}
}

// ---- sandboxes ----

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req bayapi.CreateSandboxRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	is.strLen(req.Profile, bayapi.MaxProfileLen, "body", "profile")
	is.strLen(req.CargoID, bayapi.MaxIDLen, "body", "cargo_id")
	checkSkillNames(&is, req.Skills)
	if req.TTL != nil {
		// null, 0 or negative mean "no expiry"; only the upper end needs a bound.
		is.intRange(int64(*req.TTL), math.MinInt64, bayapi.MaxTTL, "body", "ttl")
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	p := sandbox.CreateParams{ProfileID: bayapi.DefaultProfile, CargoID: req.CargoID, Skills: req.Skills, Network: networkPolicy(req.Network)}
	if req.Profile != nil {
		p.ProfileID = *req.Profile
	}
	if req.TTL != nil {
		v := int64(*req.TTL)
		p.TTL = &v
	}
	canon := struct {
		Profile string                `json:"profile"`
		CargoID *string               `json:"cargo_id"`
		TTL     *int64                `json:"ttl"`
		Skills  []string              `json:"skills,omitempty"`
		Network *bayapi.NetworkPolicy `json:"network,omitempty"`
	}{p.ProfileID, p.CargoID, p.TTL, p.Skills, req.Network}
	owner := Owner(r.Context())
	if req.Reuse != nil {
		s.createReused(w, r, owner, p, req.Reuse)
		return
	}
	res, err := s.idem.Do(r.Context(), s.idemRequest(r, canon), http.StatusCreated, func(ctx context.Context, hook idempotency.Hook) (any, error) {
		v, err := s.svc.CreateSandbox(ctx, owner, p, rendered(hook, renderSandbox))
		if err != nil {
			return nil, err
		}
		return renderSandbox(v), nil
	})
	s.writeIdem(w, r, res, err)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	var is issues
	limit := queryInt(r, &is, "limit", bayapi.DefaultListLimit, 1, bayapi.MaxListLimit)
	cursor := queryString(r, &is, "cursor", bayapi.MaxCursorLen)
	status := r.URL.Query().Get("status")
	if !sandbox.ValidStatus(status) {
		is.add("enum", []any{"query", "status"}, "Input should be 'idle', 'starting', 'ready', 'failed', 'expired' or 'deleted'", status,
			map[string]any{"expected": "'idle', 'starting', 'ready', 'failed', 'expired' or 'deleted'"})
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.svc.ListSandboxes(r.Context(), Owner(r.Context()), sandbox.ListParams{Limit: int(limit), Cursor: cursor, Status: status})
	replyAs(s, w, r, out, err, renderSandboxList)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	out, err := s.svc.GetSandbox(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"))
	replyAs(s, w, r, out, err, renderSandbox)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.DeleteSandbox(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) extendTTL(w http.ResponseWriter, r *http.Request) {
	var req bayapi.ExtendTTLRequest
	if err := decodeBody(w, r, &req, "extend_by"); err != nil {
		s.fail(w, r, err)
		return
	}
	by := int64(*req.ExtendBy)
	if by <= 0 {
		s.fail(w, r, bay.Errorf(bay.CodeValidation, "extend_by must be a positive integer"))
		return
	}
	var is issues
	is.intRange(by, 1, bayapi.MaxTTL, "body", "extend_by")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("sandbox_id")
	owner := Owner(r.Context())
	canon := struct {
		ExtendBy int64 `json:"extend_by"`
	}{by}
	res, err := s.idem.Do(r.Context(), s.idemRequest(r, canon), http.StatusOK, func(ctx context.Context, hook idempotency.Hook) (any, error) {
		v, err := s.svc.ExtendTTL(ctx, owner, id, by, rendered(hook, renderSandbox))
		if err != nil {
			return nil, err
		}
		return renderSandbox(v), nil
	})
	s.writeIdem(w, r, res, err)
}

func (s *Server) keepalive(w http.ResponseWriter, r *http.Request) {
	err := s.svc.Keepalive(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"))
	s.reply(w, r, bayapi.StatusResponse{Status: "ok"}, err)
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	err := s.svc.StopSandbox(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"))
	s.reply(w, r, bayapi.StatusResponse{Status: "stopped"}, err)
}

// ---- capabilities ----

// annotationLens bounds the description and tags of an execution.
func annotationLens(is *issues, desc, tags *string) {
	is.strLen(desc, bayapi.MaxDescriptionLen, "body", "description")
	is.strLen(tags, bayapi.MaxTagsLen, "body", "tags")
}

// execTimeout validates the optional timeout of a browser command (default 30, 1..300).
func execTimeout(t *bayapi.Int, is *issues) int {
	if t == nil {
		return bayapi.DefaultExecTimeout
	}
	is.intRange(int64(*t), 1, bayapi.MaxExecTimeout, "body", "timeout")
	return int(*t)
}

// decodeInput is decodeBody for the bodies that carry the client's input to a sandbox (code,
// a command, a file's content): bounded by limits.total_input_max_bytes.
func (s *Server) decodeInput(w http.ResponseWriter, r *http.Request, dst any, required ...string) error {
	total := s.caps.Limits().MaxInputsBytesTotal
	if total <= 0 {
		return decodeBody(w, r, dst, required...)
	}
	return decodeBodyMax(w, r, total, bay.LimitsKey+"total_input_max_bytes", dst, required...)
}

// codeTimeout validates the optional timeout of a python or shell exec: the configured
// default when absent, 1..the configured ceiling (above it the issue names the setting).
func (s *Server) codeTimeout(t *bayapi.Int, is *issues) int {
	l := s.caps.Limits()
	if t == nil {
		return l.DefaultTimeout
	}
	if v := int64(*t); v > int64(l.MaxTimeout) {
		is.add("less_than_equal", []any{"body", "timeout"}, fmt.Sprintf("Input should be less than or equal to %d", l.MaxTimeout), v,
			map[string]any{"le": l.MaxTimeout, "limit": bay.LimitsKey + "timeout_sec_max"})
		return l.MaxTimeout
	}
	is.intRange(int64(*t), 1, int64(l.MaxTimeout), "body", "timeout")
	return int(*t)
}

func (s *Server) execPython(w http.ResponseWriter, r *http.Request) {
	var req bayapi.PythonExecRequest
	if err := s.decodeInput(w, r, &req, "code"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	timeout := s.codeTimeout(req.Timeout, &is)
	annotationLens(&is, req.Description, req.Tags)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	if key := strings.TrimSpace(r.Header.Get(bayapi.HeaderIdempotencyKey)); s.opts.Jobs != nil && (wantsEvents(r) || key != "") {
		p := jobs.PythonParams{Code: *req.Code, Timeout: time.Duration(timeout) * time.Second, IncludeCode: req.IncludeCode,
			Description: req.Description, Tags: bay.NormalizeTags(req.Tags), IdempotencyKey: key}
		s.streamExec(w, r, key, func(emit jobs.Emit) (any, error) {
			res, err := s.opts.Jobs.ExecPythonStream(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p, emit)
			if err != nil {
				return nil, err
			}
			return renderPython(res), nil
		})
		return
	}
	out, err := s.caps.ExecPython(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), capability.PythonParams{
		Code: *req.Code, Timeout: timeout, IncludeCode: req.IncludeCode, Description: req.Description, Tags: req.Tags,
	})
	replyAs(s, w, r, out, err, renderPython)
}

func (s *Server) execShell(w http.ResponseWriter, r *http.Request) {
	var req bayapi.ShellExecRequest
	if err := s.decodeInput(w, r, &req, "command"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	timeout := s.codeTimeout(req.Timeout, &is)
	annotationLens(&is, req.Description, req.Tags)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	var cwd *string
	if req.Cwd != nil {
		c, err := validatePath("cwd", *req.Cwd)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		cwd = &c
	}
	if key := strings.TrimSpace(r.Header.Get(bayapi.HeaderIdempotencyKey)); s.opts.Jobs != nil && (wantsEvents(r) || key != "") {
		p := jobs.ExecParams{Command: *req.Command, Timeout: time.Duration(timeout) * time.Second, Cwd: cwd,
			IncludeCode: req.IncludeCode, Description: req.Description, Tags: bay.NormalizeTags(req.Tags), IdempotencyKey: key}
		s.streamExec(w, r, key, func(emit jobs.Emit) (any, error) {
			return s.opts.Jobs.ExecShellStream(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p, emit)
		})
		return
	}
	out, err := s.caps.ExecShell(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), capability.ShellParams{
		Command: *req.Command, Timeout: timeout, Cwd: cwd, IncludeCode: req.IncludeCode, Description: req.Description, Tags: req.Tags,
	})
	replyAs(s, w, r, out, err, renderShell)
}

// Bounds of a browser batch (the gull runtime's own).
const (
	maxBrowserBatchTimeout  = 600
	maxBrowserBatchCommands = 1000
	maxBrowserCommandBytes  = 64 << 10
)

func (s *Server) execBrowser(w http.ResponseWriter, r *http.Request) {
	var req bayapi.BrowserExecRequest
	if err := decodeBody(w, r, &req, "cmd"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	timeout := execTimeout(req.Timeout, &is)
	annotationLens(&is, req.Description, req.Tags)
	is.strLen(req.Cmd, maxBrowserCommandBytes, "body", "cmd")
	if strings.TrimSpace(*req.Cmd) == "" {
		is.add("string_too_short", []any{"body", "cmd"}, "String should have at least 1 character", *req.Cmd, map[string]any{"min_length": 1})
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.caps.ExecBrowser(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), capability.BrowserParams{
		Cmd: *req.Cmd, Timeout: timeout, Description: req.Description, Tags: req.Tags,
		Trace: capability.TraceOptions{Learn: req.Learn, IncludeTrace: req.IncludeTrace},
	})
	replyAs(s, w, r, out, err, renderBrowser)
}

func (s *Server) execBrowserBatch(w http.ResponseWriter, r *http.Request) {
	var req bayapi.BrowserBatchRequest
	if err := decodeBody(w, r, &req, "commands"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	timeout := 60
	if req.Timeout != nil {
		is.intRange(int64(*req.Timeout), 1, maxBrowserBatchTimeout, "body", "timeout")
		timeout = int(*req.Timeout)
	}
	annotationLens(&is, req.Description, req.Tags)
	switch {
	case len(req.Commands) == 0:
		is.add("too_short", []any{"body", "commands"}, "List should have at least 1 item after validation, not 0", req.Commands, map[string]any{"min_length": 1})
	case len(req.Commands) > maxBrowserBatchCommands:
		is.add("too_long", []any{"body", "commands"}, fmt.Sprintf("List should have at most %d items", maxBrowserBatchCommands), len(req.Commands), map[string]any{"max_length": maxBrowserBatchCommands})
	}
	for i, c := range req.Commands {
		is.strLen(&c, maxBrowserCommandBytes, "body", "commands", i)
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	stop := req.StopOnError == nil || *req.StopOnError
	out, err := s.caps.ExecBrowserBatch(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), capability.BrowserBatchParams{
		Commands: req.Commands, Timeout: timeout, StopOnError: stop, Description: req.Description, Tags: req.Tags,
		Trace: capability.TraceOptions{Learn: req.Learn, IncludeTrace: req.IncludeTrace},
	})
	replyAs(s, w, r, out, err, renderBrowserBatch)
}

// pathParam reads and validates the path query parameter; def "" = required.
func pathParam(r *http.Request, def string) (string, error) {
	vals, ok := r.URL.Query()["path"]
	if !ok || len(vals) == 0 {
		if def != "" {
			return def, nil
		}
		var is issues
		is.missing("query", "path")
		return "", is.err()
	}
	return validatePath("path", vals[0])
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	content, err := s.caps.ReadFile(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p)
	s.reply(w, r, bayapi.FileContentResponse{Content: content}, err)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	var req bayapi.WriteFileRequest
	if err := s.decodeInput(w, r, &req, "path", "content"); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := validatePath("path", *req.Path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.caps.WriteFile(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p, *req.Content)
	s.reply(w, r, bayapi.StatusResponse{Status: "ok"}, err)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.caps.DeleteFile(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p)
	s.reply(w, r, bayapi.StatusResponse{Status: "ok"}, err)
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, ".")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, err := s.caps.ListDir(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p)
	replyAs(s, w, r, entries, err, renderDirectory)
}

// maxFormField bounds a text field of the upload form (spooled in memory).
const maxFormField = 8 << 10

// upload streams a multipart upload to ship end to end: the request is read part by part
// (r.MultipartReader); small text fields before the file are kept, the file part is piped
// into ship's upload request without buffering. The target path is the "path" field (which
// must precede the file part) or the ?path= query parameter.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	max := s.opts.MaxUploadBytes
	limit, key := s.caps.UploadLimit(max)
	total := s.caps.Limits().MaxInputsBytesTotal
	if limit > 0 && r.ContentLength > limit+1<<20 {
		s.fail(w, r, bay.TooLarge("upload", -1, limit, key))
		return
	}
	if err := bay.CheckSize("upload request body", r.ContentLength, total, bay.LimitsKey+"total_input_max_bytes"); err != nil {
		s.fail(w, r, err)
		return
	}
	if total > 0 {
		// A body without a length is cut there: the part being read fails with the error.
		r.Body = struct {
			io.Reader
			io.Closer
		}{&capability.CapReader{R: r.Body, Limit: total, TooLarge: func() error {
			return bay.TooLarge("upload request body", -1, total, bay.LimitsKey+"total_input_max_bytes")
		}}, r.Body}
	}
	// The multipart reader reads in 4 KiB pieces; a larger buffer under it cuts the reads of
	// the request body (and their hand-offs) by 64 (upload through bay: ~100 -> ~260 MB/s).
	r.Body = struct {
		io.Reader
		io.Closer
	}{bufio.NewReaderSize(r.Body, 256<<10), r.Body}
	mr, err := r.MultipartReader()
	if err != nil {
		var is issues
		is.add("missing", []any{"body", bayapi.UploadFileField}, "Expected multipart/form-data with a file part", nil, nil)
		s.fail(w, r, is.err())
		return
	}
	var rawPath *string
	if v, ok := r.URL.Query()["path"]; ok && len(v) > 0 {
		rawPath = &v[0]
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if bay.ErrorCode(err) == bay.CodePayloadTooLarge {
			s.fail(w, r, err)
			return
		}
		if err != nil {
			var is issues
			is.add("value_error", []any{"body"}, "Malformed multipart body", nil, nil)
			s.fail(w, r, is.err())
			return
		}
		switch part.FormName() {
		case bayapi.UploadPathField:
			b, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
			if err != nil || len(b) > maxFormField {
				s.fail(w, r, bay.Errorf(bay.CodeValidation, "path field unreadable or too long"))
				return
			}
			v := string(b)
			rawPath = &v
		case bayapi.UploadFileField:
			if rawPath == nil {
				var is issues
				is.add("missing", []any{"body", bayapi.UploadPathField}, "Field required (send the path field before the file part, or ?path=)", nil, nil)
				s.fail(w, r, is.err())
				return
			}
			p, err := validatePath("path", *rawPath)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			n, err := s.caps.Upload(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p, part, max)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			// Drain the rest of the form so the client sees our answer, not a reset.
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			writeJSON(w, http.StatusOK, bayapi.UploadResponse{Status: "ok", Path: p, Size: n})
			return
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(part, maxFormField))
		}
		part.Close()
	}
	var is issues
	if rawPath == nil {
		is.missing("body", bayapi.UploadPathField)
	}
	is.missing("body", bayapi.UploadFileField)
	s.fail(w, r, is.err())
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc, size, err := s.caps.Download(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", contentDisposition(path.Base(p)))
	if size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		if r.Context().Err() != nil {
			s.log.InfoContext(r.Context(), "download cancelled by the client", "request_id", requestID(r.Context()), "status", StatusClientClosedRequest, "err", err)
			return
		}
		s.log.WarnContext(r.Context(), "download interrupted", "request_id", requestID(r.Context()), "err", err)
		// The status is sent: reset the connection so that the client never takes what it got
		// for the whole file (a chunked answer would otherwise end cleanly).
		panic(http.ErrAbortHandler)
	}
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9!#$&+.^_|~-]+$`)

// contentDisposition is an RFC 6266 attachment header: a plain token filename when possible,
// else a quoted ASCII fallback plus filename* (RFC 5987) for the exact UTF-8 name.
func contentDisposition(name string) string {
	if tokenRE.MatchString(name) {
		return "attachment; filename=" + name
	}
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" && isASCII(name) {
		return v
	}
	var fb strings.Builder
	for _, c := range name {
		switch {
		case c < 0x20 || c > 0x7e || c == '"' || c == '\\':
			fb.WriteByte('_')
		default:
			fb.WriteRune(c)
		}
	}
	ext := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	if ext == "" {
		return `attachment; filename="` + fb.String() + `"`
	}
	return `attachment; filename="` + fb.String() + `"; ` + strings.TrimPrefix(ext, "attachment; ")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ---- history ----

func execTypeParam(r *http.Request, is *issues) string {
	t := r.URL.Query().Get("exec_type")
	switch t {
	case "", bayapi.ExecPython, bayapi.ExecShell, bayapi.ExecBrowser, bayapi.ExecBrowserBatch:
		return t
	}
	is.add("string_pattern_mismatch", []any{"query", "exec_type"}, "String should match pattern '^(python|shell|browser|browser_batch)$'", t,
		map[string]any{"pattern": "^(python|shell|browser|browser_batch)$"})
	return ""
}

func (s *Server) listHistory(w http.ResponseWriter, r *http.Request) {
	var is issues
	p := history.Params{ExecType: execTypeParam(r, &is)}
	if v := queryBool(r, &is, "success_only"); v != nil {
		p.SuccessOnly = *v
	}
	p.Limit = int(queryInt(r, &is, "limit", bayapi.DefaultHistLimit, 1, bayapi.MaxHistLimit))
	p.Offset = int(queryInt(r, &is, "offset", 0, 0, bayapi.MaxOffset))
	if v, ok := r.URL.Query()["tags"]; ok && len(v) > 0 {
		p.Tags = &v[0]
		is.strLen(p.Tags, bayapi.MaxTagsLen, "query", "tags")
	}
	p.HasNotes = queryBool(r, &is, "has_notes")
	p.HasDescription = queryBool(r, &is, "has_description")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.history.List(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p)
	replyAs(s, w, r, out, err, renderExecutionPage)
}

func (s *Server) lastHistory(w http.ResponseWriter, r *http.Request) {
	var is issues
	t := execTypeParam(r, &is)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.history.Last(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), t)
	replyAs(s, w, r, out, err, renderExecution)
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) {
	out, err := s.history.Get(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), r.PathValue("execution_id"))
	replyAs(s, w, r, out, err, renderExecution)
}

func (s *Server) annotateHistory(w http.ResponseWriter, r *http.Request) {
	var req bayapi.AnnotateExecutionRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	annotationLens(&is, req.Description, req.Tags)
	is.strLen(req.Notes, bayapi.MaxNotesLen, "body", "notes")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.history.Annotate(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), r.PathValue("execution_id"),
		req.Description, req.Tags, req.Notes)
	replyAs(s, w, r, out, err, renderExecution)
}

// ---- cargos ----

func (s *Server) createCargo(w http.ResponseWriter, r *http.Request) {
	var req bayapi.CreateCargoRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var size *int64
	if req.SizeLimitMB != nil {
		var is issues
		is.intRange(int64(*req.SizeLimitMB), 1, 65536, "body", "size_limit_mb")
		if err := is.err(); err != nil {
			s.fail(w, r, err)
			return
		}
		v := int64(*req.SizeLimitMB)
		size = &v
	}
	canon := struct {
		SizeLimitMB *int64 `json:"size_limit_mb"`
	}{size}
	owner := Owner(r.Context())
	res, err := s.idem.Do(r.Context(), s.idemRequest(r, canon), http.StatusCreated, func(ctx context.Context, hook idempotency.Hook) (any, error) {
		c, err := s.cargos.Create(ctx, owner, size, rendered(hook, renderCargo))
		if err != nil {
			return nil, err
		}
		return renderCargo(c), nil
	})
	s.writeIdem(w, r, res, err)
}

func (s *Server) listCargos(w http.ResponseWriter, r *http.Request) {
	var is issues
	limit := queryInt(r, &is, "limit", bayapi.DefaultListLimit, 1, bayapi.MaxListLimit)
	cursor := queryString(r, &is, "cursor", bayapi.MaxCursorLen)
	managed := queryBool(r, &is, "managed")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.cargos.List(r.Context(), Owner(r.Context()), managed != nil && *managed, int(limit), cursor)
	replyAs(s, w, r, out, err, renderCargoList)
}

func (s *Server) getCargo(w http.ResponseWriter, r *http.Request) {
	out, err := s.cargos.Get(r.Context(), Owner(r.Context()), r.PathValue("cargo_id"))
	replyAs(s, w, r, out, err, renderCargo)
}

func (s *Server) deleteCargo(w http.ResponseWriter, r *http.Request) {
	if err := s.cargos.Delete(r.Context(), Owner(r.Context()), r.PathValue("cargo_id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ---- admin ----

var errGCUnavailable = errors.New("gc unavailable")

func (s *Server) gcRun(w http.ResponseWriter, r *http.Request) {
	if !s.requireAdmin(w, r, "GC is run and read with an admin API key") {
		return
	}
	if s.opts.GC == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "GC scheduler is not available").WithCause(errGCUnavailable))
		return
	}
	s.opts.GC.HandleRun(w, r)
}

func (s *Server) gcStatus(w http.ResponseWriter, r *http.Request) {
	if !s.requireAdmin(w, r, "GC is run and read with an admin API key") {
		return
	}
	if s.opts.GC == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "GC scheduler is not available").WithCause(errGCUnavailable))
		return
	}
	s.opts.GC.HandleStatus(w, r)
}
