package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

// TestSkillsInvokeCLI: `shipyard skills invoke` against the real bay: --input pairs (a value
// that is not JSON is a string), --inputs-file from stdin, the outputs printed as JSON, the
// exit code the exec's, and inputs that fail interface.inputs listed with their pointers.
func TestSkillsInvokeCLI(t *testing.T) {
	url := startRealBay(t)
	for _, name := range []string{"shell.run", "python.run"} {
		if r := runReal(t, url, "", "skills", "upload", filepath.Join(bundledskills.Dir(), name)); r.code != 0 {
			t.Fatalf("upload %s: %+v", name, r)
		}
	}
	r := runReal(t, url, "", "skills", "invoke", "shell.run", "--input", "script=echo hi; exit 4")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 4 || out["stdout"] != "hi\n" || out["exit_code"] != float64(4) ||
		!strings.Contains(r.stderr, "failed") {
		t.Fatalf("invoke shell.run: %+v (%v)", r, err)
	}
	r = runReal(t, url, `{"code": "print(6*7)"}`, "skills", "invoke", "python.run", "--inputs-file", "-", "--project", "cli-inv")
	if r.code != 0 || !strings.Contains(r.stdout, `"stdout": "42\n"`) {
		t.Fatalf("invoke python.run: %+v", r)
	}
	r = runReal(t, url, "", "skills", "invoke", "shell.run", "--input", "script=5", "--input", "extra=true")
	if r.code == 0 || !strings.Contains(r.stderr, "inputs /script") || !strings.Contains(r.stderr, "validation_error") {
		t.Fatalf("bad inputs: %+v", r)
	}
}
