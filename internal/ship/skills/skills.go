// Package skills reads the built-in skills shipped with the runtime (folders
// with a SKILL.md whose YAML front matter has name and description) and
// installs them into <workspace>/skills/<folder>/, replacing only those
// folders: skills the user created in the workspace are never touched.
package skills

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// SkillFile is the file that makes a folder a skill.
const SkillFile = "SKILL.md"

// Skill is one built-in skill.
type Skill struct {
	Folder string // folder name under the source dir and under <workspace>/skills
	shipapi.BuiltInSkill
}

// Load lists the skills in dir, sorted by folder. A missing dir means no
// skills; folders without SKILL.md are ignored.
func Load(dir string) ([]Skill, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read skills dir %s: %w", dir, err)
	}
	var out []Skill
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name(), SkillFile)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		fm, err := frontMatter(b)
		if err != nil {
			return nil, fmt.Errorf("skill %s: %w", p, err)
		}
		name := fm.Name
		if name == "" {
			name = e.Name()
		}
		out = append(out, Skill{Folder: e.Name(), BuiltInSkill: shipapi.BuiltInSkill{Name: name, Description: fm.Description, Path: p}})
	}
	slices.SortFunc(out, func(a, b Skill) int {
		if a.Folder < b.Folder {
			return -1
		}
		if a.Folder > b.Folder {
			return 1
		}
		return 0
	})
	return out, nil
}

type meta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// frontMatter parses the YAML between a leading "---" line and the next one.
// A file without front matter has empty metadata.
func frontMatter(b []byte) (meta, error) {
	var m meta
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() || string(bytes.TrimSpace(sc.Bytes())) != "---" {
		return m, nil
	}
	var y bytes.Buffer
	closed := false
	for sc.Scan() {
		line := sc.Bytes()
		if string(bytes.TrimSpace(line)) == "---" {
			closed = true
			break
		}
		y.Write(line)
		y.WriteByte('\n')
	}
	if !closed {
		return m, errors.New("unterminated front matter")
	}
	if err := yaml.Unmarshal(y.Bytes(), &m); err != nil {
		return m, fmt.Errorf("front matter: %w", err)
	}
	return m, nil
}

// Install copies each skill from srcDir into skills/<folder> of the workspace
// root: a fresh copy is built in a temporary folder, the old folder is moved
// aside, the copy renamed into place and the old one removed.
func Install(root *os.Root, srcDir string, list []Skill) error {
	if len(list) == 0 {
		return nil
	}
	if err := root.MkdirAll("skills", 0o755); err != nil {
		return fmt.Errorf("create skills dir: %w", err)
	}
	var errs []error
	for _, s := range list {
		if err := installOne(root, filepath.Join(srcDir, s.Folder), s.Folder); err != nil {
			errs = append(errs, fmt.Errorf("install skill %s: %w", s.Folder, err))
		}
	}
	return errors.Join(errs...)
}

func installOne(root *os.Root, src, folder string) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])
	tmp := path.Join("skills", ".tmp-"+folder+"-"+suffix)
	old := path.Join("skills", ".old-"+folder+"-"+suffix)
	dst := path.Join("skills", folder)
	if err := copyTree(root, src, tmp); err != nil {
		root.RemoveAll(tmp)
		return err
	}
	moved := false
	if _, err := root.Lstat(dst); err == nil {
		if err := root.Rename(dst, old); err != nil {
			root.RemoveAll(tmp)
			return fmt.Errorf("move old copy aside: %w", err)
		}
		moved = true
	}
	if err := root.Rename(tmp, dst); err != nil {
		if moved {
			_ = root.Rename(old, dst)
		}
		root.RemoveAll(tmp)
		return fmt.Errorf("rename into place: %w", err)
	}
	if moved {
		if err := root.RemoveAll(old); err != nil {
			return fmt.Errorf("remove old copy: %w", err)
		}
	}
	return nil
}

// copyTree copies the regular files and directories under src (symlinks
// and special files are skipped) to dst inside root.
func copyTree(root *os.Root, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return root.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(root, p, target)
		}
		return nil
	})
}

func copyFile(root *os.Root, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := root.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm()|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
