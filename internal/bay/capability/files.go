package capability

import (
	"context"
	"io"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ReadFile returns a text file's content. path is normalised already.
func (s *Service) ReadFile(ctx context.Context, owner, id, path string) (string, error) {
	var r *shipapi.ReadFileResponse
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) (err error) {
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
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) error {
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
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) error {
		return s.ship.DeleteFile(ctx, ep, path)
	})
	return err
}

// ListDir lists a directory (hidden entries omitted, as the reference).
func (s *Service) ListDir(ctx context.Context, owner, id, path string) ([]bay.FileEntry, error) {
	var r *shipapi.ListDirResponse
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{resend: true, watch: true}, func(ctx context.Context, ep string) (err error) {
		r, err = s.ship.ListDir(ctx, ep, path, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]bay.FileEntry, 0, len(r.Files))
	for _, f := range r.Files {
		out = append(out, bay.FileEntry{Name: f.Name, Path: f.Path, IsFile: f.IsFile, IsDir: f.IsDir, Size: f.Size, ModifiedTime: f.ModifiedTime})
	}
	return out, nil
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
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{watch: true}, func(ctx context.Context, ep string) error {
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
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{resend: true}, func(ctx context.Context, ep string) (err error) {
		rc, n, err = s.ship.Download(ctx, ep, path)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return rc, n, nil
}
