// Package shipclient is bay's HTTP client of the Ship runtime API (api/shipapi). Every call is
// bounded by its own timeout on top of the caller's context, and every
// failure is returned as a classified *bay.Error:
//
//   - transport timeout (the per-call deadline, not the caller's cancellation) -> timeout (504);
//   - connection refused / reset / DNS -> ship_error (502), and errors.Is(err, ErrUnreachable);
//   - ship 404 on a path operation -> file_not_found (404) "File not found: <path>";
//   - ship 403 (path escapes the workspace through a symlink) -> invalid_path (400) with
//     details {"field":"path","reason":"outside_workspace"};
//   - ship 413 -> payload_too_large (413);
//   - ship 503 kernel_starting -> session_not_ready (503) with retry_after_ms;
//   - any other 4xx the client's request caused -> a 4xx with ship's code where bay has it
//     (is_directory -> is_a_directory, not_directory -> not_a_directory, bad_request and
//     unknown codes -> validation_error) and ship's message, details {"ship_status",
//     "ship_code", "path"} (see clientCode);
//   - a failing upload source (the caller's body ended early) -> validation_error (400);
//   - any other status >= 400 -> ship_error (502) "Ship request failed: <status>: <ship detail>"
//     with details {"ship_status", "ship_code"}.
//
// Ship's own detail message is passed on (it is ship's safe message, never a Go error string);
// bodies of a successful answer are decoded into the api/shipapi types.
package shipclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
)

// Per-call timeouts. Exec calls use the request's timeout plus ExecGrace.
const (
	// transferBuf is the buffer of the upload path (pipe writes and copy): see Upload.
	transferBuf     = 256 << 10
	HealthTimeout   = 2 * time.Second
	MetaTimeout     = 5 * time.Second
	FSTimeout       = 30 * time.Second
	ExecGrace       = 5 * time.Second
	DefaultTransfer = 10 * time.Minute // upload / download of a whole file
	metaCacheTTL    = 5 * time.Minute
	maxErrorBody    = 64 << 10
)

// ErrUnreachable is in the chain of errors caused by failing to reach ship at all (connection
// refused, reset, no route). The capability service treats it as a reason to re-probe the
// container.
var ErrUnreachable = runtime.ErrUnreachable

var _ runtime.Client = (*Client)(nil)

// Client calls Ship runtimes. It is safe for concurrent use; one Client serves every sandbox.
type Client struct {
	hc       *http.Client
	log      *slog.Logger
	transfer time.Duration

	mu   sync.Mutex
	meta map[string]metaEntry // endpoint without credentials -> cached /meta
}

type metaEntry struct {
	meta *shipapi.MetaResponse
	at   time.Time
}

// NewHTTPClient returns the pooled HTTP client bay uses towards runtimes: no proxy from the
// environment, keep-alive, bounded connect time. Per-call deadlines come from contexts.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		// Runtimes sit on a bridge of this host: a connect that takes seconds means the
		// container is gone (its address no longer answers), and the caller recovers sooner.
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        200,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		// 64 KiB, not the 256 KiB of the upload pipe: measured as fast for uploads (255-362
		// MB/s), and every idle pooled connection keeps both buffers (200 x 128 KiB at most).
		WriteBufferSize: 64 << 10,
		ReadBufferSize:  64 << 10,
	}}
}

// New returns a client using hc (NewHTTPClient when nil).
func New(hc *http.Client, log *slog.Logger) *Client {
	if hc == nil {
		hc = NewHTTPClient()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{hc: hc, log: log.With("component", "shipclient"), transfer: DefaultTransfer, meta: map[string]metaEntry{}}
}

// HTTPClient returns the pooled client (the terminal proxy dials ship's WebSocket with it).
func (c *Client) HTTPClient() *http.Client { return c.hc }

// SetTransferTimeout sets the bound of a whole upload or download (DefaultTransfer).
func (c *Client) SetTransferTimeout(d time.Duration) { c.transfer = d }

// Health calls GET /health with HealthTimeout; nil means HTTP 200.
func (c *Client) Health(ctx context.Context, endpoint string) error {
	var out shipapi.HealthResponse
	return c.doJSON(ctx, endpoint, http.MethodGet, shipapi.PathHealth, nil, &out, HealthTimeout, "")
}

// Meta returns GET /meta, cached per endpoint for a few minutes (the runtime does not change
// while its endpoint lives).
func (c *Client) Meta(ctx context.Context, endpoint string) (*shipapi.MetaResponse, error) {
	key := cacheKey(endpoint)
	c.mu.Lock()
	if e, ok := c.meta[key]; ok && time.Since(e.at) < metaCacheTTL {
		c.mu.Unlock()
		return e.meta, nil
	}
	c.mu.Unlock()
	var out shipapi.MetaResponse
	if err := c.doJSON(ctx, endpoint, http.MethodGet, shipapi.PathMeta, nil, &out, MetaTimeout, ""); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.meta) > 1024 {
		clear(c.meta)
	}
	c.meta[key] = metaEntry{meta: &out, at: time.Now()}
	c.mu.Unlock()
	return &out, nil
}

// Describe is Meta as the runtime-neutral description: name, version, capabilities (sorted).
func (c *Client) Describe(ctx context.Context, endpoint string) (runtime.Meta, error) {
	m, err := c.Meta(ctx, endpoint)
	if err != nil {
		return runtime.Meta{}, err
	}
	return runtime.Meta{Name: m.Runtime.Name, Version: m.Runtime.Version, Capabilities: slices.Sorted(maps.Keys(m.Capabilities))}, nil
}

// ForgetEndpoint drops cached data of an endpoint (its container is gone), with or without
// credentials.
func (c *Client) ForgetEndpoint(endpoint string) {
	c.mu.Lock()
	delete(c.meta, cacheKey(endpoint))
	c.mu.Unlock()
}

// cacheKey is an endpoint without its user info: one runtime, whatever credentials reach it.
func cacheKey(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.User == nil {
		return endpoint
	}
	u.User = nil
	return u.String()
}

// ExecPython calls POST /ipython/exec with an HTTP timeout of req.Timeout + ExecGrace.
func (c *Client) ExecPython(ctx context.Context, endpoint string, req shipapi.ExecPythonRequest) (*shipapi.ExecPythonResponse, error) {
	var out shipapi.ExecPythonResponse
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathPythonExec, req, &out, time.Duration(req.Timeout)*time.Second+ExecGrace, "")
	return &out, err
}

// ExecShell calls POST /shell/exec with an HTTP timeout of the request timeout + ExecGrace.
func (c *Client) ExecShell(ctx context.Context, endpoint string, req shipapi.ExecShellRequest) (*shipapi.ExecShellResponse, error) {
	t := 30
	if req.Timeout != nil {
		t = *req.Timeout
	}
	var out shipapi.ExecShellResponse
	cwd := ""
	if req.Cwd != nil {
		cwd = *req.Cwd
	}
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathShellExec, req, &out, time.Duration(t)*time.Second+ExecGrace, cwd)
	return &out, err
}

// ReadFile calls POST /fs/read_file.
func (c *Client) ReadFile(ctx context.Context, endpoint, path string) (*shipapi.ReadFileResponse, error) {
	var out shipapi.ReadFileResponse
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathFSRead, shipapi.ReadFileRequest{Path: path}, &out, FSTimeout, path)
	return &out, err
}

// WriteFile calls POST /fs/write_file (mode "w": create parents, overwrite).
func (c *Client) WriteFile(ctx context.Context, endpoint, path, content string) (*shipapi.WriteFileResponse, error) {
	var out shipapi.WriteFileResponse
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathFSWrite, shipapi.WriteFileRequest{Path: path, Content: content, Mode: "w"}, &out, FSTimeout, path)
	return &out, err
}

// DeleteFile calls POST /fs/delete_file (files, or directories recursively).
func (c *Client) DeleteFile(ctx context.Context, endpoint, path string) error {
	var out shipapi.DeleteFileResponse
	return c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathFSDelete, shipapi.DeleteFileRequest{Path: path}, &out, FSTimeout, path)
}

// ListDir calls POST /fs/list_dir.
func (c *Client) ListDir(ctx context.Context, endpoint, path string, showHidden bool) (*shipapi.ListDirResponse, error) {
	var out shipapi.ListDirResponse
	err := c.doJSON(ctx, endpoint, http.MethodPost, shipapi.PathFSList, shipapi.ListDirRequest{Path: path, ShowHidden: showHidden}, &out, FSTimeout, path)
	return &out, err
}

// Upload streams src to POST /fs/upload as multipart/form-data (the file_path field first,
// then the file part) through an io.Pipe: nothing is buffered beyond one 256 KiB buffer. If
// reading src fails, that error is returned as is (so a classified payload_too_large from a
// limiting reader reaches the caller). A 200 answer with success:false is an error (ship_error).
func (c *Client) Upload(ctx context.Context, endpoint, path string, src io.Reader) (*shipapi.UploadResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.transfer)
	defer cancel()

	pr, pw := io.Pipe()
	// Large writes into the pipe: every pipe write is a hand-off to the transport's goroutine,
	// and in 4 KiB pieces (multipart's and io.Copy's default) that hand-off capped the upload at
	// ~100 MB/s.
	bw := bufio.NewWriterSize(pw, transferBuf)
	mw := multipart.NewWriter(bw)
	var srcErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := func() error {
			if err := mw.WriteField(shipapi.UploadPathField, path); err != nil {
				return err
			}
			h := make(textproto.MIMEHeader)
			h.Set("Content-Disposition", `form-data; name="`+shipapi.UploadFileField+`"; filename="file"`)
			h.Set("Content-Type", "application/octet-stream")
			fw, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if _, err := io.CopyBuffer(fw, readerOnly{src, &srcErr}, make([]byte, transferBuf)); err != nil {
				return err
			}
			if err := mw.Close(); err != nil {
				return err
			}
			return bw.Flush()
		}()
		pw.CloseWithError(err)
	}()

	u := endpoint + shipapi.PathFSUpload
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, pr)
	if err != nil {
		pr.CloseWithError(err)
		<-done
		return nil, bay.Errorf(bay.CodeInternal, "Upload failed").WithCause(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.hc.Do(req)
	pr.CloseWithError(errors.New("upload finished"))
	<-done
	if srcErr != nil {
		if resp != nil {
			resp.Body.Close()
		}
		var be *bay.Error
		switch {
		case errors.As(srcErr, &be):
			return nil, srcErr
		case ctx.Err() == nil:
			// The caller's body failed (a truncated multipart upload): the client's mistake.
			return nil, bay.Errorf(bay.CodeValidation, "Upload body could not be read: it ended early or is malformed").WithCause(srcErr)
		}
	}
	if err != nil {
		return nil, c.transportError(ctx, shipapi.PathFSUpload, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return nil, c.statusError(resp, shipapi.PathFSUpload, path)
	}
	var out shipapi.UploadResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, bay.Errorf(bay.CodeShipError, "Ship returned an invalid upload response").WithCause(err)
	}
	if !out.Success {
		msg := "Upload failed"
		if out.Error != nil && *out.Error != "" {
			msg += ": " + *out.Error
		}
		return nil, bay.Errorf(bay.CodeShipError, "%s", msg)
	}
	return &out, nil
}

// readerOnly hides any WriterTo of the source (so io.Copy reads through our error capture) and
// records the source's own error, distinguishing it from pipe errors.
type readerOnly struct {
	r   io.Reader
	err *error
}

func (r readerOnly) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		*r.err = err
	}
	return n, err
}

// Download is GET /fs/download?file_path=. It returns the body (closing it releases the call),
// and the size when ship sent a Content-Length (-1 otherwise). Ship 404 -> file_not_found.
func (c *Client) Download(ctx context.Context, endpoint, path string) (io.ReadCloser, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.transfer)
	u := endpoint + shipapi.PathFSDownload + "?" + url.Values{shipapi.DownloadPathParam: {path}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, 0, bay.Errorf(bay.CodeInternal, "Download failed").WithCause(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		defer cancel()
		return nil, 0, c.transportError(ctx, shipapi.PathFSDownload, err)
	}
	if resp.StatusCode >= 400 {
		defer cancel()
		defer resp.Body.Close()
		return nil, 0, c.statusError(resp, shipapi.PathFSDownload, path)
	}
	return &cancelBody{ReadCloser: resp.Body, cancel: cancel}, resp.ContentLength, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

// DialTerminal opens ship's terminal WebSocket at endpoint (which carries the runtime token)
// with a cols x rows PTY, within 10 s.
func (c *Client) DialTerminal(ctx context.Context, endpoint string, cols, rows int) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, TerminalURL(endpoint, cols, rows), &websocket.DialOptions{HTTPClient: c.hc})
	if err != nil {
		return nil, c.transportError(ctx, shipapi.PathTerminal, err)
	}
	conn.SetReadLimit(-1)
	return conn, nil
}

// TerminalURL returns the WebSocket URL of ship's terminal for an endpoint.
func TerminalURL(endpoint string, cols, rows int) string {
	u := endpoint + shipapi.PathTerminal + "?cols=" + strconv.Itoa(cols) + "&rows=" + strconv.Itoa(rows)
	if len(u) > 4 && u[:4] == "http" {
		u = "ws" + u[4:]
	}
	return u
}

// doJSON sends body as JSON (nil = no body) and decodes a 2xx answer into out. subjectPath is
// the workspace path the call is about ("" when none), used for file_not_found / invalid_path.
func (c *Client) doJSON(ctx context.Context, endpoint, method, path string, body, out any, timeout time.Duration, subjectPath string) error {
	return runtime.DoJSON(ctx, c.hc, "Ship", endpoint, method, path, body, out, timeout, func(resp *http.Response) error {
		return c.statusError(resp, path, subjectPath)
	})
}

// transportError classifies a failure to get an answer at all.
func (c *Client) transportError(ctx context.Context, path string, err error) error {
	return runtime.TransportError(ctx, "Ship", path, err)
}

// statusError classifies a non-2xx answer of ship. A 4xx caused by what the client asked for
// (see clientCode) stays a 4xx with ship's message; everything else is ship_error (502).
func (c *Client) statusError(resp *http.Response, path, subjectPath string) error {
	var er shipapi.ErrorResponse
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if json.Unmarshal(raw, &er) != nil || er.Detail == "" {
		er.Detail = http.StatusText(resp.StatusCode)
	}
	return classify(resp.StatusCode, er, path, subjectPath)
}

// CellError is the error of a kernel job that ship ended with er: the one a python exec that
// ship answered so would fail with.
func CellError(er shipapi.ErrorResponse) error {
	return classify(shipapi.StatusOf(er.Code), er, shipapi.PathPythonExec, "")
}

// PythonResult is the domain value of ship's python exec answer r (no execution id, time or
// code yet).
func PythonResult(r *shipapi.ExecPythonResponse) *bay.PythonResult {
	return &bay.PythonResult{
		Success: r.Success, Text: r.Output.Text, Stdout: r.Stdout, Stderr: r.Stderr, Images: r.Output.Images, Error: r.Error,
		ExecutionCount: r.ExecutionCount, KernelRestarted: r.KernelRestarted, KernelNotice: r.KernelNotice,
		OutputTruncated: r.TextTruncated, ImagesTruncated: r.ImagesTruncated, Notice: r.Notice, TimedOut: r.TimedOut,
	}
}

// classify is the error of ship's answer er with the given status to a call of path (about
// the workspace path subjectPath, if any).
func classify(status int, er shipapi.ErrorResponse, path, subjectPath string) error {
	cause := fmt.Errorf("ship %s answered %d: %s", path, status, er.Detail)
	d := map[string]any{"ship_status": status}
	if er.Code != "" {
		d["ship_code"] = er.Code
	}
	switch {
	case status == http.StatusNotFound && subjectPath != "" && (er.Code == "" || er.Code == shipapi.CodeNotFound):
		return bay.Errorf(bay.CodeFileNotFound, "File not found: %s", subjectPath).WithCause(cause)
	case status == http.StatusForbidden && subjectPath != "":
		return bay.Errorf(bay.CodeInvalidPath, "path escapes workspace boundary").
			WithDetails(map[string]any{"field": "path", "reason": "outside_workspace"}).WithCause(cause)
	case status == http.StatusServiceUnavailable && er.Code == shipapi.CodeKernelStartup:
		return bay.Errorf(bay.CodeSessionNotReady, "Python kernel is starting").
			WithDetails(map[string]any{"retry_after_ms": 1000}).WithCause(cause)
	}
	if code, ok := clientCode(status, er.Code, subjectPath != ""); ok {
		if subjectPath != "" {
			d["path"] = subjectPath
		}
		return bay.Errorf(code, "%s", er.Detail).WithDetails(d).WithCause(cause)
	}
	return bay.Errorf(bay.CodeShipError, "Ship request failed: %d: %s", status, er.Detail).WithDetails(d).WithCause(cause)
}

// shipCodes renames ship's error codes whose bay code is spelled differently.
var shipCodes = map[string]string{
	shipapi.CodeBadRequest:   bayapi.CodeValidation,
	shipapi.CodeIsDirectory:  bayapi.CodeIsADirectory,
	shipapi.CodeNotDirectory: bayapi.CodeNotADirectory,
	shipapi.CodeTooLarge:     bayapi.CodePayloadTooLarge,
	shipapi.CodeNotFound:     bayapi.CodeFileNotFound,
	shipapi.CodeAccessDenied: bayapi.CodeInvalidPath,
}

// clientCode returns the bay code of a ship 4xx that the client's request caused, and false
// for answers that are bay's or ship's problem and stay a 502: 401 (bay's runtime token), 405,
// 407, 408 and 429, and a 404 of a call that is not about a workspace path (a missing route
// is a version mismatch, not the client's doing). Ship's code is kept when bay has it as a
// 4xx of its own (renamed as in shipCodes); any other client error is validation_error, and a
// 413 is always payload_too_large.
func clientCode(status int, shipCode string, aboutPath bool) (string, bool) {
	switch {
	case status < 400 || status >= 500:
		return "", false
	case status == http.StatusUnauthorized, status == http.StatusMethodNotAllowed, status == http.StatusProxyAuthRequired,
		status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return "", false
	case status == http.StatusNotFound && !aboutPath:
		return "", false
	case status == http.StatusRequestEntityTooLarge:
		return bayapi.CodePayloadTooLarge, true
	}
	code := shipCode
	if c, ok := shipCodes[code]; ok {
		code = c
	}
	switch code {
	case bayapi.CodeUnauthorized, bayapi.CodeForbidden, bayapi.CodeQuotaExceeded, bayapi.CodeNotFound:
		// Bay's own meanings (authentication, quotas, missing sandboxes): never borrowed.
		return bayapi.CodeValidation, true
	}
	if st := bayapi.StatusOf(code); st >= 400 && st < 500 {
		return code, true
	}
	return bayapi.CodeValidation, true
}
