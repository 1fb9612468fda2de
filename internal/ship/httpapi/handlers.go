package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

// ---- filesystem ----

func (s *Server) createFile(w http.ResponseWriter, r *http.Request) {
	var req shipapi.CreateFileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	mode := fs.FileMode(0o644)
	if req.Mode != nil {
		if *req.Mode < 0 || *req.Mode > 0o7777 {
			s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "mode must be permission bits between 0 and 0o7777"))
			return
		}
		mode = fs.FileMode(*req.Mode)
		// Setuid/setgid/sticky map onto Go's own mode bits.
		mode = mode.Perm() | extraBits(*req.Mode)
	}
	abs, err := s.Workspace.CreateFile(req.Path, req.Content, mode)
	s.reply(w, r, shipapi.CreateFileResponse{Success: true, Message: "File created successfully", Path: abs}, err)
}

func extraBits(m int) fs.FileMode {
	var out fs.FileMode
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	var req shipapi.ReadFileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkEncoding(req.Encoding); err != nil {
		s.writeError(w, r, err)
		return
	}
	offset, limit := 1, -1
	if req.Offset != nil {
		if *req.Offset < 0 {
			s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "offset must be >= 1 (1-based line number)"))
			return
		}
		offset = *req.Offset
	}
	if req.Limit != nil {
		if *req.Limit < 0 {
			s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "limit must be >= 0"))
			return
		}
		limit = *req.Limit
	}
	t, err := s.Workspace.ReadText(req.Path, offset, limit, s.MaxReadBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer t.Close()
	if t.Len() > s.HeavyBytes {
		release, err := s.acquireHeavy(r.Context(), 1)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
	}
	// The content is streamed from the file into the JSON answer
	// (shipapi.ReadFileResponse, same field order), never held in memory.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"content":`)
	if err := t.WriteJSON(w); err != nil {
		// The status is sent; cut the answer so the client sees broken JSON.
		s.Log.Warn("read_file: streaming failed", "path", t.Abs, "err", err)
		panic(http.ErrAbortHandler)
	}
	tail, _ := json.Marshal(t.Abs)
	fmt.Fprintf(w, `,"path":%s,"size":%d}`+"\n", tail, t.Size)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	var req shipapi.WriteFileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkEncoding(req.Encoding); err != nil {
		s.writeError(w, r, err)
		return
	}
	var appendMode bool
	switch req.Mode {
	case "", "w":
	case "a":
		appendMode = true
	default:
		s.writeError(w, r, apierr.Newf(shipapi.CodeBadRequest, "mode must be \"w\" or \"a\", not %q", req.Mode))
		return
	}
	abs, size, err := s.Workspace.WriteFile(req.Path, req.Content, appendMode)
	s.reply(w, r, shipapi.WriteFileResponse{Success: true, Message: "File written successfully", Path: abs, Size: size}, err)
}

func (s *Server) editFile(w http.ResponseWriter, r *http.Request) {
	var req shipapi.EditFileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkEncoding(req.Encoding); err != nil {
		s.writeError(w, r, err)
		return
	}
	abs, n, size, err := s.Workspace.EditFile(req.Path, req.OldString, req.NewString, req.ReplaceAll)
	s.reply(w, r, shipapi.EditFileResponse{
		Success: true, Message: fmt.Sprintf("Replaced %d occurrence(s)", n), Path: abs, Replacements: n, Size: size,
	}, err)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	var req shipapi.DeleteFileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	abs, err := s.Workspace.Delete(req.Path)
	s.reply(w, r, shipapi.DeleteFileResponse{Success: true, Message: "Deleted " + abs}, err)
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	req := shipapi.ListDirRequest{Path: "."}
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	files, abs, err := s.Workspace.List(req.Path, req.ShowHidden)
	s.reply(w, r, shipapi.ListDirResponse{Files: files, CurrentPath: abs}, err)
}

// upload streams a multipart upload to a temporary file in the target
// directory and renames it into place; nothing is buffered beyond a small
// read buffer. The file_path field must come before the file part (every
// client we know of sends form fields first).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	const slack = 1 << 20 // multipart headers and boundaries
	if s.MaxUploadBytes > 0 && r.ContentLength > s.MaxUploadBytes+slack {
		s.writeError(w, r, apierr.Newf(shipapi.CodeTooLarge, "upload larger than the limit of %d bytes", s.MaxUploadBytes))
		return
	}
	// A larger read buffer under the multipart reader cuts syscalls per byte.
	r.Body = struct {
		io.Reader
		io.Closer
	}{bufio.NewReaderSize(r.Body, 256<<10), r.Body}
	mr, err := r.MultipartReader()
	if err != nil {
		s.writeError(w, r, apierr.Wrap(shipapi.CodeBadRequest, err, "expected a multipart/form-data body"))
		return
	}
	var target string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.writeError(w, r, apierr.Wrap(shipapi.CodeBadRequest, err, "malformed multipart body"))
			return
		}
		switch part.FormName() {
		case shipapi.UploadPathField:
			// Read past the longest valid path so the workspace reports a
			// too long one precisely (invalid_path).
			const maxField = 16 << 10
			b, err := io.ReadAll(io.LimitReader(part, maxField+1))
			if err != nil {
				s.writeError(w, r, apierr.Wrap(shipapi.CodeBadRequest, err, "malformed multipart body"))
				return
			}
			if len(b) > maxField {
				s.writeError(w, r, apierr.Newf(shipapi.CodeInvalidPath, "file_path is longer than %d bytes", maxField))
				return
			}
			target = string(b)
		case shipapi.UploadFileField:
			if target == "" {
				s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "the file_path field is required and must precede the file part"))
				return
			}
			s.receiveFile(w, r, part, target)
			return
		default:
			_, _ = io.Copy(io.Discard, part)
		}
	}
	if target == "" {
		s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "the file_path field is required"))
		return
	}
	s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "the file part is required"))
}

func (s *Server) receiveFile(w http.ResponseWriter, r *http.Request, part io.Reader, target string) {
	up, err := s.Workspace.BeginUpload(target)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := s.MaxUploadBytes
	if limit <= 0 {
		limit = 1<<63 - 1
	}
	// Part.Read yields at most a few KiB per call; gather them into 1 MiB
	// writes. writeOnly hides bufio.Writer.ReadFrom, which would hand the
	// small reads straight to the file.
	bw := bufio.NewWriterSize(up.File, 1<<20)
	n, err := io.CopyBuffer(writeOnly{bw}, io.LimitReader(part, limit+1), make([]byte, 256<<10))
	if err == nil {
		err = bw.Flush()
	}
	if n > limit {
		up.Abort()
		s.writeError(w, r, apierr.Newf(shipapi.CodeTooLarge, "upload larger than the limit of %d bytes", limit))
		return
	}
	if err != nil {
		up.Abort()
		var pe *fs.PathError
		if errors.As(err, &pe) { // a write error: reported in the body, as the reference did
			msg := "write failed: " + pe.Err.Error()
			s.Log.Warn("upload write failed", "target", target, "err", err)
			writeJSON(w, http.StatusOK, shipapi.UploadResponse{Success: false, Message: "File upload failed", FilePath: s.Workspace.Abs(target), Error: &msg})
			return
		}
		s.writeError(w, r, apierr.Wrap(shipapi.CodeBadRequest, err, "upload interrupted"))
		return
	}
	abs, err := up.Commit()
	s.reply(w, r, shipapi.UploadResponse{Success: true, Message: "File uploaded successfully", FilePath: abs, Size: n}, err)
}

type writeOnly struct{ w io.Writer }

func (w writeOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get(shipapi.DownloadPathParam)
	if p == "" {
		p = r.URL.Query().Get("path")
	}
	f, fi, abs, err := s.Workspace.OpenForDownload(p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	name := path.Base(abs)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", ContentDisposition(name))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// ServeContent streams (sendfile on Linux) and handles Range/HEAD.
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// ContentDisposition renders an RFC 6266 attachment header: an ASCII
// fallback filename and the exact UTF-8 name in filename*.
func ContentDisposition(name string) string {
	var fallback strings.Builder
	for _, c := range name {
		switch {
		case c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '%' || c == ';':
			fallback.WriteByte('_')
		default:
			fallback.WriteRune(c)
		}
	}
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, fallback.String(), rfc5987(name))
}

// rfc5987 percent-encodes everything but attr-char (RFC 5987 section 3.2.1).
func rfc5987(s string) string {
	const attr = "!#$&+-.^_`|~"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(attr, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// ---- python ----

func (s *Server) execPython(w http.ResponseWriter, r *http.Request) {
	var req shipapi.ExecPythonRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Timeout < 0 {
		s.writeError(w, r, apierr.New(shipapi.CodeBadRequest, "timeout must be a positive number of seconds"))
		return
	}
	timeout := s.DefaultPythonTimeout
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout) * time.Second
	}
	resp, err := s.Kernel.Exec(r.Context(), req.Code, timeout, req.Silent)
	s.reply(w, r, resp, err)
}

func (s *Server) kernelStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Kernel.Status())
}

func (s *Server) kernelRestart(w http.ResponseWriter, r *http.Request) {
	err := s.Kernel.Restart(r.Context())
	s.reply(w, r, shipapi.KernelRestartResponse{Success: true, Message: "Kernel restarted"}, err)
}

// ---- shell ----

func (s *Server) execShell(w http.ResponseWriter, r *http.Request) {
	var req shipapi.ExecShellRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.Shell.Exec(r.Context(), req)
	s.reply(w, r, resp, err)
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, shipapi.ListProcessesResponse{Processes: s.Shell.Processes()})
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) {
	pi, err := s.Shell.Process(r.PathValue("id"))
	s.reply(w, r, pi, err)
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) {
	pi, err := s.Shell.Kill(r.PathValue("id"))
	s.reply(w, r, pi, err)
}
