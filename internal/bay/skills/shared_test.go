package skills

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/postgres"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// countingHandler counts the log records whose message is msg.
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// onBothStores runs fn with an opener of stores on one fresh database: SQLite (a file) and
// PostgreSQL (a database of the test cluster).
func onBothStores(t *testing.T, fn func(t *testing.T, open func() bay.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bay.db")
		fn(t, func() bay.Store {
			st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		fn(t, func() bay.Store {
			st, err := postgres.Open(t.Context(), postgres.Options{URL: url, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
}

// Two bays on one database, each with its own skills dir: a version uploaded through one is
// listed, read, mounted and resolved by the other, which materialises it once however many
// ask at once; its files are exactly the uploader's.
func TestVersionsAcrossBays(t *testing.T) {
	onBothStores(t, func(t *testing.T, open func() bay.Store) {
		ctx := t.Context()
		one, err := New(open(), Config{Dir: t.TempDir()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var materialised atomic.Int64
		two, err := New(open(), Config{Dir: t.TempDir()}, slog.New(countingHandler{msg: "skill version materialised from the database", n: &materialised}))
		if err != nil {
			t.Fatal(err)
		}
		up, err := one.Upload(ctx, dirArchive(t, filepath.Join(bundledskills.Dir(), "csv-report")), "default")
		if err != nil {
			t.Fatal(err)
		}
		v := up.Skill.Version
		if _, err := os.Stat(two.VersionDir(v)); !os.IsNotExist(err) {
			t.Fatalf("bay two has the version before any call: %v", err)
		}
		list, err := two.List(ctx)
		if err != nil || len(list) != 1 || list[0].Version != v {
			t.Fatalf("list on bay two: %v %v", list, err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = two.Dir(ctx, v)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := materialised.Load(); n != 1 {
			t.Fatalf("8 concurrent calls materialised the version %d times, want 1", n)
		}
		sk, md, err := two.Detail(ctx, "csv-report")
		if err != nil || sk.Version != v || !bytes.Contains(md, []byte("name: csv-report")) {
			t.Fatalf("detail on bay two: %v %q", err, md)
		}
		f, _, err := two.OpenFile(ctx, "csv-report", "scripts/summarize.py")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		mounts, mounted, err := two.Mounts(ctx, []string{"csv-report"})
		if err != nil || len(mounted) != 1 || mounts[0].Source != two.VersionDir(v) {
			t.Fatalf("mounts on bay two: %v %v %v", mounts, mounted, err)
		}
		// The files two wrote are the version: read back, they hash to it, modes included.
		tree, problems := ReadDir(two.VersionDir(v), two.lim)
		if len(problems) > 0 || tree.Version() != v {
			t.Fatalf("bay two's files: %v, version %s, want %s", problems, tree.Version(), v)
		}
		if info, err := os.Stat(filepath.Join(two.VersionDir(v), "scripts/summarize.py")); err != nil || info.Mode().Perm() != 0o755 {
			t.Fatalf("script mode: %v %v", info.Mode(), err)
		}
		if ents, _ := os.ReadDir(filepath.Join(two.dir, "tmp")); len(ents) != 0 {
			t.Fatalf("staging left: %v", ents)
		}
		if n := materialised.Load(); n != 1 {
			t.Fatalf("materialised %d times in all, want 1", n)
		}
		// Deleting the name keeps today's semantics: gone from the library, its version stays
		// mountable (running sessions, exec records) on any bay.
		if err := one.Delete(ctx, "csv-report"); err != nil {
			t.Fatal(err)
		}
		if _, err := two.Get(ctx, "csv-report"); !bay.IsNotFound(err) {
			t.Fatalf("deleted skill on bay two: %v", err)
		}
		three, err := New(open(), Config{Dir: t.TempDir()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := three.Dir(ctx, v); err != nil {
			t.Fatalf("a deleted skill's version on a third bay: %v", err)
		}
	})
}

// A stored archive that is not what its row says is refused, and nothing is left in the
// version's place; an unknown version and a name that is no version are errors too.
func TestMaterialiseRefusesBadArchives(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lib, err := New(st, Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := ReadArchive(skillTarGz(t, "a", "first"), DefaultLimits)
	other, _ := ReadArchive(skillTarGz(t, "a", "second"), DefaultLimits)
	put := func(version string, tree *Tree, tamper func(a *bay.SkillArchive)) {
		t.Helper()
		a, err := lib.archiveOf(tree, version)
		if err != nil {
			t.Fatal(err)
		}
		if tamper != nil {
			tamper(a)
		}
		if err := st.Tx(ctx, func(tx bay.Tx) error { return tx.PutSkillArchive(ctx, a) }); err != nil {
			t.Fatal(err)
		}
	}
	wrongVersion := strings.Repeat("ab", 32) // filed under a version it does not unpack to
	put(wrongVersion, other, nil)
	badSum := good.Version()
	put(badSum, good, func(a *bay.SkillArchive) { a.SHA256 = strings.Repeat("0", 64) })
	for v, want := range map[string]string{wrongVersion: "unpacks to version", badSum: "does not match its sha256",
		strings.Repeat("cd", 32): "nor the database", "../../etc": "is not a skill version"} {
		_, err := lib.Dir(ctx, v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Dir(%s): %v, want %q", v, err, want)
		}
		if _, err := os.Stat(lib.VersionDir(v)); validVersion(v) && !os.IsNotExist(err) {
			t.Errorf("Dir(%s) left the version's directory: %v", v, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(lib.dir, "tmp")); len(ents) != 0 {
		t.Fatalf("staging left: %v", ents)
	}
}

// The normalised archive is one content's one byte string, and unpacks to the same version.
func TestArchiveIsNormalised(t *testing.T) {
	zipped, problems := ReadArchive(zipOf(t, ent{name: "SKILL.md", body: "---\nname: a\ndescription: d\n---\nbody\n", mode: 0o644},
		ent{name: "scripts/x.sh", body: "echo\n", mode: 0o755}, ent{name: "l", typ: tar.TypeSymlink, link: "SKILL.md"}), DefaultLimits)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	a1, err := zipped.Archive()
	if err != nil {
		t.Fatal(err)
	}
	back, problems := ReadArchive(a1, DefaultLimits)
	if len(problems) > 0 || back.Version() != zipped.Version() {
		t.Fatalf("round trip: %v, %s != %s", problems, back.Version(), zipped.Version())
	}
	a2, _ := back.Archive()
	if !bytes.Equal(a1, a2) {
		t.Fatal("the same content packs to different bytes")
	}
}

// skillTarGz is a one-file knowledge skill named name whose body is body.
func skillTarGz(t *testing.T, name, body string) []byte {
	return tarGz(t, ent{name: "SKILL.md", body: "---\nname: " + name + "\ndescription: d\n---\n" + body + "\n", mode: 0o644})
}

// BenchmarkMaterialise measures a bay materialising a version of N MiB that another bay
// uploaded (read the archive from the database, check, unpack, write, rename), next to its
// baseline in the same run: writing the same files from memory, as the uploading bay does.
// The files are random bytes (gzip cannot shrink them), in 64 files.
func BenchmarkMaterialise(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, mib := range []int{1, 16} {
			benchMaterialise(b, kind, mib)
		}
	}
}

func benchMaterialise(b *testing.B, kind string, mib int) {
	files := []ent{{name: "SKILL.md", body: "---\nname: big\ndescription: d\n---\nbody\n", mode: 0o644}}
	per := mib << 20 / 64
	for i := range 64 {
		buf := make([]byte, per)
		rand.Read(buf)
		files = append(files, ent{name: fmt.Sprintf("assets/f%02d.bin", i), body: string(buf), mode: 0o644})
	}
	lim := Limits{MaxArchiveBytes: 64 << 20, MaxUnpackedBytes: 64 << 20}
	var st bay.Store
	var err error
	if kind == "sqlite" {
		st, err = sqlite.Open(b.Context(), sqlite.Options{Path: filepath.Join(b.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	} else {
		st, err = postgres.Open(b.Context(), postgres.Options{URL: pgtest.NewDatabase(b), Logger: slog.New(slog.DiscardHandler)})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	up, err := New(st, Config{Dir: b.TempDir(), Limits: lim}, nil)
	if err != nil {
		b.Fatal(err)
	}
	res, err := up.Upload(b.Context(), tarGz(b, files...), "default")
	if err != nil {
		b.Fatal(err)
	}
	tree, _ := ReadArchive(tarGz(b, files...), lim.withDefaults())
	b.Run(fmt.Sprintf("%s/from-database/%dMiB", kind, mib), func(b *testing.B) {
		b.SetBytes(int64(mib) << 20)
		for b.Loop() {
			l, err := New(st, Config{Dir: b.TempDir(), Limits: lim}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Dir(b.Context(), res.Skill.Version); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("%s/baseline-write-from-memory/%dMiB", kind, mib), func(b *testing.B) {
		b.SetBytes(int64(mib) << 20)
		for b.Loop() {
			l, err := New(st, Config{Dir: b.TempDir(), Limits: lim}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.materialise(tree, res.Skill.Version); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An upload that passed the compression-ratio bound because it was sent uncompressed packs far
// tighter normalised: another bay still materialises it (the unpacked size bounds it there).
func TestMaterialiseTightlyPackedVersion(t *testing.T) {
	ctx := t.Context()
	l, st := newLibrary(t)
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	tw := tar.NewWriter(gz)
	for name, body := range map[string][]byte{"SKILL.md": []byte("---\nname: zeros\ndescription: d\n---\n"), "assets/zeros": make([]byte, 4<<20)} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write(body)
	}
	tw.Close()
	gz.Close()
	up, err := l.Upload(ctx, buf.Bytes(), "default")
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.GetSkillArchive(ctx, up.Skill.Version, 1<<20)
	if err != nil || a.Size*DefaultLimits.MaxRatio > 4<<20 {
		t.Fatalf("normalised archive of %d bytes (%v): not tighter than the ratio bound", a.Size, err)
	}
	other, err := New(st, Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Dir(ctx, up.Skill.Version); err != nil {
		t.Fatal(err)
	}
}
