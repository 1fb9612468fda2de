package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

// The skill library across bays: two bays on one PostgreSQL, each with its own data directory
// (so its own skills.dir, as two Kubernetes replicas with an emptyDir each). Skills uploaded
// through bay 1 are listed and read through bay 2, mounted into a sandbox bay 2 starts, and
// invoked through bay 2, which materialised their versions from the database; a delete through
// bay 1 removes the name for bay 2 too.
func TestSkillsAcrossBays(t *testing.T) {
	cli := docker(t)
	t.Cleanup(func() { execLeftovers(t, cli) })
	dbURL := pgtest.NewDatabase(t)
	ws := filepath.Join(t.TempDir(), "ws")
	execs := fmt.Sprintf("execs:\n  workspace_root: %q\n  image: %q\n", ws, testImage)
	one := startBay(t, bayOptions{databaseURL: dbURL, instanceID: fmt.Sprintf("e2e-skills-%d-1", os.Getpid())})
	two := startBay(t, bayOptions{databaseURL: dbURL, instanceID: fmt.Sprintf("e2e-skills-%d-2", os.Getpid()), extraConfig: execs})

	notes := skillArchive(t, map[string]string{"notes/SKILL.md": "---\nname: notes\ndescription: Note-taking conventions.\n---\nshared through the database\n"})
	v := expect(t, one.uploadSkill(apiKey, notes), 201, "upload notes through bay 1").Str("skill.version")
	if len(v) != 64 {
		t.Fatalf("upload answered version %q", v)
	}
	shellRun := map[string]string{}
	for _, f := range []string{"SKILL.md", "manifest.json", "scripts/run.sh"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "skills", "shell.run", f))
		if err != nil {
			t.Fatal(err)
		}
		shellRun["shell.run/"+f] = string(b)
	}
	expect(t, one.uploadSkill(apiKey, skillArchive(t, shellRun)), 201, "upload shell.run through bay 1")
	for _, dir := range []string{one.dir, two.dir} {
		if _, err := os.Stat(filepath.Join(dir, "skills", "versions", v)); (dir == one.dir) != (err == nil) {
			t.Fatalf("version %s in %s before bay 2 used it: %v", v, dir, err)
		}
	}

	list := expect(t, two.do("GET", "/v1/skills", nil, nil), 200, "list through bay 2")
	var names []string
	for _, it := range list.Get("items").([]any) {
		names = append(names, it.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "notes,shell.run" {
		t.Fatalf("bay 2 lists %v", names)
	}
	// A knowledge skill's detail has manifest_json null; the harness checks it against the
	// OpenAPI document like every answer.
	if got := expect(t, two.do("GET", "/v1/skills/notes", nil, nil), 200, "get notes through bay 2"); got.Get("manifest_json") != nil {
		t.Fatalf("notes through bay 2: %s", got)
	}
	got := expect(t, two.do("GET", "/v1/skills/shell.run", nil, nil), 200, "get shell.run through bay 2")
	if !strings.Contains(got.Str("skill_md"), "name: shell.run") {
		t.Fatalf("shell.run through bay 2: %s", got)
	}
	if f := expect(t, two.do("GET", "/v1/skills/notes/files/SKILL.md", nil, nil), 200, "file through bay 2"); !strings.Contains(string(f.Body), "shared through the database") ||
		f.Header.Get("X-Skill-Version") != v {
		t.Fatalf("SKILL.md through bay 2: %q", f.Body)
	}

	id := two.create(map[string]any{"skills": []string{"notes", "shell.run"}}, nil).Str("id")
	if out := two.shellOK(id, "cat /skills/notes/SKILL.md; ls /skills/shell.run/scripts"); !strings.Contains(out, "shared through the database") || !strings.Contains(out, "run.sh") {
		t.Fatalf("skills mounted by bay 2: %q", out)
	}
	r := expect(t, two.do("POST", "/v1/skills/shell.run/invoke", invokeBody("across", map[string]any{"script": "echo from-bay-two; id -u"}, nil), nil), 200, "invoke through bay 2")
	if r.Str("exec.status") != "succeeded" || !strings.Contains(r.Str("outputs.stdout"), "from-bay-two\n1000") {
		t.Fatalf("invoke through bay 2: %s", r)
	}

	expect(t, one.do("DELETE", "/v1/admin/skills/notes", nil, nil), 204, "delete through bay 1")
	expectError(t, two.do("GET", "/v1/skills/notes/files/SKILL.md", nil, nil), 404, "not_found", "deleted skill through bay 2")
	// The running session keeps its version.
	if out := two.shellOK(id, "cat /skills/notes/SKILL.md"); !strings.Contains(out, "shared through the database") {
		t.Fatalf("running session after the delete: %q", out)
	}
}
