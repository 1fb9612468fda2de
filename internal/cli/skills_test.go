package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/internal/mcp"
	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

// TestSkillsCLI runs `shipyard skills ...` and `sandbox create --skill` against the real bay
// (whose key is the owner default's: an admin).
func TestSkillsCLI(t *testing.T) {
	url := startRealBay(t)
	dir := filepath.Join(bundledskills.Dir(), "csv-report")
	r := runReal(t, url, "", "skills", "upload", dir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "csv-report stored version ") {
		t.Fatalf("upload: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "upload", dir); r.code != 0 || !strings.Contains(r.stdout, "unchanged") {
		t.Fatalf("upload again: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "ls"); r.code != 0 || !strings.Contains(r.stdout, "csv-report  knowledge") {
		t.Fatalf("ls: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "show", "csv-report"); r.code != 0 || !strings.Contains(r.stdout, "scripts/summarize.py (executable)") ||
		!strings.Contains(r.stdout, "name: csv-report") {
		t.Fatalf("show: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "cat", "csv-report", "templates/report.md"); r.code != 0 || !strings.HasPrefix(r.stdout, "# Report: {title}") {
		t.Fatalf("cat: %+v", r)
	}

	bad := filepath.Join(t.TempDir(), "Bad")
	os.MkdirAll(filepath.Join(bad, "scripts"), 0o755)
	os.WriteFile(filepath.Join(bad, "SKILL.md"), []byte("---\nname: other\n---\n"), 0o644)
	os.WriteFile(filepath.Join(bad, "scripts", "x.sh"), []byte("sudo true\n"), 0o755)
	r = runReal(t, url, "", "skills", "validate", bad)
	if r.code == 0 || !strings.Contains(r.stderr, `error: SKILL.md name: name "other" differs from the folder name "Bad"`) ||
		!strings.Contains(r.stderr, `warning: scripts/x.sh line 1: potentially dangerous pattern "sudo"`) {
		t.Fatalf("validate: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "upload", bad); r.code == 0 || !strings.Contains(r.stderr, "differs from the folder name") {
		t.Fatalf("upload invalid: %+v", r)
	}

	r = runReal(t, url, "", "sandbox", "create", "--skill", "csv-report")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	if r := runReal(t, url, "head -3 /skills/csv-report/SKILL.md; cat /skills/INDEX.md", "shell", id); r.code != 0 ||
		!strings.Contains(r.stdout, "name: csv-report") || !strings.Contains(r.stdout, "[csv-report](csv-report/SKILL.md)") {
		t.Fatalf("in the sandbox: %+v", r)
	}
	if r := runReal(t, url, "", "sandbox", "create", "--skill", "nope"); r.code == 0 || !strings.Contains(r.stderr, "Unknown skill(s): nope") {
		t.Fatalf("unknown skill: %+v", r)
	}

	checkSkillResources(t, url)

	if r := runReal(t, url, "", "skills", "rm", "csv-report"); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "show", "csv-report"); r.code == 0 || !strings.Contains(r.stderr, "not_found") {
		t.Fatalf("show removed: %+v", r)
	}
}

// checkSkillResources: knowledge skills are MCP resources over stdio (`shipyard mcp`) and over
// HTTP with the caller's key; their SKILL.md and files read on demand.
func checkSkillResources(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+url, "SHIPYARD_TOKEN="+realAPIKey)
	h := mcp.NewHTTPHandler(mcp.LoopbackClients(func() string { return strings.TrimPrefix(url, "http://") }), mcp.DefaultOptions())
	srv := httptest.NewServer(h)
	defer srv.Close()
	for name, tr := range map[string]mcpsdk.Transport{
		"stdio": &mcpsdk.CommandTransport{Command: cmd},
		"http":  &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT(realAPIKey)}},
	} {
		s, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		list, err := s.ListResources(ctx, nil)
		if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "skill://csv-report/SKILL.md" ||
			!strings.HasPrefix(list.Resources[0].Description, "Summarise a CSV file") {
			t.Fatalf("%s: resources %+v %v", name, list, err)
		}
		for uri, want := range map[string]string{"skill://csv-report/SKILL.md": "name: csv-report", "skill://csv-report/templates/report.md": "# Report: {title}"} {
			res, err := s.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: uri})
			if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, want) {
				t.Fatalf("%s: read %s: %+v %v", name, uri, res, err)
			}
		}
		if _, err := s.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: "skill://csv-report/nope.md"}); err == nil {
			t.Fatalf("%s: a missing file read", name)
		}
		s.Close()
	}
}
