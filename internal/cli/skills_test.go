package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

	if r := runReal(t, url, "", "skills", "rm", "csv-report"); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r := runReal(t, url, "", "skills", "show", "csv-report"); r.code == 0 || !strings.Contains(r.stderr, "not_found") {
		t.Fatalf("show removed: %+v", r)
	}
}
