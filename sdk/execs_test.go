package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// TestExecMethods: each exec method calls its endpoint with the id and artifact path escaped,
// and decodes the answer; an error envelope becomes an *sdk.Error with its code.
func TestExecMethods(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == bayapi.PathExecs:
			var body bayapi.CreateExecRequest
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ProjectID != "p" || body.Exec.Kind != "shell" {
				t.Errorf("create body: %+v, %v", body, err)
			}
			_ = json.NewEncoder(w).Encode(bayapi.ExecResponse{ExecID: "sbx-exec-1", Status: "succeeded"})
		case strings.HasSuffix(r.URL.Path, "/artifacts"):
			_ = json.NewEncoder(w).Encode(bayapi.ArtifactList{ExecID: "sbx-exec-1", Files: []bayapi.ArtifactEntry{{Path: "a b.txt", Size: 3}}})
		case strings.Contains(r.URL.Path, "/artifacts/"):
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte("abc"))
		case strings.HasSuffix(r.URL.Path, "/cancel"):
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"exec x not found","request_id":"r"}}`))
		default:
			_ = json.NewEncoder(w).Encode(bayapi.ExecList{Total: 1})
		}
	}))
	defer srv.Close()
	c, err := sdk.New(srv.URL, "sk-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec, err := c.CreateExec(ctx, sdk.ExecRequest{ProjectID: "p", Exec: sdk.ExecCommand{Kind: "shell", Args: []string{"-lc", "true"}}})
	if err != nil || rec.ExecID != "sbx-exec-1" {
		t.Fatalf("CreateExec: %+v, %v", rec, err)
	}
	if l, err := c.ListExecs(ctx, sdk.ListExecsRequest{TaskID: "t1", Limit: 5}); err != nil || l.Total != 1 {
		t.Fatalf("ListExecs: %+v, %v", l, err)
	}
	if m, err := c.ExecArtifacts(ctx, "sbx-exec-1"); err != nil || len(m.Files) != 1 {
		t.Fatalf("ExecArtifacts: %+v, %v", m, err)
	}
	var b strings.Builder
	if n, err := c.DownloadExecArtifact(ctx, "sbx-exec-1", "sub/a b.txt", &b); err != nil || n != 3 || b.String() != "abc" {
		t.Fatalf("DownloadExecArtifact: %d %q %v", n, b.String(), err)
	}
	_, err = c.CancelExec(ctx, "x")
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != "not_found" {
		t.Fatalf("CancelExec: %v, want not_found", err)
	}
	if _, err := c.GetExec(ctx, ""); err == nil {
		t.Fatal("GetExec(\"\") succeeded")
	}
	want := []string{
		"POST /v1/sandbox/execs?",
		"GET /v1/sandbox/execs?limit=5&task_id=t1",
		"GET /v1/sandbox/execs/sbx-exec-1/artifacts?",
		"GET /v1/sandbox/execs/sbx-exec-1/artifacts/sub/a%20b.txt?",
		"POST /v1/sandbox/execs/x/cancel?",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
