package ship_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

func TestMetaHealthStat(t *testing.T) {
	d := newDaemon(t)
	st, h := d.call(t, "GET", "/health", nil)
	if st != 200 || h["status"] != "healthy" || h["version"] == "" {
		t.Fatalf("health %d %v", st, h)
	}
	st, s := d.call(t, "GET", "/stat", nil)
	if st != 200 || s["service"] != "ship" || s["rss_bytes"].(float64) <= 0 {
		t.Fatalf("stat %d %v", st, s)
	}
	resp, err := http.Get(d.url + "/meta")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m shipapi.MetaResponse
	if err := jsonDecode(resp.Body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Runtime.Name != "ship" || m.Runtime.APIVersion != "v1" || m.Runtime.Build.Image != "ship:default" || m.Workspace.MountPath != d.workspace {
		t.Fatalf("meta runtime %+v workspace %+v", m.Runtime, m.Workspace)
	}
	fsc := m.Capabilities["filesystem"]
	if fsc.PathMode != "relative_to_mount" || fsc.Endpoints["upload"] != "/fs/upload" || len(fsc.Operations) != 8 {
		t.Fatalf("filesystem capability %+v", fsc)
	}
	if m.Capabilities["python"].Engine != "ipython" || m.Capabilities["terminal"].Protocol != "websocket" ||
		m.Capabilities["shell"].Endpoints["processes"] != "/shell/processes" {
		t.Fatalf("capabilities %+v", m.Capabilities)
	}
	if len(m.BuiltInSkills) != 1 || m.BuiltInSkills[0].Name != "python-sandbox" || m.BuiltInSkills[0].Description != "Run Python in the sandbox" {
		t.Fatalf("skills %+v", m.BuiltInSkills)
	}
	// Built-in skill installed fresh (stale file gone), user skill untouched.
	if _, err := os.Stat(filepath.Join(d.workspace, "skills", "python-sandbox", "examples", "a.py")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.workspace, "skills", "python-sandbox", "stale.txt")); !os.IsNotExist(err) {
		t.Fatalf("stale file of the built-in skill survived: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(d.workspace, "skills", "custom", "SKILL.md")); err != nil || string(b) != "mine" {
		t.Fatalf("custom skill touched: %q %v", b, err)
	}
}

func TestFileLifecycle(t *testing.T) {
	d := newDaemon(t)
	st, b := d.post(t, "/fs/create_file", map[string]any{"path": "fl/run.sh", "content": "#!/bin/sh\necho hi\n", "mode": 0o755})
	if st != 200 || b["success"] != true || b["path"] != filepath.Join(d.workspace, "fl/run.sh") {
		t.Fatalf("create %d %v", st, b)
	}
	fi, err := os.Stat(filepath.Join(d.workspace, "fl/run.sh"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}

	st, b = d.post(t, "/fs/write_file", map[string]any{"path": "fl/deep/er/notes.txt", "content": "l1\nl2\n"})
	if st != 200 || b["size"].(float64) != 6 {
		t.Fatalf("write %d %v", st, b)
	}
	st, b = d.post(t, "/fs/write_file", map[string]any{"path": "fl/deep/er/notes.txt", "content": "l3\nl4\n", "mode": "a"})
	if st != 200 || b["size"].(float64) != 12 {
		t.Fatalf("append %d %v", st, b)
	}
	// Absolute paths inside the workspace are accepted.
	abs := filepath.Join(d.workspace, "fl/deep/er/notes.txt")
	st, b = d.post(t, "/fs/read_file", map[string]any{"path": abs})
	if st != 200 || b["content"] != "l1\nl2\nl3\nl4\n" || b["size"].(float64) != 12 || b["path"] != abs {
		t.Fatalf("read %d %v", st, b)
	}
	st, b = d.post(t, "/fs/read_file", map[string]any{"path": "fl/deep/er/notes.txt", "offset": 2, "limit": 2})
	if st != 200 || b["content"] != "l2\nl3\n" || b["size"].(float64) != 12 {
		t.Fatalf("read window %d %v", st, b)
	}

	st, b = d.post(t, "/fs/edit_file", map[string]any{"path": "fl/deep/er/notes.txt", "old_string": "l", "new_string": "L"})
	expect(t, st, b, 400, shipapi.CodeConflict)
	st, b = d.post(t, "/fs/edit_file", map[string]any{"path": "fl/deep/er/notes.txt", "old_string": "l3", "new_string": "three"})
	if st != 200 || b["replacements"].(float64) != 1 {
		t.Fatalf("edit %d %v", st, b)
	}
	st, b = d.post(t, "/fs/edit_file", map[string]any{"path": "fl/deep/er/notes.txt", "old_string": "l", "new_string": "L", "replace_all": true})
	if st != 200 || b["replacements"].(float64) != 3 {
		t.Fatalf("edit all %d %v", st, b)
	}
	st, b = d.post(t, "/fs/edit_file", map[string]any{"path": "fl/deep/er/notes.txt", "old_string": "absent", "new_string": "x"})
	expect(t, st, b, 400, shipapi.CodeBadRequest)
	if got, _ := os.ReadFile(abs); string(got) != "L1\nL2\nthree\nL4\n" {
		t.Fatalf("after edits %q", got)
	}

	// Listing: directories first, then case-insensitive names; hidden on request.
	for _, n := range []string{"b.txt", "A.txt", ".hidden"} {
		d.post(t, "/fs/write_file", map[string]any{"path": "fl/" + n, "content": n})
	}
	st, b = d.post(t, "/fs/list_dir", map[string]any{"path": "fl"})
	if st != 200 {
		t.Fatalf("list %d %v", st, b)
	}
	if got := names(b); strings.Join(got, ",") != "deep,A.txt,b.txt,run.sh" {
		t.Fatalf("list order %v", got)
	}
	_, b = d.post(t, "/fs/list_dir", map[string]any{"path": "fl", "show_hidden": true})
	if got := names(b); got[1] != ".hidden" {
		t.Fatalf("hidden listing %v", got)
	}
	files := b["files"].([]any)
	if dir := files[0].(map[string]any); dir["is_dir"] != true || dir["size"] != nil {
		t.Fatalf("dir entry %v", dir)
	}

	st, b = d.post(t, "/fs/delete_file", map[string]any{"path": "fl/deep"})
	if st != 200 || b["success"] != true {
		t.Fatalf("delete dir %d %v", st, b)
	}
	st, b = d.post(t, "/fs/delete_file", map[string]any{"path": "fl/b.txt"})
	if st != 200 {
		t.Fatalf("delete file %d %v", st, b)
	}
	st, b = d.post(t, "/fs/delete_file", map[string]any{"path": "fl/b.txt"})
	expect(t, st, b, 404, shipapi.CodeNotFound)
	for _, root := range []string{".", "a/..", d.workspace, d.workspace + "/"} {
		st, b = d.post(t, "/fs/delete_file", map[string]any{"path": root})
		expect(t, st, b, 400, shipapi.CodeBadRequest)
	}
	if _, err := os.Stat(filepath.Join(d.workspace, "fl", "A.txt")); err != nil {
		t.Fatal("workspace damaged by refused deletes")
	}
}

func names(b map[string]any) []string {
	var out []string
	for _, f := range b["files"].([]any) {
		out = append(out, f.(map[string]any)["name"].(string))
	}
	return out
}

// A name over 255 bytes and a path of 4201 characters: client mistakes (invalid_path).
var (
	longName = strings.Repeat("n", 256)
	deepPath = strings.Repeat("abcdefghi/", 420) + "x"
)

func TestFilesystemErrors(t *testing.T) {
	d := newDaemon(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The daemon is shared (and -count may rerun this test): start clean.
	os.Remove(filepath.Join(d.workspace, "escape"))
	os.Remove(filepath.Join(d.workspace, "escape-file"))
	if err := os.Symlink(outside, filepath.Join(d.workspace, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(d.workspace, "escape-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.workspace, "binary.bin"), []byte{0xff, 0xfe, 0x00, 0x80}, 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(d.workspace, "adir"), 0o755)
	big := filepath.Join(d.workspace, "big-sparse.txt")
	if f, err := os.Create(big); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	defer os.Remove(big)
	if err := os.Truncate(big, workspace.MaxTextBytes+1); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"traversal", "/fs/read_file", map[string]any{"path": "../etc/passwd"}, 403, shipapi.CodeAccessDenied},
		{"nested traversal", "/fs/read_file", map[string]any{"path": "a/../../x"}, 403, shipapi.CodeAccessDenied},
		{"absolute outside", "/fs/read_file", map[string]any{"path": "/etc/passwd"}, 403, shipapi.CodeAccessDenied},
		{"symlink dir escape", "/fs/read_file", map[string]any{"path": "escape/secret"}, 403, shipapi.CodeAccessDenied},
		{"symlink file escape", "/fs/read_file", map[string]any{"path": "escape-file"}, 403, shipapi.CodeAccessDenied},
		{"write through symlink", "/fs/write_file", map[string]any{"path": "escape/new", "content": "x"}, 403, shipapi.CodeAccessDenied},
		{"list through symlink", "/fs/list_dir", map[string]any{"path": "escape"}, 403, shipapi.CodeAccessDenied},
		{"missing", "/fs/read_file", map[string]any{"path": "nope.txt"}, 404, shipapi.CodeNotFound},
		{"missing dir", "/fs/list_dir", map[string]any{"path": "nope"}, 404, shipapi.CodeNotFound},
		{"dir as file", "/fs/read_file", map[string]any{"path": "adir"}, 400, shipapi.CodeIsDirectory},
		{"file as dir", "/fs/list_dir", map[string]any{"path": "binary.bin"}, 400, shipapi.CodeNotDirectory},
		{"invalid utf8", "/fs/read_file", map[string]any{"path": "binary.bin"}, 400, shipapi.CodeInvalidUTF8},
		{"empty path", "/fs/read_file", map[string]any{"path": ""}, 400, shipapi.CodeBadRequest},
		{"malformed json", "/fs/read_file", `{"path": `, 400, shipapi.CodeBadRequest},
		{"not json", "/fs/write_file", `hello`, 400, shipapi.CodeBadRequest},
		{"no body", "/fs/create_file", "", 400, shipapi.CodeBadRequest},
		{"wrong type", "/fs/write_file", map[string]any{"path": 5, "content": "x"}, 400, shipapi.CodeBadRequest},
		{"array body", "/fs/delete_file", `[1,2]`, 400, shipapi.CodeBadRequest},
		{"bad write mode", "/fs/write_file", map[string]any{"path": "x", "content": "x", "mode": "z"}, 400, shipapi.CodeBadRequest},
		{"bad offset", "/fs/read_file", map[string]any{"path": "binary.bin", "offset": -1}, 400, shipapi.CodeBadRequest},
		{"bad encoding", "/fs/read_file", map[string]any{"path": "binary.bin", "encoding": "latin-1"}, 400, shipapi.CodeBadRequest},
		{"bad mode bits", "/fs/create_file", map[string]any{"path": "m", "mode": 70000}, 400, shipapi.CodeBadRequest},
		{"exec bad type", "/ipython/exec", map[string]any{"code": 1}, 400, shipapi.CodeBadRequest},
		{"read dot", "/fs/read_file", map[string]any{"path": "."}, 400, shipapi.CodeIsDirectory},
		{"write dot", "/fs/write_file", map[string]any{"path": ".", "content": "x"}, 400, shipapi.CodeIsDirectory},
		{"write dir", "/fs/write_file", map[string]any{"path": "adir", "content": "x"}, 400, shipapi.CodeIsDirectory},
		{"write abs root", "/fs/write_file", map[string]any{"path": d.workspace, "content": "x"}, 400, shipapi.CodeIsDirectory},
		{"create dir", "/fs/create_file", map[string]any{"path": "adir/", "content": "x"}, 400, shipapi.CodeIsDirectory},
		{"edit dir", "/fs/edit_file", map[string]any{"path": "adir", "old_string": "a", "new_string": "b"}, 400, shipapi.CodeIsDirectory},
		{"read long name", "/fs/read_file", map[string]any{"path": longName}, 400, shipapi.CodeInvalidPath},
		{"write long name", "/fs/write_file", map[string]any{"path": "adir/" + longName, "content": "x"}, 400, shipapi.CodeInvalidPath},
		{"list long name", "/fs/list_dir", map[string]any{"path": longName}, 400, shipapi.CodeInvalidPath},
		{"delete long name", "/fs/delete_file", map[string]any{"path": longName}, 400, shipapi.CodeInvalidPath},
		{"4201-character path", "/fs/write_file", map[string]any{"path": deepPath, "content": "x"}, 400, shipapi.CodeInvalidPath},
		{"NUL in path", "/fs/read_file", map[string]any{"path": "a\x00b"}, 400, shipapi.CodeInvalidPath},
		{"read over the limit", "/fs/read_file", map[string]any{"path": "big-sparse.txt"}, 413, shipapi.CodeFileTooLarge},
		{"shell cwd long", "/shell/exec", map[string]any{"command": "pwd", "cwd": longName}, 400, shipapi.CodeInvalidPath},
		{"shell bad type", "/shell/exec", map[string]any{"command": []string{"ls"}}, 400, shipapi.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, b := d.post(t, c.path, c.body)
			expect(t, st, b, c.status, c.code)
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); !os.IsNotExist(err) {
		t.Fatal("write escaped the workspace")
	}
	st, b := d.call(t, "GET", "/no/such/route", nil)
	expect(t, st, b, 404, shipapi.CodeNotFound)
}

func upload(t *testing.T, d *daemon, target string, data io.Reader) (int, map[string]any) {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField(shipapi.UploadPathField, target)
		if err == nil {
			var fw io.Writer
			fw, err = mw.CreateFormFile(shipapi.UploadFileField, filepath.Base(target))
			if err == nil {
				_, err = io.Copy(fw, data)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", d.url+"/fs/upload", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := jsonDecode(resp.Body, &out); err != nil {
		t.Fatalf("upload answer: %v", err)
	}
	return resp.StatusCode, out
}

func TestUploadDownload(t *testing.T) {
	d := newDaemon(t)
	data := make([]byte, 700<<10)
	rand.Read(data)
	name := "up/dir/данные ü \"q\".bin"
	st, b := upload(t, d, name, bytes.NewReader(data))
	if st != 200 || b["success"] != true || b["size"].(float64) != float64(len(data)) {
		t.Fatalf("upload %d %v", st, b)
	}
	// No temporary file left behind.
	ents, _ := os.ReadDir(filepath.Join(d.workspace, "up/dir"))
	if len(ents) != 1 {
		t.Fatalf("upload dir has %d entries", len(ents))
	}

	resp, err := http.Get(d.url + "/fs/download?file_path=" + url.QueryEscape(name))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("download %d, %d bytes", resp.StatusCode, len(got))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Fatalf("content type %q", ct)
	}
	cd := resp.Header.Get("Content-Disposition")
	if !strings.HasPrefix(cd, `attachment; filename="`) || !strings.Contains(cd, "filename*=UTF-8''%D0%B4%D0%B0%D0%BD%D0%BD%D1%8B%D0%B5%20%C3%BC%20%22q%22.bin") {
		t.Fatalf("content disposition %q", cd)
	}

	// Over the limit: 413 and nothing written.
	st, b = upload(t, d, "up/big.bin", io.LimitReader(zeroReader{}, testMaxUpload+1))
	expect(t, st, b, 413, shipapi.CodeTooLarge)
	if _, err := os.Stat(filepath.Join(d.workspace, "up/big.bin")); !os.IsNotExist(err) {
		t.Fatal("oversized upload left a file")
	}
	ents, _ = os.ReadDir(filepath.Join(d.workspace, "up"))
	if len(ents) != 1 {
		t.Fatalf("temporary file left behind: %v", ents)
	}
	st, b = upload(t, d, "../outside.bin", strings.NewReader("x"))
	expect(t, st, b, 403, shipapi.CodeAccessDenied)
	st, b = upload(t, d, "up", strings.NewReader("x"))
	expect(t, st, b, 400, shipapi.CodeIsDirectory)

	for _, c := range []struct {
		q      string
		status int
	}{{"nope.bin", 404}, {"up", 400}, {"../../etc/passwd", 403}} {
		resp, err := http.Get(d.url + "/fs/download?file_path=" + url.QueryEscape(c.q))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("download %q: %d, want %d", c.q, resp.StatusCode, c.status)
		}
	}
	// Download serves bytes that are not UTF-8.
	os.WriteFile(filepath.Join(d.workspace, "raw.bin"), []byte{0xff, 0}, 0o644)
	resp, _ = http.Get(d.url + "/fs/download?file_path=raw.bin")
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, []byte{0xff, 0}) {
		t.Fatalf("raw download %v", got)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
