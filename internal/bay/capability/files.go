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
	// The runtime bounds what it sends (its own read limit); the operator's cap is checked
	// here, on the text as received.
	if err := bay.CheckSize("file "+path, int64(len(r.Content)), s.cfg.Limits.MaxOutputBytes, bay.LimitsKey+"output_max_bytes"); err != nil {
		return "", err
	}
	return r.Content, nil
}

// WriteFile writes a text file (parents created, overwritten). Content over the input cap
// is refused before anything is sent (payload_too_large): the file is left as it was.
func (s *Service) WriteFile(ctx context.Context, owner, id, path, content string) error {
	if err := bay.CheckSize("file content", int64(len(content)), s.cfg.Limits.MaxInputBytes, bay.LimitsKey+"input_max_bytes"); err != nil {
		return err
	}
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

// UploadLimit is the most one upload may carry and the setting it comes from: the input cap,
// or cargoMax (cargo.max_upload_bytes) when that is smaller and positive.
func (s *Service) UploadLimit(cargoMax int64) (int64, string) {
	limit, key := s.cfg.Limits.MaxInputBytes, bay.LimitsKey+"input_max_bytes"
	if cargoMax > 0 && (limit <= 0 || cargoMax < limit) {
		limit, key = cargoMax, "cargo.max_upload_bytes"
	}
	return limit, key
}

// CapReader hands on at most Limit (> 0) bytes of R and fails with TooLarge's error once R
// has more; it never reads more than one byte past the limit. N counts the bytes read.
type CapReader struct {
	R        io.Reader
	Limit    int64
	TooLarge func() error
	N        int64 // bytes read so far
}

func (c *CapReader) Read(p []byte) (int, error) {
	if c.Limit > 0 && int64(len(p)) > c.Limit-c.N+1 {
		p = p[:c.Limit-c.N+1]
	}
	n, err := c.R.Read(p)
	c.N += int64(n)
	if c.Limit > 0 && c.N > c.Limit {
		// The byte past the limit is not handed on.
		return n - int(c.N-c.Limit), c.TooLarge()
	}
	return n, err
}

// Upload streams src into the file at path (normalised already), failing with
// payload_too_large once more than UploadLimit(cargoMax) bytes were read: the runtime writes
// into a temporary file renamed into place only once the upload is whole, so a refused upload
// leaves the target as it was. It returns the byte count.
func (s *Service) Upload(ctx context.Context, owner, id, path string, src io.Reader, cargoMax int64) (int64, error) {
	limit, key := s.UploadLimit(cargoMax)
	lr := &CapReader{R: src, Limit: limit, TooLarge: func() error { return bay.TooLarge("upload", -1, limit, key) }}
	// Not resent: the body is a stream read once.
	_, _, err := s.invoke(ctx, owner, id, bay.CapFilesystem, callOpts{watch: true}, func(ctx context.Context, ep string) error {
		_, err := s.ship.Upload(ctx, ep, path, lr)
		return err
	})
	if err != nil {
		return 0, err
	}
	return lr.N, nil
}

// Download opens the file at path for streaming; the caller closes the reader. size is -1
// when unknown. A file over the output cap is payload_too_large when its size is known; when
// it is not, the reader fails with that error past the cap (the caller then cuts the answer).
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
	limit, key := s.cfg.Limits.MaxOutputBytes, bay.LimitsKey+"output_max_bytes"
	if err := bay.CheckSize("file "+path, n, limit, key); err != nil {
		rc.Close()
		return nil, 0, err
	}
	if n < 0 && limit > 0 {
		rc = readCloser{&CapReader{R: rc, Limit: limit, TooLarge: func() error { return bay.TooLarge("file "+path, -1, limit, key) }}, rc}
	}
	return rc, n, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
