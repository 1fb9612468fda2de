package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// Bounds of the artifact scan: entries walked per scan, files reported, bytes hashed.
const (
	maxScanEntries    = 50_000
	maxArtifacts      = 1000
	maxHashedBytes    = 256 << 20
	artifactsTooLarge = "the output paths hold more than 50000 entries: artifacts not tracked"
)

// fileState is what tells a file changed: size and modification time.
type fileState struct {
	size  int64
	mtime time.Time
}

// snapshot is the regular files under a job's output paths when it started.
type snapshot struct {
	paths []string // workspace-relative, normalised
	files map[string]fileState
	over  bool // more than maxScanEntries: not tracked
}

// scan walks the output paths (as the sandbox user: its permissions apply) and records their
// regular files. Unreadable directories are skipped.
func scan(ws *workspace.Workspace, paths []string) *snapshot {
	s := &snapshot{paths: paths, files: map[string]fileState{}}
	n := 0
	_ = ws.Do(func() error {
		fsys := ws.Root().FS()
		for _, p := range paths {
			err := fs.WalkDir(fsys, p, func(rel string, d fs.DirEntry, err error) error {
				if err != nil {
					return nil // unreadable: skipped
				}
				if n++; n > maxScanEntries {
					return errScanFull
				}
				if !d.Type().IsRegular() {
					return nil
				}
				if fi, err := d.Info(); err == nil {
					s.files[rel] = fileState{size: fi.Size(), mtime: fi.ModTime()}
				}
				return nil
			})
			if errors.Is(err, errScanFull) {
				s.over = true
				return nil
			}
		}
		return nil
	})
	return s
}

var errScanFull = errors.New("scan: too many entries")

// artifacts compares the output paths now with the snapshot taken at the start: files created
// or changed, with size and sha256 (a file past maxHashedBytes in all has no sha256).
func artifacts(ws *workspace.Workspace, before *snapshot) ([]shipapi.Artifact, string) {
	if before == nil {
		return nil, ""
	}
	if before.over {
		return nil, artifactsTooLarge
	}
	after := scan(ws, before.paths)
	if after.over {
		return nil, artifactsTooLarge
	}
	var out []shipapi.Artifact
	for rel, st := range after.files {
		old, existed := before.files[rel]
		if existed && old == st {
			continue
		}
		a := shipapi.Artifact{Path: rel, Size: st.size, Change: "created"}
		if existed {
			a.Change = "modified"
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b shipapi.Artifact) int {
		if a.Path < b.Path {
			return -1
		}
		return 1
	})
	note := ""
	if len(out) > maxArtifacts {
		out, note = out[:maxArtifacts], "more than 1000 files changed: the first 1000 by path are listed"
	}
	budget := int64(maxHashedBytes)
	_ = ws.Do(func() error {
		for i := range out {
			if out[i].Size > budget {
				continue
			}
			f, err := ws.Root().Open(out[i].Path)
			if err != nil {
				continue
			}
			h := sha256.New()
			n, err := io.Copy(h, io.LimitReader(f, budget))
			f.Close()
			budget -= n
			if err == nil && n == out[i].Size {
				out[i].SHA256 = hex.EncodeToString(h.Sum(nil))
			}
		}
		return nil
	})
	return out, note
}

// outputPaths normalises a job's output paths (default the workspace root).
func outputPaths(ws *workspace.Workspace, in []string) ([]string, error) {
	if len(in) == 0 {
		return []string{"."}, nil
	}
	var out []string
	for _, p := range in {
		rel, err := ws.Rel(p)
		if err != nil {
			return nil, err
		}
		out = append(out, path.Clean(rel))
	}
	return out, nil
}
