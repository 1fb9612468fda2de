package sdk

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// ---- the skill library ----

func skillPath(name string) string { return bayapi.PathSkills + "/" + esc(name) }

// ListSkills lists the skill library (GET /v1/skills): names, descriptions, kinds, versions
// and manifest summaries, the first step of progressive loading.
func (c *Client) ListSkills(ctx context.Context) (*SkillList, error) {
	var out SkillList
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathSkills}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSkill returns one skill with its SKILL.md, manifest and file list. Errors: not_found.
func (c *Client) GetSkill(ctx context.Context, name string) (*SkillDetail, error) {
	if err := checkID("skill", name); err != nil {
		return nil, err
	}
	var out SkillDetail
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: skillPath(name)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReadSkillFile streams one file of a skill's current version into w and returns the bytes
// written. Errors: not_found (skill), file_not_found.
func (c *Client) ReadSkillFile(ctx context.Context, name, filePath string, w io.Writer) (int64, error) {
	if err := checkID("skill", name); err != nil {
		return 0, err
	}
	segs := strings.Split(strings.Trim(filePath, "/"), "/")
	for i, s := range segs {
		segs[i] = esc(s)
	}
	resp, err := c.send(ctx, &request{method: http.MethodGet, path: skillPath(name) + "/files/" + strings.Join(segs, "/"), stream: true})
	if err != nil {
		return 0, err
	}
	defer resp.release()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("sdk: read skill file %s/%s: %w", name, filePath, err)
	}
	return n, nil
}

// UploadSkill uploads a skill archive (tar.gz or zip of one skill folder; PackSkill makes one)
// as the skill's new current version (admin keys only). Created is false when that exact
// content already was current. Errors: validation_error (Details["errors"] lists every
// problem with file and field), forbidden, payload_too_large. Retried like a GET: an upload
// of the same content is the same version.
func (c *Client) UploadSkill(ctx context.Context, archive []byte) (*SkillUpload, error) {
	var out SkillUpload
	if err := c.doJSON(ctx, c.archiveRequest(bayapi.PathAdminSkills, archive), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ValidateSkill runs every check of an upload without storing anything (admin keys only).
func (c *Client) ValidateSkill(ctx context.Context, archive []byte) (*SkillValidation, error) {
	var out SkillValidation
	if err := c.doJSON(ctx, c.archiveRequest(bayapi.PathAdminSkillValidate, archive), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) archiveRequest(path string, archive []byte) *request {
	ctype := "application/gzip"
	if bytes.HasPrefix(archive, []byte("PK")) {
		ctype = "application/zip"
	}
	return &request{method: http.MethodPost, path: path, contentType: ctype, contentLength: int64(len(archive)),
		body: func() (io.Reader, error) { return bytes.NewReader(archive), nil }, replayable: true,
		timeout: max(c.timeout, 2*time.Minute)}
}

// DeleteSkill removes a skill from the library (admin keys only); running sessions keep their
// version. Errors: not_found, forbidden.
func (c *Client) DeleteSkill(ctx context.Context, name string) error {
	if err := checkID("skill", name); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodDelete, path: bayapi.PathAdminSkills + "/" + esc(name)}, nil)
}

// PackSkill packs the skill folder dir as a tar.gz whose entries are <folder name>/...:
// regular files (with their executable bit) and symbolic links; other kinds are refused.
func PackSkill(dir string) ([]byte, error) {
	dir = filepath.Clean(dir)
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("sdk: pack skill: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("sdk: pack skill: %s is not a directory", dir)
	}
	base := filepath.Base(dir)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := base + "/" + filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, ModTime: time.Unix(0, 0), Mode: 0o644}
		switch m := info.Mode(); {
		case m.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, name+"/", 0o755
			return tw.WriteHeader(h)
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(h)
		case m.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if m&0o111 != 0 {
				h.Mode = 0o755
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		default:
			return fmt.Errorf("%s: %v is not a file, directory or link", p, m.Type())
		}
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("sdk: pack skill: %w", err)
	}
	return buf.Bytes(), nil
}
