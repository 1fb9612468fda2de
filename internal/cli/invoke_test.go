package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

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

	// `shipyard mcp` (stdio) offers the skills as tools too.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+url, "SHIPYARD_TOKEN="+realAPIKey)
	s, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		if strings.HasPrefix(tl.Name, "skill.") {
			names = append(names, tl.Name)
		}
	}
	if strings.Join(names, ",") != "skill.python.run,skill.shell.run" && strings.Join(names, ",") != "skill.shell.run,skill.python.run" {
		t.Fatalf("skill tools over stdio: %v", names)
	}
	res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "skill.python.run", Arguments: map[string]any{"code": "print(1+1)"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["stdout"] != "2\n" {
		t.Fatalf("skill.python.run over stdio: %+v", res)
	}
}
