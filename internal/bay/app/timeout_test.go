package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
)

// A python cell or a shell command the runtime stopped at its timeout reaches the client as
// timed_out: true (with success false, and exit_code -1 for shell), so that a client can tell
// it from code that failed (the CLI exits 124 for both).
func TestTimeoutsReachTheClient(t *testing.T) {
	m, _, _, stop := runEchoBay(t, func(s *shipstub.Stub) {
		s.Python = func(shipapi.ExecPythonRequest) (int, any) {
			msg := "Code execution timed out after 1 seconds"
			return 200, shipapi.ExecPythonResponse{Error: &msg, TimedOut: true}
		}
		s.Shell = func(shipapi.ExecShellRequest) (int, any) {
			return 200, shipapi.ExecShellResponse{Stderr: "Command timed out", ReturnCode: -1, TimedOut: true}
		}
	})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	call := func(path, body string, into any) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+m.ListenAddr()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode/100 != 2 || json.Unmarshal(b, into) != nil {
			t.Fatalf("POST %s = %d %s", path, res.StatusCode, b)
		}
	}
	var sb bayapi.SandboxResponse
	call("/v1/sandboxes", `{}`, &sb)
	var py bayapi.PythonExecResponse
	call("/v1/sandboxes/"+sb.ID+"/python/exec", `{"code":"while True: pass","timeout":1}`, &py)
	if !py.TimedOut || py.Success || py.Error == nil {
		t.Errorf("python past its timeout: %+v", py)
	}
	var sh bayapi.ShellExecResponse
	call("/v1/sandboxes/"+sb.ID+"/shell/exec", `{"command":"sleep 9","timeout":1}`, &sh)
	if !sh.TimedOut || sh.Success || sh.ExitCode != -1 {
		t.Errorf("shell past its timeout: %+v", sh)
	}
}
