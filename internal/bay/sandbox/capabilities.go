package sandbox

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ValidatePath validates a workspace-relative path (not empty, no NUL, relative, never above the
// workspace after resolving "..") and returns its
// normalised form ("." for the root). field names the request field ("path" or "cwd") in the
// invalid_path error's details {field, reason}; reasons: empty_path, null_byte, absolute_path,
// path_traversal.
func ValidatePath(field, p string) (string, error) {
	bad := func(reason, msg string) error {
		return bay.Errorf(bay.CodeInvalidPath, "%s", msg).WithDetails(map[string]any{"field": field, "reason": reason})
	}
	switch {
	case p == "":
		return "", bad("empty_path", field+" cannot be empty")
	case strings.ContainsRune(p, 0):
		return "", bad("null_byte", field+" contains invalid characters")
	case strings.HasPrefix(p, "/"):
		return "", bad("absolute_path", field+" must be a relative path")
	}
	var stack []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(stack) == 0 {
				return "", bad("path_traversal", field+" escapes workspace boundary")
			}
			stack = stack[:len(stack)-1]
		default:
			stack = append(stack, c)
		}
	}
	if len(stack) == 0 {
		return ".", nil
	}
	return strings.Join(stack, "/"), nil
}

// target resolves a capability call: the owner's sandbox (not_found), the profile's capability
// (capability_not_supported), expiry (sandbox_expired), then EnsureRunning, and returns the
// authorized endpoint of the container serving the capability (checked against its runtime's
// description).
func (s *Service) target(ctx context.Context, owner, id, capability string) (*bay.Sandbox, *bay.Session, *bay.SessionContainer, string, error) {
	sb, err := bay.OwnedSandbox(ctx, s.store, owner, id)
	if err != nil {
		return nil, nil, nil, "", err
	}
	prof := s.Profile(sb.ProfileID)
	if prof == nil {
		return nil, nil, nil, "", bay.Errorf(bay.CodeCapabilityNotSupported, "Profile not found: %s", sb.ProfileID).
			WithDetails(map[string]any{"capability": capability})
	}
	if !prof.HasCapability(capability) {
		return nil, nil, nil, "", bay.Errorf(bay.CodeCapabilityNotSupported, "Profile '%s' does not support capability: %s", prof.ID, capability).
			WithDetails(map[string]any{"capability": capability, "available": prof.Capabilities()})
	}
	if sb.Expired(s.now()) {
		return nil, nil, nil, "", bay.ErrExpired(sb, "sandbox is expired")
	}
	sess, err := s.ensureRunning(ctx, sb)
	if err != nil {
		return nil, nil, nil, "", err
	}
	c, err := routeCapability(prof, sess, capability)
	if err != nil {
		return nil, nil, nil, "", err
	}
	ep := sess.AuthorizedURL(c.Endpoint) // carries the session's runtime token: never log it
	if err := s.checkRuntimeCapability(ctx, sess, c, ep, capability); err != nil {
		return nil, nil, nil, "", err
	}
	return sb, sess, c, ep, nil
}

// routeCapability returns the session container serving capability: the one the profile routes
// it to (primary_for, then capabilities), else the first session container listing it, else
// the primary of a session whose containers list no capabilities, else
// capability_not_supported.
func routeCapability(prof *bay.Profile, sess *bay.Session, capability string) (*bay.SessionContainer, error) {
	if c := prof.ContainerFor(capability); c != nil {
		if sc := sess.Container(c.Name); sc != nil && sc.Endpoint != "" {
			return sc, nil
		}
	}
	avail := map[string]bool{}
	for i := range sess.Containers {
		sc := &sess.Containers[i]
		for _, c := range sc.Capabilities {
			if c == capability && sc.Endpoint != "" {
				return sc, nil
			}
			avail[c] = true
		}
	}
	if len(sess.Containers) == 1 && len(avail) == 0 && sess.Containers[0].Endpoint != "" {
		return &sess.Containers[0], nil
	}
	return nil, bay.Errorf(bay.CodeCapabilityNotSupported, "No container provides capability: %s", capability).
		WithDetails(map[string]any{"capability": capability, "available": slices.Sorted(maps.Keys(avail))})
}

// checkRuntimeCapability is the second check, against the runtime's own (cached) description.
// A runtime whose description cannot be read is not refused here (the call itself will tell).
func (s *Service) checkRuntimeCapability(ctx context.Context, sess *bay.Session, c *bay.SessionContainer, endpoint, capability string) error {
	rc, err := s.runtimes.For(c.RuntimeType)
	if err != nil {
		return bay.Internal("No client for the runtime", err)
	}
	m, err := rc.Describe(ctx, endpoint)
	if err != nil {
		s.runtimeUnreachable(sess, err)
		s.log.Warn("runtime description unavailable", "session_id", sess.ID, "container", c.Name, "err", err)
		return nil
	}
	if len(m.Capabilities) == 0 || m.Has(capability) {
		return nil
	}
	return bay.Errorf(bay.CodeCapabilityNotSupported, "Runtime does not support capability: %s", capability).
		WithDetails(map[string]any{"capability": capability, "available": m.Capabilities})
}

// PythonParams are the inputs of ExecPython (timeout already validated 1..300).
type PythonParams struct {
	Code        string
	Timeout     int
	IncludeCode bool
	Description *string
	Tags        *string
}

// ExecPython runs code in the sandbox's kernel and records an execution-history row after the
// call returns (a call that fails with an error records nothing). execution_time_ms covers
// the runtime call only, not a cold start.
func (s *Service) ExecPython(ctx context.Context, owner, id string, p PythonParams) (*bayapi.PythonExecResponse, error) {
	var r *shipapi.ExecPythonResponse
	var ms int64
	sb, sess, err := s.invoke(ctx, owner, id, bayapi.CapPython, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) (err error) {
		began := time.Now()
		r, err = s.ship.ExecPython(ctx, ep, shipapi.ExecPythonRequest{Code: p.Code, Timeout: p.Timeout})
		ms = time.Since(began).Milliseconds()
		return err
	})
	if err != nil {
		return nil, err
	}
	if r.Output.Images == nil {
		r.Output.Images = []map[string]string{}
	}
	resp := &bayapi.PythonExecResponse{
		Success: r.Success, Output: r.Output.Text, Error: r.Error,
		Data:            bayapi.PythonExecData{ExecutionCount: r.ExecutionCount, Output: r.Output},
		ExecutionTimeMS: ms,
		KernelRestarted: r.KernelRestarted, KernelNotice: r.KernelNotice,
		OutputTruncated: r.TextTruncated, ImagesTruncated: r.ImagesTruncated, Notice: r.Notice,
	}
	if p.IncludeCode {
		c := p.Code
		resp.Code = &c
	}
	out := r.Output.Text
	resp.ExecutionID, err = s.recordExecution(ctx, sb, sess, bayapi.ExecPython, p.Code, r.Success, ms, &out, r.Error, p.Description, p.Tags)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ShellParams are the inputs of ExecShell (timeout validated; Cwd already normalised).
type ShellParams struct {
	Command     string
	Timeout     int
	Cwd         *string
	IncludeCode bool
	Description *string
	Tags        *string
}

// ExecShell runs a command and records an execution-history row. error is ship's error, or its
// stderr when there is none.
func (s *Service) ExecShell(ctx context.Context, owner, id string, p ShellParams) (*bayapi.ShellExecResponse, error) {
	var r *shipapi.ExecShellResponse
	var ms int64
	sb, sess, err := s.invoke(ctx, owner, id, bayapi.CapShell, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) (err error) {
		began := time.Now()
		t := p.Timeout
		r, err = s.ship.ExecShell(ctx, ep, shipapi.ExecShellRequest{Command: p.Command, Timeout: &t, Cwd: p.Cwd})
		ms = time.Since(began).Milliseconds()
		return err
	})
	if err != nil {
		return nil, err
	}
	errText := r.Error
	if errText == nil || *errText == "" {
		errText = nil
		if se := strings.TrimSpace(r.Stderr); se != "" {
			errText = &se
		}
	}
	resp := &bayapi.ShellExecResponse{
		Success: r.ReturnCode == 0 && r.Success, Output: strings.TrimSpace(r.Stdout), Error: errText,
		ExitCode: r.ReturnCode, ExecutionTimeMS: ms, StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, Notice: r.Notice,
	}
	if p.IncludeCode {
		c := p.Command
		resp.Command = &c
	}
	out := resp.Output
	resp.ExecutionID, err = s.recordExecution(ctx, sb, sess, bayapi.ExecShell, p.Command, resp.Success, ms, &out, errText, p.Description, p.Tags)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *Service) recordExecution(ctx context.Context, sb *bay.Sandbox, sess *bay.Session, typ, code string, ok bool, ms int64, output, errText, desc, tags *string) (string, error) {
	e := &bay.Execution{
		ID: bay.NewID(bay.PrefixExecution), Owner: sb.Owner, SandboxID: sb.ID, SessionID: sess.ID,
		ExecType: typ, Code: code, Success: ok, ExecutionTimeMS: ms, Output: output, Error: errText,
		Description: desc, Tags: bay.NormalizeTags(tags), CreatedAt: s.now(),
	}
	// Detached: the runtime already did the work; the record must not be lost to a client
	// that hangs up now.
	dctx, cancel := bay.Detached(ctx, 10*time.Second)
	defer cancel()
	if err := s.store.Tx(dctx, func(tx bay.Tx) error { return tx.InsertExecution(dctx, e) }); err != nil {
		return "", bay.Internal("Failed to record execution history", err)
	}
	return e.ID, nil
}

// ReadFile returns a text file's content. path is normalised already.
func (s *Service) ReadFile(ctx context.Context, owner, id, path string) (string, error) {
	var r *shipapi.ReadFileResponse
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) (err error) {
		r, err = s.ship.ReadFile(ctx, ep, path)
		return err
	})
	if err != nil {
		return "", err
	}
	return r.Content, nil
}

// WriteFile writes a text file (parents created, overwritten).
func (s *Service) WriteFile(ctx context.Context, owner, id, path, content string) error {
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) error {
		_, err := s.ship.WriteFile(ctx, ep, path, content)
		return err
	})
	return err
}

// DeleteFile deletes a file or a directory tree. The workspace root itself is refused
// (invalid_path, reason workspace_root): the reference wiped the whole workspace on "." .
func (s *Service) DeleteFile(ctx context.Context, owner, id, path string) error {
	if path == "." || path == "" {
		return bay.Errorf(bay.CodeInvalidPath, "path cannot be the workspace root").
			WithDetails(map[string]any{"field": "path", "reason": "workspace_root"})
	}
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) error {
		return s.ship.DeleteFile(ctx, ep, path)
	})
	return err
}

// ListDir lists a directory (hidden entries omitted, as the reference).
func (s *Service) ListDir(ctx context.Context, owner, id, path string) ([]shipapi.FileInfo, error) {
	var r *shipapi.ListDirResponse
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) (err error) {
		r, err = s.ship.ListDir(ctx, ep, path, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r.Files == nil {
		r.Files = []shipapi.FileInfo{}
	}
	return r.Files, nil
}

// ErrTooLarge is the error of an upload over the size limit (payload_too_large, 413).
func ErrTooLarge(limit int64) *bay.Error {
	return bay.Errorf(bay.CodePayloadTooLarge, "Upload exceeds the limit of %d bytes", limit).WithDetails(map[string]any{"max_bytes": limit})
}

// limitReader fails with ErrTooLarge once more than n bytes were read.
type limitReader struct {
	r     io.Reader
	n     int64 // remaining
	limit int64
	read  int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.limit > 0 && int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	if l.limit > 0 {
		l.n -= int64(n)
		if l.n < 0 {
			return n, ErrTooLarge(l.limit)
		}
	}
	return n, err
}

// Upload streams src into the file at path (normalised already), failing with
// payload_too_large once more than maxBytes (> 0) were read. It returns the byte count.
func (s *Service) Upload(ctx context.Context, owner, id, path string, src io.Reader, maxBytes int64) (int64, error) {
	lr := &limitReader{r: src, n: maxBytes, limit: maxBytes}
	// Not resent: the body is a stream read once.
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapFilesystem, callOpts{watch: true}, func(ctx context.Context, ep string) error {
		_, err := s.ship.Upload(ctx, ep, path, lr)
		return err
	})
	if err != nil {
		return 0, err
	}
	return lr.read, nil
}

// Download opens the file at path for streaming; the caller closes the reader. size is -1
// when unknown.
func (s *Service) Download(ctx context.Context, owner, id, path string) (io.ReadCloser, int64, error) {
	var rc io.ReadCloser
	var n int64
	// Not watched: the stream outlives the call that opens it.
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapFilesystem, callOpts{resend: true}, func(ctx context.Context, ep string) (err error) {
		rc, n, err = s.ship.Download(ctx, ep, path)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return rc, n, nil
}

// OpenTerminal ensures the sandbox runs (the terminal requires the shell capability) and opens
// a cols x rows terminal on its runtime; the caller relays it and closes it.
func (s *Service) OpenTerminal(ctx context.Context, owner, id string, cols, rows int) (*websocket.Conn, error) {
	var conn *websocket.Conn
	_, _, err := s.invoke(ctx, owner, id, bayapi.CapShell, callOpts{resend: true}, func(ctx context.Context, ep string) (err error) {
		conn, err = s.ship.DialTerminal(ctx, ep, cols, rows)
		return err
	})
	if err != nil {
		var be *bay.Error
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, bay.Errorf(bay.CodeShipError, "Terminal connection to the runtime failed").WithCause(err)
	}
	return conn, nil
}
