package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

const (
	aliceKey       = "sk-e2e-alice-0123456789"
	skillsProfiles = `profiles:
  - id: python-default
    image: "ship:latest"
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
  - id: with-skills
    image: "ship:latest"
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    skills: [csv-report]
`
)

func skillArchive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// uploadSkill posts an archive with the key.
func (b *Bay) uploadSkill(key string, archive []byte) Response {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.URL+"/v1/admin/skills", bytes.NewReader(archive))
	req.Header.Set("Content-Type", "application/gzip")
	req.Header.Set("Authorization", "Bearer "+key)
	return b.send(req)
}

// The skill library end to end on the real engine: the repository's skills seeded at startup,
// an admin upload (a non-admin's refused), a profile skill and a per-request skill mounted
// read-only where uid 1000 reads and runs them but cannot write, INDEX.md listing them, an
// unknown skill refused at create, and a re-upload that a running session does not see while
// its next session does.
func TestSkillsMountedReadOnly(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{
		profiles:    skillsProfiles,
		extraConfig: "skills:\n  seed_dir: " + filepath.Join(repoRoot, "skills") + "\n",
		env:         []string{`BAY_SECURITY__API_KEYS=[{"key":"` + aliceKey + `","owner":"alice"}]`},
	})

	list := expect(t, b.do("GET", "/v1/skills", nil, nil), 200, "list skills")
	var names []string
	for _, it := range list.Get("items").([]any) {
		names = append(names, it.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "csv-report,python.run,shell.run" {
		t.Fatalf("seeded skills %v", names)
	}

	v1 := skillArchive(t, map[string]string{"notes/SKILL.md": "---\nname: notes\ndescription: Note-taking conventions.\n---\nversion one\n"})
	expectError(t, b.uploadSkill(aliceKey, v1), 403, "forbidden", "non-admin upload")
	expect(t, b.uploadSkill(apiKey, v1), 201, "admin upload")

	expectError(t, b.do("POST", "/v1/sandboxes", map[string]any{"skills": []string{"notes", "nope"}}, nil), 400, "validation_error", "unknown skill")

	id := b.create(map[string]any{"profile": "with-skills", "skills": []string{"notes", "shell.run"}}, nil).Str("id")
	index := b.shellOK(id, "cat /skills/INDEX.md")
	for _, want := range []string{"[csv-report](csv-report/SKILL.md) | knowledge", "[notes](notes/SKILL.md)", "[shell.run](shell.run/SKILL.md) | invocable"} {
		if !strings.Contains(index, want) {
			t.Errorf("INDEX.md lacks %q:\n%s", want, index)
		}
	}
	if got := b.shellOK(id, "cat /skills/notes/SKILL.md"); !strings.Contains(got, "version one") {
		t.Fatalf("notes: %q", got)
	}
	if got := b.shellOK(id, "id -u; ls /skills"); !strings.Contains(got, "1000") || !strings.Contains(got, "csv-report") {
		t.Fatalf("id/ls: %q", got)
	}
	// Writes fail inside the sandbox, whatever the path.
	for _, cmd := range []string{"touch /skills/notes/x", "rm -f /skills/notes/SKILL.md", "echo x > /skills/csv-report/SKILL.md",
		"mkdir /skills/csv-report/new", "echo x > /skills/INDEX.md", "chmod 777 /skills/shell.run/scripts/run.sh"} {
		r := b.shell(id, map[string]any{"command": cmd})
		if r.Get("success") == true || !strings.Contains(strings.ToLower(r.Str("output")+r.Str("error")), "read-only") {
			t.Errorf("%q: %s", cmd, r)
		}
	}
	// The knowledge skill works as its SKILL.md says: its script fills its template.
	b.writeFile(id, "data.csv", "city,temp\nOslo,4\nRome,18\n")
	report := b.shellOK(id, "python3 /skills/csv-report/scripts/summarize.py data.csv --template /skills/csv-report/templates/report.md")
	if !strings.Contains(report, "# Report: data.csv") || !strings.Contains(report, "| temp | 4 | 18 | 11 |") {
		t.Fatalf("report:\n%s", report)
	}

	// A new version: the running session keeps the one it started with; the next sees it.
	v2 := skillArchive(t, map[string]string{"notes/SKILL.md": "---\nname: notes\ndescription: Note-taking conventions.\n---\nversion two\n"})
	expect(t, b.uploadSkill(apiKey, v2), 201, "re-upload")
	if got := b.shellOK(id, "cat /skills/notes/SKILL.md"); !strings.Contains(got, "version one") {
		t.Fatalf("running session sees %q", got)
	}
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	if got := b.shellOK(id, "cat /skills/notes/SKILL.md"); !strings.Contains(got, "version two") {
		t.Fatalf("next session sees %q", got)
	}

	// A skill deleted from the library after the create is skipped at the next start.
	expect(t, b.do("DELETE", "/v1/admin/skills/notes", nil, nil), 204, "delete skill")
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	if got := b.shellOK(id, "ls /skills"); strings.Contains(got, "notes") || !strings.Contains(got, "shell.run") {
		t.Fatalf("after delete: %q", got)
	}
}
