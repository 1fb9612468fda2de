package sdk

import (
	"context"
	"io"
	"time"
)

// Refresh re-reads the sandbox and updates the snapshot.
func (s *Sandbox) Refresh(ctx context.Context) error {
	n, err := s.c.GetSandbox(ctx, s.ID)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// Python runs code with default options; see Client.ExecPython.
func (s *Sandbox) Python(ctx context.Context, code string) (*PythonResult, error) {
	return s.c.ExecPython(ctx, s.ID, PythonRequest{Code: code})
}

// ExecPython runs a python request; see Client.ExecPython.
func (s *Sandbox) ExecPython(ctx context.Context, req PythonRequest) (*PythonResult, error) {
	return s.c.ExecPython(ctx, s.ID, req)
}

// Shell runs a command with default options; see Client.ExecShell.
func (s *Sandbox) Shell(ctx context.Context, command string) (*ShellResult, error) {
	return s.c.ExecShell(ctx, s.ID, ShellRequest{Command: command})
}

// ExecShell runs a shell request; see Client.ExecShell.
func (s *Sandbox) ExecShell(ctx context.Context, req ShellRequest) (*ShellResult, error) {
	return s.c.ExecShell(ctx, s.ID, req)
}

// ReadFile see Client.ReadFile.
func (s *Sandbox) ReadFile(ctx context.Context, path string) (string, error) {
	return s.c.ReadFile(ctx, s.ID, path)
}

// WriteFile see Client.WriteFile.
func (s *Sandbox) WriteFile(ctx context.Context, path, content string) error {
	return s.c.WriteFile(ctx, s.ID, path, content)
}

// DeleteFile see Client.DeleteFile.
func (s *Sandbox) DeleteFile(ctx context.Context, path string) error {
	return s.c.DeleteFile(ctx, s.ID, path)
}

// ListFiles see Client.ListFiles.
func (s *Sandbox) ListFiles(ctx context.Context, path string) ([]FileInfo, error) {
	return s.c.ListFiles(ctx, s.ID, path)
}

// Upload see Client.Upload.
func (s *Sandbox) Upload(ctx context.Context, path string, r io.Reader, size int64) (*UploadResult, error) {
	return s.c.Upload(ctx, s.ID, path, r, size)
}

// Download see Client.Download.
func (s *Sandbox) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	return s.c.Download(ctx, s.ID, path, w)
}

// ExtendTTL extends the TTL and updates the snapshot; see Client.ExtendTTL.
func (s *Sandbox) ExtendTTL(ctx context.Context, by time.Duration, opts ...CallOption) error {
	n, err := s.c.ExtendTTL(ctx, s.ID, by, opts...)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// Keepalive see Client.Keepalive.
func (s *Sandbox) Keepalive(ctx context.Context) error { return s.c.Keepalive(ctx, s.ID) }

// Stop see Client.StopSandbox.
func (s *Sandbox) Stop(ctx context.Context) error { return s.c.StopSandbox(ctx, s.ID) }

// Delete see Client.DeleteSandbox.
func (s *Sandbox) Delete(ctx context.Context) error { return s.c.DeleteSandbox(ctx, s.ID) }

// History see Client.ListHistory.
func (s *Sandbox) History(ctx context.Context, req HistoryRequest) (*History, error) {
	return s.c.ListHistory(ctx, s.ID, req)
}

// Terminal see Client.Terminal.
func (s *Sandbox) Terminal(ctx context.Context, cols, rows int) (*TerminalConn, error) {
	return s.c.Terminal(ctx, s.ID, cols, rows)
}

// Browser runs one browser command with default options; see Client.ExecBrowser.
func (s *Sandbox) Browser(ctx context.Context, cmd string) (*BrowserResult, error) {
	return s.c.ExecBrowser(ctx, s.ID, BrowserRequest{Cmd: cmd})
}

// ExecBrowser runs a browser request; see Client.ExecBrowser.
func (s *Sandbox) ExecBrowser(ctx context.Context, req BrowserRequest, opts ...CallOption) (*BrowserResult, error) {
	return s.c.ExecBrowser(ctx, s.ID, req, opts...)
}

// BrowserBatch runs browser commands in order; see Client.ExecBrowserBatch.
func (s *Sandbox) BrowserBatch(ctx context.Context, req BrowserBatchRequest, opts ...CallOption) (*BrowserBatchResult, error) {
	return s.c.ExecBrowserBatch(ctx, s.ID, req, opts...)
}

// Screenshot see Client.Screenshot.
func (s *Sandbox) Screenshot(ctx context.Context, remotePath string, full bool, w io.Writer) (*BrowserResult, int64, error) {
	return s.c.Screenshot(ctx, s.ID, remotePath, full, w)
}
