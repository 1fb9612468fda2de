// Package workspace confines every file operation of the ship runtime to the
// workspace directory with an os.Root: paths are resolved by the kernel
// relative to an open directory handle, so neither ".." nor a symlink (not even
// one swapped in concurrently) can reach outside it.
//
// Paths given by clients may be relative to the workspace or absolute inside it.
// Errors are *apierr.Error values with these codes:
//   - access_denied: the path escapes the workspace (lexically or via a symlink),
//     or the OS refused access;
//   - not_found: the path does not exist;
//   - is_directory / not_directory: the wrong kind of file;
//   - invalid_path: a NUL byte, a name longer than MaxNameBytes or a path
//     longer than MaxPathBytes;
//   - bad_request: an empty path or another invalid argument.
//
// With a sandbox user (OpenAs), every operation runs with that user's
// filesystem identity (privsep.User.Do): what it creates belongs to the
// sandbox user, and the workspace's permissions apply as they do to user code.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
)

// Path limits of Linux: a name (one component) of at most 255 bytes and a
// path of at most 4095 bytes. Longer ones are client mistakes (invalid_path),
// not failures of the file system.
const (
	MaxNameBytes = 255
	MaxPathBytes = 4095
)

// Workspace is an open workspace directory. It is safe for concurrent use.
type Workspace struct {
	dir     string // absolute, as configured
	realDir string // dir with symlinks resolved, also accepted as a prefix
	root    *os.Root
	user    *privsep.User // nil: operations run as ship's own user
}

// Open opens dir (which must exist) as the workspace; operations run as
// ship's own user.
func Open(dir string) (*Workspace, error) { return OpenAs(dir, nil) }

// OpenAs opens dir as the workspace; operations run with u's filesystem
// identity (nil: ship's own).
func OpenAs(dir string, u *privsep.User) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace root %s: %w", abs, err)
	}
	return &Workspace{dir: abs, realDir: real, root: root, user: u}, nil
}

// Do runs fn as the sandbox user (see privsep.User.Do); every access to the
// workspace by ship goes through it.
func (w *Workspace) Do(fn func() error) error { return w.user.Do(fn) }

// as runs fn under Do and returns its result.
func as[T any](w *Workspace, fn func() (T, error)) (T, error) {
	var out T
	err := w.Do(func() error {
		var err error
		out, err = fn()
		return err
	})
	return out, err
}

// Close releases the root handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Dir is the absolute workspace path.
func (w *Workspace) Dir() string { return w.dir }

// Root is the confining handle; every access must go through it.
func (w *Workspace) Root() *os.Root { return w.root }

// Rel turns a client path into a clean path relative to the workspace root
// ("." for the root itself). It rejects, lexically, paths that leave the
// workspace; symlink escapes are caught later by the os.Root.
func (w *Workspace) Rel(p string) (string, error) {
	if p == "" {
		return "", apierr.New(shipapi.CodeBadRequest, "path must not be empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", apierr.New(shipapi.CodeInvalidPath, "path contains a NUL byte")
	}
	if len(p) > MaxPathBytes {
		return "", apierr.Newf(shipapi.CodeInvalidPath, "path is %d bytes long; at most %d are allowed", len(p), MaxPathBytes)
	}
	for name := range strings.SplitSeq(p, "/") {
		if len(name) > MaxNameBytes {
			return "", apierr.Newf(shipapi.CodeInvalidPath, "a name in the path is %d bytes long; at most %d are allowed", len(name), MaxNameBytes)
		}
	}
	if path.IsAbs(p) {
		c := path.Clean(p)
		for _, base := range []string{w.dir, w.realDir} {
			if c == base {
				return ".", nil
			}
			if rest, ok := strings.CutPrefix(c, base+"/"); ok {
				return rest, nil
			}
		}
		return "", w.denied()
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", w.denied()
	}
	return c, nil
}

// Abs is the absolute path reported to clients for a relative path from Rel.
func (w *Workspace) Abs(rel string) string {
	if rel == "." {
		return w.dir
	}
	return w.dir + "/" + rel
}

func (w *Workspace) denied() error {
	return apierr.Newf(shipapi.CodeAccessDenied, "Access denied: path must be within workspace %s", w.dir)
}

// Classify maps an OS error of an operation on rel onto an *apierr.Error.
// Errors already classified are returned unchanged.
func (w *Workspace) Classify(rel string, err error) error {
	if err == nil {
		return nil
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return err
	}
	shown := w.Abs(rel)
	switch {
	case isEscape(err):
		return apierr.Wrap(shipapi.CodeAccessDenied, err, w.denied().Error())
	case errors.Is(err, fs.ErrNotExist):
		return apierr.Wrap(shipapi.CodeNotFound, err, "Path not found: "+shown)
	case errors.Is(err, syscall.EISDIR):
		return apierr.Wrap(shipapi.CodeIsDirectory, err, "Path is a directory: "+shown)
	case errors.Is(err, syscall.ENOTDIR):
		return apierr.Wrap(shipapi.CodeNotDirectory, err, "Not a directory: "+shown)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return apierr.Wrap(shipapi.CodeInvalidPath, err, "Path too long: "+shown)
	case errors.Is(err, syscall.ELOOP):
		return apierr.Wrap(shipapi.CodeBadRequest, err, "Too many levels of symbolic links: "+shown)
	case errors.Is(err, fs.ErrPermission):
		return apierr.Wrap(shipapi.CodeAccessDenied, err, "Permission denied: "+shown)
	case errors.Is(err, fs.ErrExist):
		return apierr.Wrap(shipapi.CodeBadRequest, err, "Path already exists: "+shown)
	}
	return apierr.Wrap(shipapi.CodeInternal, err, "file operation failed")
}

// isEscape reports whether err is os.Root's "path escapes from parent" error.
// The sentinel is unexported, so the message is the only handle on it.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
