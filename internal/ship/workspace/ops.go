package workspace

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

// MaxTextBytes bounds what edit_file loads into memory and is the default
// bound of a text read (which streams); larger files must go through download.
const MaxTextBytes = 64 << 20

const dirPerm = 0o755

// CreateFile writes content to p (parents created), replacing any file there,
// and sets its permission bits to mode.
func (w *Workspace) CreateFile(p, content string, mode fs.FileMode) (abs string, err error) {
	return as(w, func() (string, error) { return w.createFile(p, content, mode) })
}

func (w *Workspace) createFile(p, content string, mode fs.FileMode) (abs string, err error) {
	rel, err := w.Rel(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", apierr.New(shipapi.CodeIsDirectory, "Path is a directory: "+w.dir)
	}
	if err := w.mkParents(rel); err != nil {
		return "", err
	}
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return "", w.Classify(rel, err)
	}
	_, werr := f.WriteString(content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return "", w.Classify(rel, err)
	}
	// OpenFile's mode is filtered by the umask and ignored for existing files.
	if err := w.root.Chmod(rel, mode); err != nil {
		return "", w.Classify(rel, err)
	}
	return w.Abs(rel), nil
}

// WriteFile writes (appending if appendMode) content to p, creating parents,
// and returns the absolute path and the resulting file size.
func (w *Workspace) WriteFile(p, content string, appendMode bool) (abs string, size int64, err error) {
	err = w.Do(func() error {
		abs, size, err = w.writeFile(p, content, appendMode)
		return err
	})
	return abs, size, err
}

func (w *Workspace) writeFile(p, content string, appendMode bool) (abs string, size int64, err error) {
	rel, err := w.Rel(p)
	if err != nil {
		return "", 0, err
	}
	if rel == "." {
		return "", 0, apierr.New(shipapi.CodeIsDirectory, "Path is a directory: "+w.dir)
	}
	if err := w.mkParents(rel); err != nil {
		return "", 0, err
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendMode {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := w.root.OpenFile(rel, flag, 0o644)
	if err != nil {
		return "", 0, w.Classify(rel, err)
	}
	_, werr := f.WriteString(content)
	fi, serr := f.Stat()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return "", 0, w.Classify(rel, err)
	}
	return w.Abs(rel), fi.Size(), nil
}

// EditFile replaces old with new in p: exactly one occurrence, or all of them
// when all is set. It returns the number of replacements and the new size.
func (w *Workspace) EditFile(p, old, new string, all bool) (abs string, n int, size int64, err error) {
	rel, err := w.Rel(p)
	if err != nil {
		return "", 0, 0, err
	}
	err = w.Do(func() error {
		abs, n, size, err = w.editFile(rel, old, new, all)
		return err
	})
	return abs, n, size, err
}

func (w *Workspace) editFile(rel, old, new string, all bool) (abs string, n int, size int64, err error) {
	if old == "" {
		return "", 0, 0, apierr.New(shipapi.CodeBadRequest, "old_string must not be empty")
	}
	if old == new {
		return "", 0, 0, apierr.New(shipapi.CodeBadRequest, "old_string and new_string are identical")
	}
	f, fi, err := w.openRegular(rel)
	if err != nil {
		return "", 0, 0, err
	}
	if fi.Size() > MaxTextBytes {
		f.Close()
		return "", 0, 0, apierr.Newf(shipapi.CodeTooLarge, "file is larger than %d bytes", MaxTextBytes)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", 0, 0, w.Classify(rel, err)
	}
	if !utf8.Valid(data) {
		return "", 0, 0, apierr.New(shipapi.CodeInvalidUTF8, "File is not valid UTF-8 text: "+w.Abs(rel))
	}
	n = bytes.Count(data, []byte(old))
	switch {
	case n == 0:
		return "", 0, 0, apierr.New(shipapi.CodeBadRequest, "old_string not found in "+w.Abs(rel))
	case n > 1 && !all:
		return "", 0, 0, apierr.Newf(shipapi.CodeConflict, "old_string occurs %d times in %s; make it unique or set replace_all", n, w.Abs(rel))
	}
	if !all {
		n = 1
	}
	out := bytes.Replace(data, []byte(old), []byte(new), n)
	data = nil
	wf, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return "", 0, 0, w.Classify(rel, err)
	}
	_, werr := wf.Write(out)
	cerr := wf.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return "", 0, 0, w.Classify(rel, err)
	}
	return w.Abs(rel), n, int64(len(out)), nil
}

// Delete removes a file, a symlink (not its target) or a directory tree.
// The workspace root itself is refused.
func (w *Workspace) Delete(p string) (abs string, err error) {
	return as(w, func() (string, error) { return w.delete(p) })
}

func (w *Workspace) delete(p string) (abs string, err error) {
	rel, err := w.Rel(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", apierr.New(shipapi.CodeBadRequest, "Refusing to delete the workspace root")
	}
	fi, err := w.root.Lstat(rel)
	if err != nil {
		return "", w.Classify(rel, err)
	}
	if fi.IsDir() {
		err = w.root.RemoveAll(rel)
	} else {
		err = w.root.Remove(rel)
	}
	if err != nil {
		return "", w.Classify(rel, err)
	}
	return w.Abs(rel), nil
}

// List lists directory p: directories first, then by case-insensitive name.
func (w *Workspace) List(p string, showHidden bool) (files []shipapi.FileInfo, abs string, err error) {
	err = w.Do(func() error {
		files, abs, err = w.list(p, showHidden)
		return err
	})
	return files, abs, err
}

func (w *Workspace) list(p string, showHidden bool) (files []shipapi.FileInfo, abs string, err error) {
	if p == "" {
		p = "."
	}
	rel, err := w.Rel(p)
	if err != nil {
		return nil, "", err
	}
	d, err := w.root.Open(rel)
	if err != nil {
		return nil, "", w.Classify(rel, err)
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return nil, "", w.Classify(rel, err)
	}
	if !fi.IsDir() {
		return nil, "", apierr.New(shipapi.CodeNotDirectory, "Not a directory: "+w.Abs(rel))
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, "", w.Classify(rel, err)
	}
	files = make([]shipapi.FileInfo, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		if !showHidden && strings.HasPrefix(name, ".") {
			continue
		}
		child := path.Join(rel, name)
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			// Describe what the link points to when that is inside the workspace.
			if t, err := w.root.Stat(child); err == nil {
				info = t
			}
		}
		fe := shipapi.FileInfo{
			Name:         name,
			Path:         w.Abs(child),
			IsFile:       info.Mode().IsRegular(),
			IsDir:        info.IsDir(),
			ModifiedTime: float64(info.ModTime().UnixNano()) / 1e9,
		}
		if !fe.IsDir {
			s := info.Size()
			fe.Size = &s
		}
		files = append(files, fe)
	}
	slices.SortFunc(files, func(a, b shipapi.FileInfo) int {
		if a.IsDir != b.IsDir {
			if a.IsDir {
				return -1
			}
			return 1
		}
		if c := strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return files, w.Abs(rel), nil
}

// OpenForDownload opens p, which must be a regular file.
func (w *Workspace) OpenForDownload(p string) (*os.File, fs.FileInfo, string, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return nil, nil, "", err
	}
	var fi fs.FileInfo
	f, err := as(w, func() (f *os.File, err error) {
		f, fi, err = w.openRegular(rel)
		return f, err
	})
	if err != nil {
		return nil, nil, "", err
	}
	return f, fi, w.Abs(rel), nil
}

// Upload is an upload in progress: a temporary file next to its target,
// renamed into place by Commit or removed by Abort.
type Upload struct {
	w    *Workspace
	rel  string
	tmp  string
	File *os.File
}

// BeginUpload validates the target p, creates its parents and opens a
// temporary file in the target directory.
func (w *Workspace) BeginUpload(p string) (*Upload, error) {
	return as(w, func() (*Upload, error) { return w.beginUpload(p) })
}

func (w *Workspace) beginUpload(p string) (*Upload, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, apierr.New(shipapi.CodeIsDirectory, "Path is a directory: "+w.dir)
	}
	if fi, err := w.root.Stat(rel); err == nil && fi.IsDir() {
		return nil, apierr.New(shipapi.CodeIsDirectory, "Path is a directory: "+w.Abs(rel))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, w.Classify(rel, err)
	}
	if err := w.mkParents(rel); err != nil {
		return nil, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rel), ".ship-upload-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, w.Classify(rel, err)
	}
	return &Upload{w: w, rel: rel, tmp: tmp, File: f}, nil
}

// Commit closes the temporary file and renames it onto the target.
func (u *Upload) Commit() (abs string, err error) {
	return as(u.w, u.commit)
}

func (u *Upload) commit() (abs string, err error) {
	if err := u.File.Close(); err != nil {
		u.w.root.Remove(u.tmp)
		return "", u.w.Classify(u.rel, err)
	}
	if err := u.w.root.Rename(u.tmp, u.rel); err != nil {
		u.w.root.Remove(u.tmp)
		return "", u.w.Classify(u.rel, err)
	}
	return u.w.Abs(u.rel), nil
}

// Abort discards the upload.
func (u *Upload) Abort() {
	u.File.Close()
	_ = u.w.Do(func() error { return u.w.root.Remove(u.tmp) })
}

func (w *Workspace) openRegular(rel string) (*os.File, fs.FileInfo, error) {
	// Stat before opening: opening a FIFO for reading would block.
	if fi, err := w.root.Stat(rel); err != nil {
		return nil, nil, w.Classify(rel, err)
	} else if fi.IsDir() {
		return nil, nil, apierr.New(shipapi.CodeIsDirectory, "Path is a directory, not a file: "+w.Abs(rel))
	} else if !fi.Mode().IsRegular() {
		return nil, nil, apierr.New(shipapi.CodeBadRequest, "Not a regular file: "+w.Abs(rel))
	}
	f, err := w.root.Open(rel)
	if err != nil {
		return nil, nil, w.Classify(rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, w.Classify(rel, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, apierr.New(shipapi.CodeIsDirectory, "Path is a directory, not a file: "+w.Abs(rel))
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, apierr.New(shipapi.CodeBadRequest, "Not a regular file: "+w.Abs(rel))
	}
	return f, fi, nil
}

func (w *Workspace) mkParents(rel string) error {
	dir := path.Dir(rel)
	if dir == "." {
		return nil
	}
	if err := w.root.MkdirAll(dir, dirPerm); err != nil {
		return w.Classify(dir, err)
	}
	return nil
}
