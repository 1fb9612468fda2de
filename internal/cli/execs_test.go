package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecsCLI: `shipyard execs run` against the real bay prints the exec's stdout and stderr
// and exits with its code; inputs reach /workspace/inputs; list, get and artifacts show it; an
// escalation fails with the policy_violation code.
func TestExecsCLI(t *testing.T) {
	url := startRealBay(t)
	local := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(local, []byte("from a local file"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runReal(t, url, "", "execs", "run", "cli-proj", "--input", "data.txt="+local, "--task", "task-9",
		"cat /workspace/inputs/data.txt; echo; echo oops >&2; echo a > /workspace/artifacts/a.txt; exit 3")
	if r.code != 3 || r.stdout != "from a local file\n" || !strings.Contains(r.stderr, "oops\n") || !strings.Contains(r.stderr, "failed: exit code 3]") {
		t.Fatalf("execs run: %+v", r)
	}
	r = runReal(t, url, "print(6*7)", "execs", "run", "cli-proj", "--python", "-")
	if r.code != 0 || r.stdout != "42\n" {
		t.Fatalf("execs run --python: %+v", r)
	}
	r = runReal(t, url, "", "--output", "json", "execs", "list", "--task", "task-9")
	var list struct {
		Items []struct {
			ExecID string `json:"exec_id"`
			Status string `json:"status"`
		} `json:"items"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 || list.Total != 1 || list.Items[0].Status != "failed" {
		t.Fatalf("execs list: %+v (%v)", r, err)
	}
	id := list.Items[0].ExecID
	if r = runReal(t, url, "", "execs", "artifacts", id); r.code != 0 || !strings.Contains(r.stdout, "\t2\ta.txt\n") {
		t.Fatalf("execs artifacts: %+v", r)
	}
	if r = runReal(t, url, "", "execs", "download", id, "a.txt"); r.code != 0 || r.stdout != "a\n" {
		t.Fatalf("execs download: %+v", r)
	}
	if r = runReal(t, url, "", "execs", "get", id); r.code != 0 || !strings.Contains(r.stdout, `"task_id": "task-9"`) {
		t.Fatalf("execs get: %+v", r)
	}
	r = runReal(t, url, "", "execs", "run", "cli-proj", "--policy", `{"pids": 100000}`, "true")
	if r.code == 0 || !strings.Contains(r.stderr, "policy_violation") {
		t.Fatalf("escalation: %+v", r)
	}
}
