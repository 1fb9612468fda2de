package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
)

func open(t *testing.T) (*Workspace, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, dir
}

func TestRel(t *testing.T) {
	w, dir := open(t)
	cases := map[string]string{
		"a/b":           "a/b",
		"./a/./b/":      "a/b",
		"a//b":          "a/b",
		"sub/../f.txt":  "f.txt",
		"a/..":          ".",
		".":             ".",
		dir:             ".",
		dir + "/x/y":    "x/y",
		dir + "/x/../y": "y",
		"...file":       "...file",
	}
	for in, want := range cases {
		got, err := w.Rel(in)
		if err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../b", "/etc/passwd", dir + "/../x", dir + "x"} {
		if _, err := w.Rel(in); apierr.CodeOf(err) != shipapi.CodeAccessDenied {
			t.Errorf("Rel(%q): %v, want access denied", in, err)
		}
	}
	for _, in := range []string{"", "a\x00b"} {
		if _, err := w.Rel(in); apierr.CodeOf(err) != shipapi.CodeBadRequest {
			t.Errorf("Rel(%q): %v, want bad request", in, err)
		}
	}
}

func TestSymlinkEscapeIsDenied(t *testing.T) {
	w, dir := open(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "s"), []byte("secret"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("../../..", filepath.Join(dir, "up"))
	for _, p := range []string{"out/s", "up/etc/passwd"} {
		if _, err := w.ReadFile(p, 1, -1); apierr.CodeOf(err) != shipapi.CodeAccessDenied {
			t.Errorf("ReadFile(%q): %v, want access denied", p, err)
		}
	}
	// A symlink inside the workspace is followed.
	os.WriteFile(filepath.Join(dir, "real.txt"), []byte("ok"), 0o644)
	os.Symlink("real.txt", filepath.Join(dir, "link.txt"))
	if r, err := w.ReadFile("link.txt", 1, -1); err != nil || r.Content != "ok" {
		t.Fatalf("inside link: %+v %v", r, err)
	}
	// Deleting an escaping link removes the link, never its target.
	if _, err := w.Delete("out"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "s")); err != nil {
		t.Fatal("target of a deleted symlink was touched")
	}
}

func TestReadLines(t *testing.T) {
	w, dir := open(t)
	long := strings.Repeat("x", 200<<10) // longer than the line reader's buffer
	os.WriteFile(filepath.Join(dir, "f"), []byte("1\n"+long+"\n3\n4"), 0o644)
	for _, c := range []struct {
		off, lim int
		want     string
	}{
		{1, -1, "1\n" + long + "\n3\n4"},
		{1, 1, "1\n"},
		{2, 1, long + "\n"},
		{3, 5, "3\n4"},
		{9, 1, ""},
		{2, 0, ""},
	} {
		r, err := w.ReadFile("f", c.off, c.lim)
		if err != nil || r.Content != c.want {
			t.Errorf("offset %d limit %d: %d bytes, %v", c.off, c.lim, len(r.Content), err)
		}
	}
}

func TestUploadCommitAndAbort(t *testing.T) {
	w, dir := open(t)
	u, err := w.BeginUpload("d/e/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	u.File.WriteString("data")
	if abs, err := u.Commit(); err != nil || abs != filepath.Join(dir, "d/e/f.bin") {
		t.Fatalf("commit %q %v", abs, err)
	}
	u, _ = w.BeginUpload("d/e/g.bin")
	u.Abort()
	ents, _ := os.ReadDir(filepath.Join(dir, "d/e"))
	if len(ents) != 1 {
		t.Fatalf("entries after abort: %v", ents)
	}
}
