package httpapi_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// principals is a test PrincipalAuthenticator: "Bearer <owner>-key" -> owner; the owner
// "admin" is an admin.
type principals struct{ tokens }

func (p principals) Principal(r *http.Request) (string, bool, error) {
	owner, err := p.Authenticate(r)
	return owner, owner == "admin", err
}

func newSkillServer(t *testing.T, lim skills.Limits) *httptest.Server {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: sqlite.MemoryPath, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lib, err := skills.New(st, skills.Config{Dir: t.TempDir(), Limits: lim}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := sandbox.New(st, fake.New(), shipclient.New(nil, nil), nil, nil, sandbox.Config{InstanceID: "test"})
	api := httpapi.New(httpapi.Options{Service: svc, Auth: principals{}, Skills: lib, Version: "test"})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func skillTarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		typ, link := byte(tar.TypeReg), ""
		if target, ok := strings.CutPrefix(body, "->"); ok {
			typ, link, body = tar.TypeSymlink, target, ""
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

const pdfMD = "---\nname: pdf\ndescription: Read PDFs.\n---\n# PDF\n"

func call(t *testing.T, srv *httptest.Server, method, path, owner, ctype string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if owner != "" {
		req.Header.Set("Authorization", "Bearer "+owner+"-key")
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func errCode(b []byte) string {
	var env bayapi.ErrorEnvelope
	json.Unmarshal(b, &env)
	return env.Error.Code
}

func TestSkillAdminAPI(t *testing.T) {
	srv := newSkillServer(t, skills.Limits{MaxArchiveBytes: 64 << 10})
	archive := skillTarGz(t, map[string]string{"pdf/SKILL.md": pdfMD, "pdf/scripts/x.sh": "sudo ls", "pdf/references/api.md": "# API"})

	// Non-admins may not write.
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/admin/skills"}, {"POST", "/v1/admin/skills/validate"}, {"DELETE", "/v1/admin/skills/pdf"},
	} {
		if code, b, _ := call(t, srv, c.method, c.path, "alice", "application/gzip", archive); code != 403 || errCode(b) != "forbidden" {
			t.Errorf("%s %s as alice: %d %s", c.method, c.path, code, b)
		}
	}
	if code, _, _ := call(t, srv, "POST", "/v1/admin/skills", "", "application/gzip", archive); code != 401 {
		t.Errorf("anonymous upload: %d", code)
	}

	code, b, _ := call(t, srv, "POST", "/v1/admin/skills", "admin", "application/gzip", archive)
	var up bayapi.SkillUploadResponse
	json.Unmarshal(b, &up)
	if code != 201 || !up.Created || up.Skill.Name != "pdf" || !up.Skill.HasScripts || !up.Skill.HasReferences || len(up.Warnings) != 1 ||
		up.Warnings[0].File != "scripts/x.sh" {
		t.Fatalf("upload: %d %s", code, b)
	}
	if code, b, _ := call(t, srv, "POST", "/v1/admin/skills", "admin", "application/gzip", archive); code != 200 || !strings.Contains(string(b), `"created":false`) {
		t.Fatalf("same upload again: %d %s", code, b)
	}

	// The same skill as a zip in a multipart form replaces nothing (same content, same version).
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for name, body := range map[string]string{"pdf/SKILL.md": pdfMD, "pdf/scripts/x.sh": "sudo ls", "pdf/references/api.md": "# API"} {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "pdf.zip")
	fw.Write(zbuf.Bytes())
	mw.Close()
	code, b, _ = call(t, srv, "POST", "/v1/admin/skills", "admin", mw.FormDataContentType(), form.Bytes())
	if code != 200 || !strings.Contains(string(b), up.Skill.Version) {
		t.Fatalf("zip upload: %d %s", code, b)
	}

	// Every owner reads.
	code, b, _ = call(t, srv, "GET", "/v1/skills", "alice", "", nil)
	var list bayapi.SkillList
	json.Unmarshal(b, &list)
	if code != 200 || len(list.Items) != 1 || list.Items[0].Kind != "knowledge" || list.Items[0].Description != "Read PDFs." {
		t.Fatalf("list: %d %s", code, b)
	}
	code, b, _ = call(t, srv, "GET", "/v1/skills/pdf", "alice", "", nil)
	var d bayapi.SkillDetail
	json.Unmarshal(b, &d)
	if code != 200 || d.SkillMD != pdfMD || len(d.Files) != 3 {
		t.Fatalf("detail: %d %s", code, b)
	}
	code, b, h := call(t, srv, "GET", "/v1/skills/pdf/files/references/api.md", "alice", "", nil)
	if code != 200 || string(b) != "# API" || !strings.HasPrefix(h.Get("Content-Type"), "text/markdown") || h.Get("X-Skill-Version") != up.Skill.Version {
		t.Fatalf("file: %d %q %v", code, b, h)
	}
	for _, p := range []string{"/v1/skills/pdf/files/references", "/v1/skills/pdf/files/nope", "/v1/skills/pdf/files/%2e%2e/%2e%2e/etc/passwd",
		"/v1/skills/pdf/files/references%2f..%2f..%2fSKILL.md"} {
		if code, b, _ := call(t, srv, "GET", p, "alice", "", nil); code != 404 {
			t.Errorf("%s: %d %s", p, code, b)
		}
	}
	// payloads is reserved (the lifecycle has no list of them); candidates and releases are
	// the lifecycle's lists.
	for _, p := range []string{"/v1/skills/nope", "/v1/skills/payloads", "/v1/skills/nope/files/SKILL.md"} {
		if code, b, _ := call(t, srv, "GET", p, "alice", "", nil); code != 404 || errCode(b) != "not_found" {
			t.Errorf("%s: %d %s", p, code, b)
		}
	}

	// The OpenAPI document names the file route's rest-of-path parameter.
	_, b, _ = call(t, srv, "GET", "/openapi.json", "", "", nil)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string } `json:"parameters"`
		} `json:"paths"`
	}
	json.Unmarshal(b, &doc)
	if ps := doc.Paths["/v1/skills/{name}/files/{path}"]["get"].Parameters; len(ps) != 2 || ps[1].Name != "path" || ps[1].In != "path" {
		t.Fatalf("openapi file route: %+v", doc.Paths["/v1/skills/{name}/files/{path}"])
	}

	if code, b, _ := call(t, srv, "DELETE", "/v1/admin/skills/pdf", "admin", "", nil); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _, _ := call(t, srv, "DELETE", "/v1/admin/skills/pdf", "admin", "", nil); code != 404 {
		t.Fatalf("delete again: %d", code)
	}
}

func TestSkillUploadRefusals(t *testing.T) {
	srv := newSkillServer(t, skills.Limits{MaxArchiveBytes: 64 << 10})
	bad := skillTarGz(t, map[string]string{"x/SKILL.md": "---\nname: y\n---\n", "x/../../evil": "x", "x/l": "->/etc/passwd"})
	code, b, _ := call(t, srv, "POST", "/v1/admin/skills", "admin", "application/gzip", bad)
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Details struct {
				Errors []bayapi.SkillProblem `json:"errors"`
			} `json:"details"`
		} `json:"error"`
	}
	json.Unmarshal(b, &env)
	if code != 400 || env.Error.Code != "validation_error" || len(env.Error.Details.Errors) != 2 {
		t.Fatalf("bad archive: %d %s", code, b)
	}
	// The dry run answers 200 with the findings and stores nothing.
	bad = skillTarGz(t, map[string]string{"x/SKILL.md": "---\nname: y\n---\n"})
	code, b, _ = call(t, srv, "POST", "/v1/admin/skills/validate", "admin", "application/gzip", bad)
	var v bayapi.SkillValidation
	json.Unmarshal(b, &v)
	if code != 200 || v.Valid || len(v.Errors) != 1 || v.Errors[0].Field != "name" || len(v.Warnings) != 1 {
		t.Fatalf("validate: %d %s", code, b)
	}
	if _, b, _ := call(t, srv, "GET", "/v1/skills", "admin", "", nil); !strings.Contains(string(b), `"items":[]`) {
		t.Fatalf("validate stored: %s", b)
	}
	big := bytes.Repeat([]byte{1}, 65<<10)
	if code, b, _ := call(t, srv, "POST", "/v1/admin/skills", "admin", "application/gzip", big); code != 413 || errCode(b) != "payload_too_large" {
		t.Fatalf("too large: %d %s", code, b)
	}
	for _, body := range [][]byte{nil, []byte("not an archive")} {
		if code, b, _ := call(t, srv, "POST", "/v1/admin/skills", "admin", "application/octet-stream", body); code != 400 {
			t.Errorf("%q: %d %s", body, code, b)
		}
	}
	if code, _, _ := call(t, srv, "POST", "/v1/admin/skills", "admin", "multipart/form-data; boundary=x", []byte("--x\r\n")); code != 400 {
		t.Errorf("malformed multipart: %d", code)
	}
}
