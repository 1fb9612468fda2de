// Package skills is bay's skill library: admin-managed skill folders (a SKILL.md with YAML
// front matter name and description, optional scripts/, templates/, references/, assets/,
// and for an invocable skill a manifest.json), each upload stored as an immutable version
// named by its content hash. Archives are unpacked in memory under limits (archive.go),
// validated (validate.go, manifest.go) and written once to <dir>/versions/<version>/, which
// sessions mount read-only at /skills/<name>; the store keeps the versions' descriptions, which
// version of each name is current, and each version's normalised archive, from which a bay
// whose directory lacks a version materialises it (shared.go).
package skills

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Config configures a Library.
type Config struct {
	// Dir holds the versions' files (<Dir>/versions/<version>/) and the sandboxes' index
	// files (<Dir>/index/). Sessions bind-mount from it, so it must be a path on the
	// engine's host.
	Dir    string
	Limits Limits
	Clock  bay.Clock
}

// Library is the skill library. It is safe for concurrent use; uploads are serialised (each
// holds its unpacked archive in memory).
type Library struct {
	store bay.Store
	dir   string
	lim   Limits
	clock bay.Clock
	log   *slog.Logger

	uploadMu sync.Mutex

	flightMu sync.Mutex
	flights  map[string]*flight // materialisations in progress, by version
	slots    chan struct{}      // bounds the materialisations running at once
}

// New opens the library in cfg.Dir, creating it, and removes what an interrupted upload left.
func New(store bay.Store, cfg Config, log *slog.Logger) (*Library, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("skills: dir %q must be an absolute path", cfg.Dir)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = bay.SystemClock{}
	}
	l := &Library{store: store, dir: cfg.Dir, lim: cfg.Limits.withDefaults(), clock: cfg.Clock, log: log.With("component", "skills"),
		flights: map[string]*flight{}, slots: make(chan struct{}, materialiseSlots)}
	if err := os.RemoveAll(filepath.Join(l.dir, "tmp")); err != nil {
		return nil, fmt.Errorf("skills: clean %s: %w", l.dir, err)
	}
	for _, d := range []string{"versions", "index", "tmp"} {
		if err := os.MkdirAll(filepath.Join(l.dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("skills: create %s: %w", l.dir, err)
		}
	}
	return l, nil
}

// Limits returns the limits uploads are held to.
func (l *Library) Limits() Limits { return l.lim }

// VersionDir is where a version's files are.
func (l *Library) VersionDir(version string) string { return filepath.Join(l.dir, "versions", version) }

// checked is an unpacked and validated skill.
type checked struct {
	tree *Tree
	res  *Result
	v    *bay.SkillCheck
}

// check unpacks and validates an archive.
func (l *Library) check(data []byte) *checked {
	return checkTree(ReadArchive(data, l.lim))
}

func checkTree(tree *Tree, problems []bay.SkillProblem) *checked {
	v := &bay.SkillCheck{Errors: problems, Warnings: []bay.SkillProblem{}}
	c := &checked{tree: tree, v: v}
	if tree != nil {
		res := Validate(tree)
		c.res = res
		v.Name, v.Kind, v.Version = res.Name, res.Kind, tree.Version()
		v.Errors = append(v.Errors, res.Errors...)
		v.Warnings = append(v.Warnings, res.Warnings...)
	}
	if v.Errors == nil {
		v.Errors = []bay.SkillProblem{}
	}
	v.Valid = len(v.Errors) == 0
	return c
}

// Validate runs every check of an upload without storing anything.
func (l *Library) Validate(_ context.Context, data []byte) *bay.SkillCheck {
	return l.check(data).v
}

// Uploaded is the result of an upload.
type Uploaded struct {
	Skill    *bay.Skill
	Created  bool // false: this exact version already was current
	Warnings []bay.SkillProblem
}

// Upload validates an archive and makes it the current version of its skill. An invalid
// archive is validation_error with details {errors, warnings} listing every problem.
func (l *Library) Upload(ctx context.Context, data []byte, uploadedBy string) (*Uploaded, error) {
	l.uploadMu.Lock()
	defer l.uploadMu.Unlock()
	return l.put(ctx, l.check(data), uploadedBy)
}

func (l *Library) put(ctx context.Context, c *checked, uploadedBy string) (*Uploaded, error) {
	v := c.v
	if !v.Valid {
		return nil, bay.Errorf(bay.CodeValidation, "The skill is invalid: %d problem(s), listed in details.errors", len(v.Errors)).
			WithDetails(map[string]any{"errors": v.Errors, "warnings": v.Warnings})
	}
	sk := l.skillOf(c, uploadedBy)
	archive, err := l.archiveOf(c.tree, sk.Version)
	if err != nil {
		return nil, err
	}
	if err := l.materialise(c.tree, sk.Version); err != nil {
		return nil, err
	}
	// The archive goes in with the version (kept when stored already), so that no bay ever
	// sees a version it cannot materialise; a version stored before archives were gets one.
	var created bool
	err = l.store.Tx(ctx, func(tx bay.Tx) (err error) {
		if created, err = tx.PutSkill(ctx, sk, l.clock.Now()); err != nil {
			return err
		}
		return tx.PutSkillArchive(ctx, archive)
	})
	if bay.IsConflict(err) {
		return nil, bay.Errorf(bay.CodeConflict, "Another skill's name differs from %q only in case", sk.Name).WithCause(err)
	}
	if err != nil {
		return nil, fmt.Errorf("store skill %s: %w", sk.Name, err)
	}
	if !created { // already current: report the stored row (its time and uploader)
		if cur, err := l.store.GetSkill(ctx, sk.Name); err == nil {
			sk = cur
		}
	}
	l.log.InfoContext(ctx, "skill stored", "name", sk.Name, "version", sk.Version, "kind", sk.Kind, "created", created, "by", uploadedBy)
	return &Uploaded{Skill: sk, Created: created, Warnings: v.Warnings}, nil
}

func (l *Library) skillOf(c *checked, uploadedBy string) *bay.Skill {
	tree, res := c.tree, c.res
	sk := &bay.Skill{Name: res.Name, Version: c.v.Version, Description: res.Description, Kind: res.Kind, Manifest: res.Manifest,
		SizeBytes: tree.Size(), UploadedBy: uploadedBy, CreatedAt: l.clock.Now()}
	for _, p := range tree.Paths() {
		e := tree.Entries[p]
		f := bay.SkillFile{Path: p, Size: int64(len(e.Data)), Executable: e.Executable, Link: e.Link}
		if e.Link == "" {
			sum := sha256.Sum256(e.Data)
			f.SHA256 = hex.EncodeToString(sum[:])
		} else {
			f.Size = 0
		}
		sk.Files = append(sk.Files, f)
	}
	return sk
}

// materialise writes a version's files once: into a temporary directory, then renamed into
// place, so a version directory is always complete. Files are 0644 (0755 when executable),
// directories 0755: uid 1000 in the sandbox reads them; the mount makes them read-only.
func (l *Library) materialise(tree *Tree, version string) error {
	final := l.VersionDir(version)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(l.dir, "tmp"), "upload-")
	if err != nil {
		return fmt.Errorf("skills: stage version: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("skills: stage version: %w", err)
	}
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return fmt.Errorf("skills: stage version: %w", err)
	}
	defer root.Close()
	for _, p := range tree.Paths() {
		e := tree.Entries[p]
		if dir := path.Dir(p); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("skills: write %s: %w", p, err)
			}
		}
		if e.Link != "" {
			if err := root.Symlink(e.Link, p); err != nil {
				return fmt.Errorf("skills: write %s: %w", p, err)
			}
			continue
		}
		mode := fs.FileMode(0o644)
		if e.Executable {
			mode = 0o755
		}
		if err := root.WriteFile(p, e.Data, mode); err != nil {
			return fmt.Errorf("skills: write %s: %w", p, err)
		}
		if err := root.Chmod(p, mode); err != nil { // past the umask
			return fmt.Errorf("skills: write %s: %w", p, err)
		}
	}
	// Directories made by MkdirAll honour the umask; make them traversable by the sandbox.
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o755)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("skills: stage version: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // written meanwhile by another bay sharing the directory
		}
		return fmt.Errorf("skills: store version %s: %w", version, err)
	}
	return nil
}

// LoadDir stores every skill folder of dir (names starting with "_" or "." are skipped) as the
// current version of its skill, as an upload by uploadedBy would; unchanged skills stay as
// they are. Any invalid skill fails the whole load with its problems.
func (l *Library) LoadDir(ctx context.Context, dir, uploadedBy string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("skills: read %s: %w", dir, err)
	}
	var loaded []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "_") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		c := checkTree(ReadDir(filepath.Join(dir, e.Name()), l.lim))
		if !c.v.Valid {
			return loaded, fmt.Errorf("skills: %s is invalid: %s", filepath.Join(dir, e.Name()), problemsText(c.v.Errors))
		}
		l.uploadMu.Lock()
		_, err := l.put(ctx, c, uploadedBy)
		l.uploadMu.Unlock()
		if err != nil {
			return loaded, fmt.Errorf("skills: load %s: %w", e.Name(), err)
		}
		loaded = append(loaded, c.v.Name)
	}
	return loaded, nil
}

func problemsText(ps []bay.SkillProblem) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.File)
		if p.Field != "" {
			b.WriteString(" " + p.Field)
		}
		b.WriteString(": " + p.Message)
	}
	return b.String()
}

// Delete removes a skill from the library. Sessions that mount it keep their version.
func (l *Library) Delete(ctx context.Context, name string) error {
	err := l.store.Tx(ctx, func(tx bay.Tx) error { return tx.DeleteSkill(ctx, name) })
	if bay.IsNotFound(err) {
		return errNoSkill(name)
	}
	if err != nil {
		return fmt.Errorf("delete skill %s: %w", name, err)
	}
	l.log.InfoContext(ctx, "skill deleted", "name", name)
	return nil
}

func errNoSkill(name string) error {
	return bay.Errorf(bay.CodeNotFound, "Skill %q not found", name)
}

// List returns the current version of every skill, by name.
func (l *Library) List(ctx context.Context) ([]*bay.Skill, error) {
	sks, err := l.store.ListSkills(ctx)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	return sks, nil
}

// Get returns the current version of name; missing is not_found.
func (l *Library) Get(ctx context.Context, name string) (*bay.Skill, error) {
	if !ValidName(name) {
		return nil, errNoSkill(name)
	}
	sk, err := l.store.GetSkill(ctx, name)
	if bay.IsNotFound(err) {
		return nil, errNoSkill(name)
	}
	if err != nil {
		return nil, fmt.Errorf("get skill %s: %w", name, err)
	}
	return sk, nil
}

// Detail returns the current version of name and its SKILL.md.
func (l *Library) Detail(ctx context.Context, name string) (*bay.Skill, []byte, error) {
	sk, err := l.Get(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	dir, err := l.Dir(ctx, sk.Version)
	if err != nil {
		return nil, nil, err
	}
	md, err := os.ReadFile(filepath.Join(dir, SkillFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s of skill %s@%s: %w", SkillFile, sk.Name, sk.Version, err)
	}
	return sk, md, nil
}

// OpenFile opens one file of a skill's current version. A path that is not a file of the
// skill is file_not_found. Links are followed inside the version directory only.
func (l *Library) OpenFile(ctx context.Context, name, p string) (*os.File, *bay.Skill, error) {
	sk, err := l.Get(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if !slices.ContainsFunc(sk.Files, func(f bay.SkillFile) bool { return f.Path == p }) {
		return nil, nil, bay.Errorf(bay.CodeFileNotFound, "Skill %q has no file %q", name, p)
	}
	dir, err := l.Dir(ctx, sk.Version)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open skill %s@%s: %w", sk.Name, sk.Version, err)
	}
	defer root.Close()
	f, err := root.Open(p)
	if err != nil {
		return nil, nil, fmt.Errorf("open skill file %s/%s: %w", sk.Name, p, err)
	}
	return f, sk, nil
}

// ---- mounting -------------------------------------------------------------------------------

// Mounts resolves skill names to their current versions for a session that starts now: one
// read-only mount per skill at /skills/<name>, and /skills/INDEX.md listing them. A name the
// library no longer has is skipped and logged (it was deleted after the sandbox was created,
// or a profile names a skill not uploaded yet). Duplicates are mounted once.
func (l *Library) Mounts(ctx context.Context, names []string) ([]bay.Mount, []bay.MountedSkill, error) {
	var mounts []bay.Mount
	var mounted []bay.MountedSkill
	var sks []*bay.Skill
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		sk, err := l.Get(ctx, n)
		if bay.IsNotFound(err) {
			l.log.WarnContext(ctx, "skill to mount is not in the library; skipped", "name", n)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		dir, err := l.Dir(ctx, sk.Version)
		if err != nil {
			return nil, nil, fmt.Errorf("skill %s: %w", sk.Name, err)
		}
		target := bay.SkillsMountRoot + "/" + sk.Name
		mounts = append(mounts, bay.Mount{Source: dir, Target: target, ReadOnly: true, Snapshot: true})
		mounted = append(mounted, bay.MountedSkill{Name: sk.Name, Version: sk.Version, Path: target})
		sks = append(sks, sk)
	}
	if len(sks) == 0 {
		return nil, nil, nil
	}
	index, err := l.writeIndex(sks)
	if err != nil {
		return nil, nil, err
	}
	mounts = append(mounts, bay.Mount{Source: index, Target: bay.SkillsIndexFile, ReadOnly: true, Snapshot: true})
	return mounts, mounted, nil
}

// CheckNames returns a validation_error naming every skill the library does not have.
func (l *Library) CheckNames(ctx context.Context, names []string) error {
	var missing []string
	for _, n := range names {
		if _, err := l.Get(ctx, n); bay.IsNotFound(err) {
			missing = append(missing, n)
		} else if err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return bay.Errorf(bay.CodeValidation, "Unknown skill(s): %s", strings.Join(missing, ", ")).
			WithDetails(map[string]any{"field": "skills", "unknown": missing})
	}
	return nil
}

// writeIndex writes the Markdown index of a session's skills, named by its content so that
// sessions with the same skills share one file and it is never rewritten while mounted.
func (l *Library) writeIndex(sks []*bay.Skill) (string, error) {
	var b bytes.Buffer
	b.WriteString("# Skills\n\nRead-only skill folders mounted in this sandbox. Read a skill's SKILL.md before using it;\nwrite outputs to the workspace, never under /skills.\n\n")
	b.WriteString("| name | kind | version | description |\n|---|---|---|---|\n")
	for _, sk := range sks {
		desc := strings.ReplaceAll(strings.ReplaceAll(sk.Description, "|", `\|`), "\n", " ")
		fmt.Fprintf(&b, "| [%s](%s/%s) | %s | %s | %s |\n", sk.Name, sk.Name, SkillFile, sk.Kind, sk.Version[:12], desc)
	}
	sum := sha256.Sum256(b.Bytes())
	p := filepath.Join(l.dir, "index", hex.EncodeToString(sum[:])+".md")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	f, err := os.CreateTemp(filepath.Join(l.dir, "tmp"), "index-")
	if err != nil {
		return "", fmt.Errorf("skills: write index: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b.Bytes())
	err = errors.Join(err, f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		return "", fmt.Errorf("skills: write index: %w", err)
	}
	return p, nil
}
