package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"

	shipimage "github.com/shipyard-dev/shipyard/image"
)

func testRecipe() fstest.MapFS {
	return fstest.MapFS{
		"packages/base.txt":               {Data: []byte("# base\npython3\ntini # init\n\n")},
		"packages/full.txt":               {Data: []byte("python3-pandas\npython3\n")},
		"hooks/customize.sh":              {Data: []byte("#!/bin/sh\necho hook\n")},
		"files/matplotlibrc":              {Data: []byte("font.family: sans-serif\n")},
		"skills/python-sandbox/SKILL.md":  {Data: []byte("---\nname: python-sandbox\n---\n")},
		"skills/python-sandbox/extra.txt": {Data: []byte("x")},
	}
}

func writeShip(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ship")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPlan(t *testing.T, opts Options) Plan {
	t.Helper()
	p, err := NewPlan(opts)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return p
}

func TestParsePackageList(t *testing.T) {
	got, err := ParsePackageList([]byte("# comment\n python3 \npython3-ipykernel # kernel\n\nlibstdc++6\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "python3-ipykernel", "libstdc++6"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"Python3", "foo bar", "-x", "a", "pkg=1.0", "pkg/trixie"} {
		if _, err := ParsePackageList([]byte(bad + "\n")); err == nil {
			t.Errorf("ParsePackageList(%q): want error", bad)
		}
	}
}

func TestEmbeddedPackageLists(t *testing.T) {
	base, err := Packages(shipimage.Files, FlavourBase)
	if err != nil {
		t.Fatal(err)
	}
	full, err := Packages(shipimage.Files, FlavourFull)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"python3", "python3-ipykernel", "tini", "git", "curl", "procps", "ca-certificates"} {
		if !slices.Contains(base, p) {
			t.Errorf("base lacks %s", p)
		}
	}
	for _, p := range base {
		if !slices.Contains(full, p) {
			t.Errorf("full lacks base package %s", p)
		}
	}
	for _, p := range []string{"python3-pandas", "python3-matplotlib", "fonts-noto-cjk", "nodejs", "npm", "python3-venv", "python3-pip", "python3-fitz"} {
		if !slices.Contains(full, p) {
			t.Errorf("full lacks %s", p)
		}
	}
	for _, p := range []string{"sudo", "build-essential"} {
		if slices.Contains(full, p) {
			t.Errorf("full must not contain %s", p)
		}
	}
}

func TestPlanTagsAndHashes(t *testing.T) {
	ship := writeShip(t, "ship v1")
	base := Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: ship}
	p := mustPlan(t, base)
	if !isContentTag(p.ContentTag, ImageRepo, FlavourBase) || !isContentTag(p.RootfsTag, RootfsRepo, FlavourBase) {
		t.Fatalf("tags %s %s", p.ContentTag, p.RootfsTag)
	}
	if p.Tag != "ship:base" {
		t.Errorf("Tag = %s", p.Tag)
	}
	if !slices.Equal(p.Packages, []string{"python3", "tini"}) {
		t.Errorf("base packages = %q", p.Packages)
	}
	if again := mustPlan(t, base); again.ContentTag != p.ContentTag || again.RootfsTag != p.RootfsTag {
		t.Fatal("plan is not deterministic")
	}

	change := func(name string, mutate func(o *Options, r fstest.MapFS), rootfsChanges bool) {
		t.Run(name, func(t *testing.T) {
			r := testRecipe()
			o := base
			o.Recipe = r
			mutate(&o, r)
			q := mustPlan(t, o)
			if q.ContentTag == p.ContentTag {
				t.Errorf("content tag unchanged")
			}
			if (q.RootfsTag != p.RootfsTag) != rootfsChanges {
				t.Errorf("rootfs tag changed = %v, want %v", q.RootfsTag != p.RootfsTag, rootfsChanges)
			}
		})
	}
	change("ship binary", func(o *Options, _ fstest.MapFS) { o.ShipBinary = writeShip(t, "ship v2") }, false)
	change("skill", func(_ *Options, r fstest.MapFS) { r["skills/python-sandbox/SKILL.md"].Data = []byte("new") }, false)
	change("new skill file", func(_ *Options, r fstest.MapFS) { r["skills/other/SKILL.md"] = &fstest.MapFile{Data: []byte("x")} }, false)
	change("matplotlibrc", func(_ *Options, r fstest.MapFS) { r["files/matplotlibrc"].Data = []byte("y") }, false)
	change("package list", func(_ *Options, r fstest.MapFS) { r["packages/base.txt"].Data = []byte("python3\ntini\ngit\n") }, true)
	change("hook", func(_ *Options, r fstest.MapFS) { r["hooks/customize.sh"].Data = []byte("#!/bin/sh\n") }, true)
	change("flavour", func(o *Options, _ fstest.MapFS) { o.Flavour = FlavourFull }, true)
	change("epoch", func(o *Options, _ fstest.MapFS) { o.SourceDateEpoch = 1 }, true)

	t.Run("comments only", func(t *testing.T) {
		r := testRecipe()
		r["packages/base.txt"].Data = []byte("tini\n# reordered, with a comment\npython3\n")
		if q := mustPlan(t, Options{Flavour: FlavourBase, Recipe: r, ShipBinary: ship}); q.RootfsTag != p.RootfsTag {
			t.Errorf("rootfs tag changed by comments and order")
		}
	})
	t.Run("mirror is not part of the hash", func(t *testing.T) {
		o := base
		o.Mirror = "http://mirror.example/debian"
		if q := mustPlan(t, o); q.ContentTag != p.ContentTag {
			t.Errorf("mirror changed the content tag")
		}
	})
	t.Run("full flavour", func(t *testing.T) {
		q := mustPlan(t, Options{Recipe: testRecipe(), ShipBinary: ship})
		if q.Tag != "ship:latest" || !strings.HasPrefix(q.ContentTag, "ship:full-") {
			t.Errorf("full tags: %s %s", q.Tag, q.ContentTag)
		}
		if !slices.Equal(q.Packages, []string{"python3", "python3-pandas", "tini"}) {
			t.Errorf("full packages = %q", q.Packages)
		}
	})
}

func TestPlanErrors(t *testing.T) {
	_, err := NewPlan(Options{Recipe: testRecipe(), ShipBinary: filepath.Join(t.TempDir(), "nope")})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "make build") {
		t.Errorf("missing ship binary: %v", err)
	}
	ship := writeShip(t, "x")
	if _, err := NewPlan(Options{Flavour: "huge", Recipe: testRecipe(), ShipBinary: ship}); err == nil {
		t.Error("unknown flavour: want error")
	}
	r := testRecipe()
	r["packages/base.txt"].Data = []byte("Not A Package\n")
	if _, err := NewPlan(Options{Recipe: r, ShipBinary: ship}); err == nil || !strings.Contains(err.Error(), "packages/base.txt") {
		t.Errorf("bad package list: %v", err)
	}
	if _, err := NewPlan(Options{Recipe: testRecipe(), ShipBinary: ship, Mirror: "deb.debian.org"}); err == nil {
		t.Error("mirror without scheme: want error")
	}
}

type tarEntry struct {
	name string
	mode int64
	data string
}

func readTar(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != DefaultSourceDateEpoch {
			t.Errorf("%s: uid %d gid %d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		data, _ := io.ReadAll(tr)
		out = append(out, tarEntry{h.Name, h.Mode, string(data)})
	}
}

func TestWriteContext(t *testing.T) {
	p := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: writeShip(t, "SHIP")})
	var a, b bytes.Buffer
	if err := p.WriteContext(&a); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteContext(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("build context is not reproducible")
	}
	entries := readTar(t, a.Bytes())
	var names []string
	files := map[string]tarEntry{}
	for _, e := range entries {
		names = append(names, e.name)
		files[e.name] = e
	}
	want := []string{
		"Dockerfile",
		"shipyard/",
		"shipyard/bin/",
		"shipyard/bin/ship",
		"shipyard/matplotlibrc",
		"shipyard/skills/",
		"shipyard/skills/python-sandbox/",
		"shipyard/skills/python-sandbox/SKILL.md",
		"shipyard/skills/python-sandbox/extra.txt",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("entries:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if e := files["shipyard/bin/ship"]; e.mode != 0o755 || e.data != "SHIP" {
		t.Errorf("ship entry: %+v", e)
	}
	if e := files["shipyard/matplotlibrc"]; e.mode != 0o644 {
		t.Errorf("matplotlibrc mode %o", e.mode)
	}

	df := files["Dockerfile"].data
	if !strings.HasPrefix(df, "FROM "+p.RootfsTag+"\n") {
		t.Errorf("Dockerfile does not start FROM the rootfs:\n%s", df)
	}
	for _, banned := range []string{"RUN ", "# syntax", "ADD "} {
		if strings.Contains(df, banned) {
			t.Errorf("Dockerfile contains %q:\n%s", banned, df)
		}
	}
	for _, wantLine := range []string{"ENV SHIP_IMAGE=" + p.ContentTag, LabelRecipeHash + `="` + p.ContentHash + `"`, "COPY shipyard/ /opt/shipyard/"} {
		if !strings.Contains(df, wantLine) {
			t.Errorf("Dockerfile lacks %q:\n%s", wantLine, df)
		}
	}
}

func TestRootfsChanges(t *testing.T) {
	joined := strings.Join(rootfsChanges, "\n")
	for _, want := range []string{
		"USER 1000:1000", "WORKDIR /workspace", "EXPOSE 8123/tcp", "ENV LANG=C.UTF-8", "ENV HOME=/workspace",
		`ENTRYPOINT ["/usr/bin/tini", "--"]`, `CMD ["/usr/local/bin/ship"]`, "ENV MPLCONFIGDIR=/opt/shipyard/mplconfig",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("rootfs changes lack %q", want)
		}
	}
}

func TestBuiltinSkill(t *testing.T) {
	data, err := fs.ReadFile(shipimage.Files, "skills/python-sandbox/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if !strings.HasPrefix(s, "---\n") {
		t.Fatal("SKILL.md has no front matter")
	}
	fm, body, ok := strings.Cut(s[4:], "\n---\n")
	if !ok {
		t.Fatal("SKILL.md front matter is not closed")
	}
	var meta struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(fm), &meta); err != nil {
		t.Fatalf("front matter: %v", err)
	}
	if meta.Name != "python-sandbox" || len(meta.Description) < 20 {
		t.Errorf("front matter: %+v", meta)
	}
	for _, want := range []string{"/workspace", "--target /workspace/.libs", "venv", "PyPI"} {
		if !strings.Contains(body, want) {
			t.Errorf("SKILL.md does not mention %q", want)
		}
	}
}

func TestIsContentTag(t *testing.T) {
	for tag, want := range map[string]bool{
		"ship:full-0123456789ab":            true,
		"ship:base-0123456789ab":            false,
		"ship:full-0123456789a":             false,
		"ship:full-0123456789aX":            false,
		"ship:latest":                       false,
		"shipyard-rootfs:full-0123456789ab": false,
	} {
		if got := isContentTag(tag, ImageRepo, FlavourFull); got != want {
			t.Errorf("isContentTag(%s) = %v", tag, got)
		}
	}
}

// TestPrivilegeSeparationOnlyForShip: ship's images ask for privilege separation
// (SHIP_SANDBOX_USER, the runtime-caps label); the gull image, whose runtime does not separate,
// and bay's own image carry neither, so no driver starts them as root.
func TestPrivilegeSeparationOnlyForShip(t *testing.T) {
	bin := writeShip(t, "BIN")
	for _, f := range Flavours {
		p := mustPlan(t, Options{Flavour: f, ShipBinary: bin})
		df, caps := p.Dockerfile(), p.Labels()[LabelRuntimeCaps]
		if f == FlavourGull || f == FlavourBay {
			if strings.Contains(df, "SHIP_SANDBOX_USER") || caps != "" {
				t.Errorf("%s asks for privilege separation: %q %q", f, df, caps)
			}
			continue
		}
		if !strings.Contains(df, "SHIP_SANDBOX_USER="+SandboxUser+"\n") || caps != RuntimeCaps {
			t.Errorf("%s: Dockerfile %q label %q", f, df, caps)
		}
	}
}

// An operator's package file adds its packages to the flavour's: they reach mmdebstrap, and
// the root filesystem and content tags change with them (and only with them: a package the
// flavour already has, comments and order change nothing).
func TestPackageFiles(t *testing.T) {
	ship := writeShip(t, "ship v1")
	dir := t.TempDir()
	file := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: ship})
	extra := file("extra.txt", "# tools the team wants\nsqlite3\nhtop # viewer\n")
	p := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: ship, PackageFiles: []string{extra}})
	if !slices.Equal(p.Packages, []string{"htop", "python3", "sqlite3", "tini"}) {
		t.Errorf("packages = %q", p.Packages)
	}
	if p.RootfsTag == plain.RootfsTag || p.ContentTag == plain.ContentTag {
		t.Errorf("tags unchanged by extra packages: %s %s", p.RootfsTag, p.ContentTag)
	}
	if args := strings.Join(mmdebstrapArgs(p, Mirrors{Archive: "http://m/debian"}, "/h.sh"), "\n"); !strings.Contains(args, "--include=htop,python3,sqlite3,tini") {
		t.Errorf("mmdebstrap is not asked for the extra packages:\n%s", args)
	}
	same := file("same.txt", "tini\n# only what base has\n")
	if q := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: ship, PackageFiles: []string{same}}); q.ContentTag != plain.ContentTag {
		t.Errorf("a package the flavour has changed the content tag")
	}
	reordered := file("reordered.txt", "htop\nsqlite3\n")
	if q := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: ship, PackageFiles: []string{same, reordered}}); q.ContentTag != p.ContentTag {
		t.Errorf("the same packages in other files gave another content tag")
	}

	for name, c := range map[string]struct{ path, want string }{
		"bad name": {file("bad.txt", "sqlite3\nNot A Package\n"), `bad.txt: line 2: "Not A Package"`},
		"missing":  {filepath.Join(dir, "nope.txt"), "nope.txt"},
		"too many": {file("many.txt", strings.Repeat("pkg-x\n", maxExtraPackages+1)), "more than"},
		"too big":  {file("big.txt", strings.Repeat("#", maxPackageFileBytes+1)), "larger than"},
	} {
		_, err := NewPlan(Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: ship, PackageFiles: []string{c.path}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to name %q", name, err, c.want)
		}
	}
}

// dpkg runs under mmdebstrap's eatmydata hooks where the host has them (they are in Debian's
// mmdebstrap package, which the build installs), and that changes no content tag.
func TestMmdebstrapUsesEatmydataWithoutChangingTags(t *testing.T) {
	p := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: writeShip(t, "ship v1")})
	args := strings.Join(mmdebstrapArgs(p, Mirrors{Archive: "http://m/debian"}, "/h.sh"), "\n")
	if eatmydataHooks == "" {
		t.Fatalf("%s is missing: the build installs mmdebstrap, which ships it", eatmydataHookDir)
	}
	if !strings.Contains(args, "--hook-dir="+eatmydataHookDir+"\n") {
		t.Errorf("mmdebstrap runs without eatmydata:\n%s", args)
	}
	saved := eatmydataHooks
	eatmydataHooks = ""
	defer func() { eatmydataHooks = saved }()
	if q := mustPlan(t, Options{Flavour: FlavourBase, Recipe: testRecipe(), ShipBinary: writeShip(t, "ship v1")}); q.RootfsTag != p.RootfsTag {
		t.Errorf("eatmydata changed the root filesystem's tag: %s vs %s", q.RootfsTag, p.RootfsTag)
	}
}
