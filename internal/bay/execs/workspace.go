package execs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The workspace of a project, under the workspace root:
//
//	projects/<owner key>/<project_id>/inputs/             written by bay only, mounted read-only
//	projects/<owner key>/<project_id>/work/               the exec's writable working directory
//	projects/<owner key>/<project_id>/artifacts/<exec_id>  the exec's outputs, then bay's
//	                                                       stdout.txt, stderr.txt, manifest.json, meta.json
//	.bay/out/<exec_id>/                                   bay's own copy of the output while it is read
//
// Every file operation goes through an os.Root on the workspace root, so that a symbolic link an
// exec left in work/ or its artifacts cannot make bay read or write outside the workspace.

// Names bay writes in an exec's artifact directory; an exec's own files of these names are
// replaced.
const (
	StdoutFile   = "stdout.txt"
	StderrFile   = "stderr.txt"
	ManifestFile = "manifest.json"
	MetaFile     = "meta.json"
)

var bayFiles = []string{StdoutFile, StderrFile, ManifestFile, MetaFile}

// Mount points in the exec container.
const (
	MountInputs    = "/workspace/inputs"
	MountWork      = "/workspace/work"
	MountArtifacts = "/workspace/artifacts"
)

// OwnerKey is the directory of an owner's projects: a hash, so that no owner name can shape a
// path.
func OwnerKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(h[:12])
}

// The length bounds are checked apart from the patterns: a bounded repetition ({0,127})
// compiles into a copy of its class per repetition, kept in memory all of bay's life.
var projectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) // and at most 128 bytes

// ValidProjectID reports whether id is usable as a directory name (no "..", no separators).
func ValidProjectID(id string) bool {
	return len(id) <= 128 && projectRE.MatchString(id) && !strings.Contains(id, "..")
}

// ProjectDir is the project's directory relative to the workspace root.
func ProjectDir(owner, project string) string {
	return path.Join("projects", OwnerKey(owner), project)
}

// ArtifactsDir is the exec's artifact directory relative to the workspace root.
func ArtifactsDir(owner, project, execID string) string {
	return path.Join(ProjectDir(owner, project), "artifacts", execID)
}

// CleanInputPath validates an input's path, relative to inputs/, and returns it normalised:
// no absolute path, no "..", no NUL, no empty or "." path, at most 512 bytes and 32 levels.
func CleanInputPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path")
	case len(p) > 512:
		return "", errors.New("path longer than 512 bytes")
	case strings.ContainsRune(p, 0):
		return "", errors.New("path contains NUL")
	case strings.Contains(p, `\`):
		return "", errors.New(`path contains a backslash`)
	case path.IsAbs(p) || winPathRE.MatchString(p):
		return "", errors.New("path is absolute; it must be relative to inputs/")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", errors.New(`path contains ".."`)
		}
	}
	c := path.Clean(p)
	if c == "." || strings.Count(c, "/") >= 32 {
		return "", errors.New("path names no file or is nested too deep")
	}
	return c, nil
}

// Workspace is the workspace root on this host.
type Workspace struct {
	Paths WorkspacePaths
	// UID and GID own the directories the exec writes (work/, its artifact directory) when bay
	// runs as root; otherwise those directories are made writable by all.
	UID, GID int
}

func (w Workspace) open() (*os.Root, error) {
	if err := os.MkdirAll(w.Paths.Native, 0o755); err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	r, err := os.OpenRoot(w.Paths.Native)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	return r, nil
}

// mkdirOwned makes dir (and its parents) and hands it to the exec's user.
func (w Workspace) mkdirOwned(r *os.Root, dir string) error {
	if err := r.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		return r.Chown(dir, w.UID, w.GID)
	}
	if os.Geteuid() != w.UID {
		return r.Chmod(dir, 0o777)
	}
	return nil
}

// Input is one file bay writes into a project's inputs/ (Path already clean).
type Input struct {
	Path    string
	Content []byte
}

// InputsDir is the directory mounted at /workspace/inputs: the project's inputs/, or for a
// skill invocation a directory of its own (projects/<owner key>/<project>/invocations/<exec_id>),
// so that concurrent invocations in one project never read each other's inputs.json.
func InputsDir(owner, project, execID string, invocation bool) string {
	if invocation {
		return path.Join(ProjectDir(owner, project), "invocations", execID)
	}
	return path.Join(ProjectDir(owner, project), "inputs")
}

// Prepare makes the project's directories, the inputs directory and the exec's artifact
// directory, and writes the inputs into inputsDir (bay's files: owned by bay, readable by the
// exec).
func (w Workspace) Prepare(owner, project, execID, inputsDir string, inputs []Input) error {
	r, err := w.open()
	if err != nil {
		return err
	}
	defer r.Close()
	pd := ProjectDir(owner, project)
	if err := r.MkdirAll(inputsDir, 0o755); err != nil {
		return fmt.Errorf("prepare inputs/: %w", err)
	}
	if err := w.mkdirOwned(r, path.Join(pd, "work")); err != nil {
		return fmt.Errorf("prepare work/: %w", err)
	}
	if err := w.mkdirOwned(r, ArtifactsDir(owner, project, execID)); err != nil {
		return fmt.Errorf("prepare the artifact directory: %w", err)
	}
	if err := r.MkdirAll(path.Join(".bay", "out", execID), 0o700); err != nil {
		return fmt.Errorf("prepare the output directory: %w", err)
	}
	for _, in := range inputs {
		p := path.Join(inputsDir, in.Path)
		if err := r.MkdirAll(path.Dir(p), 0o755); err != nil {
			return fmt.Errorf("input %s: %w", in.Path, err)
		}
		if err := r.RemoveAll(p); err != nil {
			return fmt.Errorf("input %s: %w", in.Path, err)
		}
		if err := r.WriteFile(p, in.Content, 0o644); err != nil {
			return fmt.Errorf("input %s: %w", in.Path, err)
		}
	}
	return nil
}

// Discard removes what Prepare made for an exec that was not admitted after all (its artifact
// and output directories, an invocation's inputs; the project's inputs are the project's).
func (w Workspace) Discard(owner, project, execID string) error {
	r, err := w.open()
	if err != nil {
		return err
	}
	defer r.Close()
	return errors.Join(r.RemoveAll(ArtifactsDir(owner, project, execID)), r.RemoveAll(path.Join(".bay", "out", execID)),
		r.RemoveAll(InputsDir(owner, project, execID, true)))
}

// Holds reports whether the workspace holds the exec's artifact directory, which Prepare made
// when the exec was admitted: false when a bay whose workspace root is another directory
// admitted it.
func (w Workspace) Holds(owner, project, execID string) bool {
	r, err := w.open()
	if err != nil {
		return false
	}
	defer r.Close()
	fi, err := r.Stat(ArtifactsDir(owner, project, execID))
	return err == nil && fi.IsDir()
}

// Mounts are the exec container's three workspace bind mounts: inputsDir, the project's work/
// and the exec's artifact directory.
func (w Workspace) Mounts(owner, project, execID, inputsDir string) []bay.Mount {
	j := func(rel string) string { return joinMount(w.Paths.Mount, rel) }
	pd := ProjectDir(owner, project)
	return []bay.Mount{
		{Source: j(inputsDir), Target: MountInputs, ReadOnly: true},
		{Source: j(path.Join(pd, "work")), Target: MountWork},
		{Source: j(ArtifactsDir(owner, project, execID)), Target: MountArtifacts},
	}
}

// joinMount joins a relative slash path to a mount root in the root's own form.
func joinMount(root, rel string) string {
	if winPathRE.MatchString(root) {
		return strings.TrimRight(root, `\`) + `\` + strings.ReplaceAll(rel, "/", `\`)
	}
	return path.Join(root, rel)
}

// OutputFiles creates bay's private files for the exec's stdout and stderr.
func (w Workspace) OutputFiles(execID string) (stdout, stderr *os.File, err error) {
	r, err := w.open()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	dir := path.Join(".bay", "out", execID)
	if err := r.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	stdout, err = r.OpenFile(path.Join(dir, StdoutFile), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	stderr, err = r.OpenFile(path.Join(dir, StderrFile), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// ManifestEntry is one artifact file.
type ManifestEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest lists what the exec left in its artifact directory, what was dropped for the caps,
// and what was skipped for not being a regular file.
type Manifest struct {
	ExecID     string          `json:"exec_id"`
	Files      []ManifestEntry `json:"files"`
	TotalBytes int64           `json:"total_bytes"`
	Dropped    []ManifestEntry `json:"dropped,omitempty"`
	DropReason string          `json:"drop_reason,omitempty"`
	Skipped    []string        `json:"skipped,omitempty"`
}

// Collect finishes an exec's artifact directory once its container has stopped: bay's output
// copies replace any file of the same name; every other regular file is hashed in path order
// and kept while it fits the caps (a single file at most maxFile, all of them at most maxTotal;
// one that does not fit is deleted and listed as dropped); then manifest.json and meta.json
// (meta as given, with the manifest) are written.
func (w Workspace) Collect(owner, project, execID string, maxFile, maxTotal int64, meta func(Manifest) any) (Manifest, error) {
	m := Manifest{ExecID: execID, Files: []ManifestEntry{}}
	r, err := w.open()
	if err != nil {
		return m, err
	}
	defer r.Close()
	dir := ArtifactsDir(owner, project, execID)
	for _, f := range bayFiles {
		if err := r.RemoveAll(path.Join(dir, f)); err != nil {
			return m, fmt.Errorf("replace %s: %w", f, err)
		}
	}
	out := path.Join(".bay", "out", execID)
	for _, f := range []string{StdoutFile, StderrFile} {
		if err := r.Rename(path.Join(out, f), path.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return m, fmt.Errorf("move %s: %w", f, err)
		}
	}
	_ = r.RemoveAll(out)

	sub, err := r.OpenRoot(dir)
	if err != nil {
		return m, fmt.Errorf("open the artifact directory: %w", err)
	}
	defer sub.Close()
	var files []string
	err = fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case p == "." || d.IsDir():
			return nil
		case slices.Contains(bayFiles, p):
			return nil
		case !d.Type().IsRegular():
			m.Skipped = append(m.Skipped, p)
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return m, fmt.Errorf("walk the artifact directory: %w", err)
	}
	slices.Sort(files)
	for _, p := range files {
		e, err := hashFile(sub, p)
		if err != nil {
			return m, err
		}
		reason := ""
		switch {
		case e.Size > maxFile:
			reason = fmt.Sprintf("a file over max_output_bytes (%d)", maxFile)
		case m.TotalBytes+e.Size > maxTotal:
			reason = fmt.Sprintf("over max_artifacts_bytes_total (%d)", maxTotal)
		}
		if reason != "" {
			if err := sub.Remove(p); err != nil {
				return m, fmt.Errorf("drop %s: %w", p, err)
			}
			m.Dropped = append(m.Dropped, e)
			if m.DropReason == "" {
				m.DropReason = reason
			}
			continue
		}
		m.Files = append(m.Files, e)
		m.TotalBytes += e.Size
	}
	if err := writeJSONFile(sub, ManifestFile, m); err != nil {
		return m, err
	}
	if meta != nil {
		if err := writeJSONFile(sub, MetaFile, meta(m)); err != nil {
			return m, err
		}
	}
	return m, nil
}

func hashFile(r *os.Root, p string) (ManifestEntry, error) {
	f, err := r.Open(p)
	if err != nil {
		return ManifestEntry{}, fmt.Errorf("hash %s: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return ManifestEntry{}, fmt.Errorf("hash %s: %w", p, err)
	}
	return ManifestEntry{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func writeJSONFile(r *os.Root, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	f, err := r.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}

// ReadManifest reads an exec's manifest.json (not_found before it is written).
func (w Workspace) ReadManifest(owner, project, execID string) (Manifest, error) {
	var m Manifest
	r, err := w.open()
	if err != nil {
		return m, err
	}
	defer r.Close()
	b, err := r.ReadFile(path.Join(ArtifactsDir(owner, project, execID), ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return m, bay.Errorf(bay.CodeNotFound, "exec %s has no manifest yet", execID)
	}
	if err != nil {
		return m, fmt.Errorf("read the manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode the manifest: %w", err)
	}
	return m, nil
}

// OpenArtifact opens a regular file of an exec's artifact directory (p relative to it, clean).
func (w Workspace) OpenArtifact(owner, project, execID, p string) (*os.File, int64, error) {
	r, err := w.open()
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	sub, err := r.OpenRoot(ArtifactsDir(owner, project, execID))
	if err != nil {
		return nil, 0, bay.Errorf(bay.CodeFileNotFound, "artifact %s not found", p)
	}
	defer sub.Close()
	st, err := sub.Lstat(p)
	if err != nil || !st.Mode().IsRegular() {
		return nil, 0, bay.Errorf(bay.CodeFileNotFound, "artifact %s not found", p)
	}
	f, err := sub.Open(p)
	if err != nil {
		return nil, 0, bay.Errorf(bay.CodeFileNotFound, "artifact %s not found", p)
	}
	return f, st.Size(), nil
}

// Writable checks that bay can create and remove a file in the workspace root.
func (w Workspace) Writable() error {
	r, err := w.open()
	if err != nil {
		return err
	}
	defer r.Close()
	name := filepath.Base(fmt.Sprintf(".bay-health-%d", os.Getpid()))
	if err := r.WriteFile(name, []byte("ok"), 0o600); err != nil {
		return err
	}
	return r.Remove(name)
}

// ArtifactFile is an open artifact (the caller closes File).
type ArtifactFile struct {
	File *os.File
	Size int64
	Name string
}
