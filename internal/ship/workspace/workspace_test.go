package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	if _, err := w.Rel(""); apierr.CodeOf(err) != shipapi.CodeBadRequest {
		t.Errorf("Rel(\"\"): %v, want bad request", err)
	}
	if _, err := w.Rel("a\x00b"); apierr.CodeOf(err) != shipapi.CodeInvalidPath {
		t.Errorf("Rel with NUL: %v, want invalid_path", err)
	}
}

func TestSymlinkEscapeIsDenied(t *testing.T) {
	w, dir := open(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "s"), []byte("secret"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("../../..", filepath.Join(dir, "up"))
	for _, p := range []string{"out/s", "up/etc/passwd"} {
		if _, err := readText(w, p, 1, -1); apierr.CodeOf(err) != shipapi.CodeAccessDenied {
			t.Errorf("ReadFile(%q): %v, want access denied", p, err)
		}
	}
	// A symlink inside the workspace is followed.
	os.WriteFile(filepath.Join(dir, "real.txt"), []byte("ok"), 0o644)
	os.Symlink("real.txt", filepath.Join(dir, "link.txt"))
	if r, err := readText(w, "link.txt", 1, -1); err != nil || r != "ok" {
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
		r, err := readText(w, "f", c.off, c.lim)
		if err != nil || r != c.want {
			t.Errorf("offset %d limit %d: %d bytes, %v", c.off, c.lim, len(r), err)
		}
	}
	// Limits apply to the selected section, not to the file.
	if _, err := w.ReadText("f", 2, 1, 1000); apierr.CodeOf(err) != shipapi.CodeFileTooLarge {
		t.Errorf("long line over the limit: %v", err)
	}
	if r, err := w.ReadText("f", 3, 2, 4); err != nil || r.Len() != 3 {
		t.Errorf("short lines under the limit: %v", err)
	}
	if _, err := w.ReadText("f", 1, -1, 1000); apierr.CodeOf(err) != shipapi.CodeFileTooLarge {
		t.Errorf("whole file over the limit: %v", err)
	}
}

// readText reads p through ReadText and WriteJSON, as read_file answers.
func readText(w *Workspace, p string, offset, limit int) (string, error) {
	t, err := w.ReadText(p, offset, limit, MaxTextBytes)
	if err != nil {
		return "", err
	}
	defer t.Close()
	var b bytes.Buffer
	if err := t.WriteJSON(&b); err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(b.Bytes(), &s); err != nil {
		return "", fmt.Errorf("WriteJSON wrote invalid JSON %q: %w", b.String(), err)
	}
	return s, nil
}

func TestWriteJSONMatchesEncodingJSON(t *testing.T) {
	w, dir := open(t)
	// Every ASCII byte, escapes, multi-byte runes across the chunk boundary,
	// U+2028/2029, and a file longer than one chunk.
	var b strings.Builder
	for c := range 0x80 {
		b.WriteByte(byte(c))
	}
	b.WriteString(strings.Repeat("é", chunk/2-40))
	b.WriteString("x日本語\u2028\u2029\"\\</>&")
	b.WriteString(strings.Repeat("😀a", chunk/3))
	want := b.String()
	os.WriteFile(filepath.Join(dir, "t"), []byte(want), 0o644)
	got, err := readText(w, "t", 1, -1)
	if err != nil || got != want {
		t.Fatalf("round trip: %d bytes (want %d), %v", len(got), len(want), err)
	}
	// Invalid UTF-8 is refused, even when it is the last byte.
	os.WriteFile(filepath.Join(dir, "bin"), []byte(strings.Repeat("a", chunk)+"\xe6\x97"), 0o644)
	if _, err := readText(w, "bin", 1, -1); apierr.CodeOf(err) != shipapi.CodeInvalidUTF8 {
		t.Errorf("truncated rune at the end: %v", err)
	}
}

func TestLongNamesAreInvalidPaths(t *testing.T) {
	w, _ := open(t)
	for _, p := range []string{strings.Repeat("n", 256), "a/" + strings.Repeat("n", 300) + "/b", strings.Repeat("ab/", 1400)} {
		if _, _, err := w.WriteFile(p, "x", false); apierr.CodeOf(err) != shipapi.CodeInvalidPath {
			t.Errorf("WriteFile(%d bytes): %v, want invalid_path", len(p), err)
		}
	}
	if _, _, err := w.WriteFile(strings.Repeat("n", 255), "x", false); err != nil {
		t.Errorf("a 255-byte name: %v", err)
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
