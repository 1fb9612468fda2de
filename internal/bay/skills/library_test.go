package skills

import (
	"archive/tar"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

func newLibrary(t *testing.T) (*Library, bay.Store) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: sqlite.MemoryPath, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l, err := New(st, Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, st
}

// dirArchive packs a host skill folder as <folder>/... in a tar.gz.
func dirArchive(t *testing.T, dir string) []byte {
	t.Helper()
	var ents []ent
	base := filepath.Base(dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		info, _ := d.Info()
		ents = append(ents, ent{name: base + "/" + filepath.ToSlash(rel), body: string(b), mode: int64(info.Mode().Perm())})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tarGz(t, ents...)
}

func TestUploadVersionsAndFiles(t *testing.T) {
	ctx := t.Context()
	l, _ := newLibrary(t)
	data := dirArchive(t, filepath.Join(bundledskills.Dir(), "csv-report"))
	r1, err := l.Upload(ctx, data, "default")
	if err != nil {
		t.Fatal(err)
	}
	s := r1.Skill
	if !r1.Created || s.Name != "csv-report" || s.Kind != bay.SkillKnowledge || !s.HasDir("scripts") || !s.HasDir("templates") || s.HasDir("references") ||
		len(s.Version) != 64 || s.UploadedBy != "default" || len(s.Files) != 3 || s.Files[0].Path != "SKILL.md" || len(s.Files[0].SHA256) != 64 {
		t.Fatalf("upload %+v", r1)
	}
	// The same content again is the same version, not a new one.
	r2, err := l.Upload(ctx, data, "other")
	if err != nil || r2.Created || r2.Skill.Version != s.Version || r2.Skill.UploadedBy != "default" {
		t.Fatalf("re-upload %+v %v", r2, err)
	}
	// Files on disk: readable by anyone, the script executable, nothing writable but by bay.
	vdir := l.VersionDir(s.Version)
	err = filepath.WalkDir(vdir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		want := fs.FileMode(0o644)
		if d.IsDir() || strings.HasSuffix(p, ".py") {
			want = 0o755
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	d, md, err := l.Detail(ctx, "csv-report")
	if err != nil || !strings.Contains(string(md), "name: csv-report") || len(d.Files) != 3 || d.Manifest != nil {
		t.Fatalf("detail %+v %v", d, err)
	}
	f, _, err := l.OpenFile(ctx, "csv-report", "templates/report.md")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if !strings.Contains(string(b), "# Report: {title}") {
		t.Fatalf("file %q", b)
	}
	for _, p := range []string{"templates", "../csv-report/SKILL.md", "nope", "/etc/passwd"} {
		if _, _, err := l.OpenFile(ctx, "csv-report", p); bay.ErrorCode(err) != bay.CodeFileNotFound {
			t.Errorf("open %q: %v", p, err)
		}
	}
	if _, _, err := l.OpenFile(ctx, "nope", "SKILL.md"); !bay.IsNotFound(err) {
		t.Errorf("open in missing skill: %v", err)
	}

	// A new upload makes a new version; the old one's files stay for running sessions.
	changed := tarGz(t, ent{name: "csv-report/SKILL.md", body: "---\nname: csv-report\ndescription: v2\n---\n"})
	r3, err := l.Upload(ctx, changed, "default")
	if err != nil || !r3.Created || r3.Skill.Version == s.Version || r3.Skill.Description != "v2" {
		t.Fatalf("v2 %+v %v", r3, err)
	}
	if _, err := os.Stat(filepath.Join(vdir, "SKILL.md")); err != nil {
		t.Fatalf("old version removed: %v", err)
	}
	list, err := l.List(ctx)
	if err != nil || len(list) != 1 || list[0].Version != r3.Skill.Version {
		t.Fatalf("list %+v %v", list, err)
	}

	if err := l.Delete(ctx, "csv-report"); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete(ctx, "csv-report"); !bay.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
	if _, _, err := l.Detail(ctx, "csv-report"); !bay.IsNotFound(err) {
		t.Fatalf("deleted detail: %v", err)
	}
}

func TestUploadLinkServedInsideVersion(t *testing.T) {
	l, _ := newLibrary(t)
	r, err := l.Upload(t.Context(), tarGz(t, ent{name: "SKILL.md", body: goodMD}, ent{name: "references/readme.md", typ: tar.TypeSymlink, link: "../SKILL.md"}), "default")
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := l.OpenFile(t.Context(), r.Skill.Name, "references/readme.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); string(b) != goodMD {
		t.Fatalf("link content %q", b)
	}
}

func TestUploadInvalidListsEveryProblem(t *testing.T) {
	l, st := newLibrary(t)
	_, err := l.Upload(t.Context(), tarGz(t, ent{name: "x/SKILL.md", body: "---\nname: y\ndescription: " + strings.Repeat("a", 1025) + "\n---\n"},
		ent{name: "x/scripts/a.sh", body: "sudo x"}), "default")
	var be *bay.Error
	if !asErr(err, &be) || be.Code != bay.CodeValidation {
		t.Fatalf("err %v", err)
	}
	errs := be.Details["errors"].([]bayapiProblem)
	if len(errs) != 2 || len(be.Details["warnings"].([]bayapiProblem)) != 1 {
		t.Fatalf("details %+v", be.Details)
	}
	if list, _ := st.ListSkills(t.Context()); len(list) != 0 {
		t.Fatal("an invalid skill was stored")
	}
	if v := l.Validate(t.Context(), tarGz(t, ent{name: "SKILL.md", body: goodMD})); !v.Valid || v.Name != "demo" || len(v.Version) != 64 {
		t.Fatalf("validate %+v", v)
	}
	if list, _ := st.ListSkills(t.Context()); len(list) != 0 {
		t.Fatal("validate stored the skill")
	}
}

func TestLoadDirAndMounts(t *testing.T) {
	ctx := t.Context()
	l, _ := newLibrary(t)
	loaded, err := l.LoadDir(ctx, bundledskills.Dir(), "seed")
	if err != nil || strings.Join(loaded, ",") != "csv-report,python.run,shell.run" {
		t.Fatalf("loaded %v %v", loaded, err)
	}
	if again, err := l.LoadDir(ctx, bundledskills.Dir(), "seed"); err != nil || len(again) != 3 {
		t.Fatalf("reload %v %v", again, err)
	}
	sh, _ := l.Get(ctx, "shell.run")
	if m, err := ManifestFields(sh.Manifest); err != nil || m["id"] != "shell.run" || sh.Kind != bay.SkillInvocable {
		t.Fatalf("manifest %v %v", m, err)
	}
	mounts, mounted, err := l.Mounts(ctx, []string{"shell.run", "csv-report", "gone", "shell.run"})
	if err != nil || len(mounts) != 3 || len(mounted) != 2 {
		t.Fatalf("mounts %+v %+v %v", mounts, mounted, err)
	}
	if mounts[0].Target != "/skills/shell.run" || mounts[0].Source != l.VersionDir(sh.Version) || !mounts[0].ReadOnly {
		t.Fatalf("mount %+v", mounts[0])
	}
	index, err := os.ReadFile(mounts[2].Source)
	if err != nil || mounts[2].Target != "/skills/INDEX.md" || !strings.Contains(string(index), "[csv-report](csv-report/SKILL.md) | knowledge") {
		t.Fatalf("index %q %v", index, err)
	}
	// Files missing on this bay (stored by another bay with its own dir): materialised from
	// the database's archive into this bay's dir.
	other, err := New(l.store, Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if om, _, err := other.Mounts(ctx, []string{"shell.run"}); err != nil || om[0].Source != other.VersionDir(sh.Version) {
		t.Fatalf("mount on a bay without the files: %v %v", om, err)
	}
	if err := l.CheckNames(ctx, []string{"shell.run", "nope", "Shell.run"}); bay.ErrorCode(err) != bay.CodeValidation ||
		!strings.Contains(err.Error(), "nope, Shell.run") {
		t.Fatalf("check names: %v", err)
	}
	bad := t.TempDir()
	os.MkdirAll(filepath.Join(bad, "broken"), 0o755)
	os.WriteFile(filepath.Join(bad, "broken", "SKILL.md"), []byte("no front matter"), 0o644)
	if _, err := l.LoadDir(ctx, bad, "seed"); err == nil || !strings.Contains(err.Error(), "front matter") {
		t.Fatalf("broken seed: %v", err)
	}
}
