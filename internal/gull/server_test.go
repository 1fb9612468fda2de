package gull

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/gull/agent"
	"github.com/shipyard-dev/shipyard/internal/gull/browser"
)

// scripted answers "sleep N" by waiting N ms (or until its timeout),
// "fail" with exit 1 and anything else with its own text.
type scripted struct {
	mu       sync.Mutex
	timeouts []time.Duration
}

func (s *scripted) Exec(ctx context.Context, line string, timeout time.Duration) agent.Result {
	s.mu.Lock()
	s.timeouts = append(s.timeouts, timeout)
	s.mu.Unlock()
	var ms int
	if _, err := fmt.Sscanf(line, "sleep %d", &ms); err == nil {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			return agent.Result{Stdout: "slept\n"}
		case <-time.After(timeout):
			return agent.TimedOut(timeout)
		}
	}
	if line == "fail" {
		return agent.Result{Stderr: "failed\n", ExitCode: 1}
	}
	return agent.Result{Stdout: line + "\n"}
}

type fixedStatus browser.Status

func (f fixedStatus) Status() browser.Status { return browser.Status(f) }

func testServer(t *testing.T, token string, st browser.Status) (*httptest.Server, *scripted) {
	ex := &scripted{}
	s := &Server{Exec: ex, Browser: fixedStatus(st), Session: "sb", Version: "1.0", AuthToken: token,
		AllowedHosts: []string{"gull.example.internal"}, Log: slog.New(slog.DiscardHandler),
		Meta: gullapi.MetaResponse{Capabilities: map[string]gullapi.Capability{"browser": {Version: "1.0"}}}}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, ex
}

func do(t *testing.T, ts *httptest.Server, method, path, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, b)
	}
	return resp.StatusCode, m
}

func TestExecValidation(t *testing.T) {
	ts, _ := testServer(t, "", browser.Status{Installed: true})
	cases := []struct {
		body string
		code int
	}{
		{`{"cmd":"get title"}`, 200},
		{`{"cmd":"get title","timeout":1}`, 200},
		{`{"cmd":"get title","timeout":300}`, 200},
		{`{}`, 422},
		{`{"cmd":""}`, 422},
		{`{"cmd":"   "}`, 422},
		{`{"cmd":null}`, 422},
		{`{"cmd":"x","timeout":0}`, 422},
		{`{"cmd":"x","timeout":301}`, 422},
		{`{"cmd":"x","timeout":-5}`, 422},
		{`{"cmd":"x","timeout":99999999999999999999}`, 422},
		{`{"cmd":"x","timeout":"10"}`, 422},
		{`{"cmd":5}`, 422},
		{`not json`, 422},
		{``, 422},
		{`{"cmd":"x"} {}`, 422},
		{`{"cmd":"` + strings.Repeat("a", gullapi.MaxCommandBytes+1) + `"}`, 422},
	}
	for _, c := range cases {
		code, m := do(t, ts, "POST", gullapi.PathExec, c.body, nil)
		if code != c.code {
			t.Errorf("%.60s: status %d, want %d (%v)", c.body, code, c.code, m)
		}
		if code == 422 && (m["code"] != gullapi.CodeValidation || m["detail"] == "") {
			t.Errorf("%.60s: error body %v", c.body, m)
		}
		if code == 200 && m["stdout"] != "get title\n" {
			t.Errorf("%.60s: %v", c.body, m)
		}
	}
	code, _ := do(t, ts, "POST", gullapi.PathExec, `{"cmd":"`+strings.Repeat("a", 5<<20)+`"}`, nil)
	if code != 413 {
		t.Errorf("huge body: %d", code)
	}
	if code, m := do(t, ts, "DELETE", gullapi.PathSessions+"/sb-1", "", nil); code != 200 || m["sandbox_id"] != "sb-1" || m["destroyed"] != true {
		t.Errorf("delete session: %d %v", code, m)
	}
	code, _ = do(t, ts, "GET", "/nope", "", nil)
	if code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

func TestBatchValidationAndSemantics(t *testing.T) {
	ts, ex := testServer(t, "", browser.Status{Installed: true})
	for _, bad := range []string{`{}`, `{"commands":[]}`, `{"commands":["a",""]}`, `{"commands":["a"],"timeout":0}`, `{"commands":["a"],"timeout":601}`, `{"commands":"a"}`} {
		if code, _ := do(t, ts, "POST", gullapi.PathExecBatch, bad, nil); code != 422 {
			t.Errorf("%s: %d, want 422", bad, code)
		}
	}
	// stop_on_error defaults to true.
	_, m := do(t, ts, "POST", gullapi.PathExecBatch, `{"commands":["a","fail","b"]}`, nil)
	if m["completed_steps"] != 2.0 || m["total_steps"] != 3.0 || m["success"] != false {
		t.Errorf("stop on error: %v", m)
	}
	res := m["results"].([]any)
	if s := res[1].(map[string]any); s["step_index"] != 1.0 || s["exit_code"] != 1.0 || s["cmd"] != "fail" {
		t.Errorf("step 1: %v", s)
	}
	_, m = do(t, ts, "POST", gullapi.PathExecBatch, `{"commands":["a","fail","b"],"stop_on_error":false}`, nil)
	if m["completed_steps"] != 3.0 || m["success"] != false {
		t.Errorf("no stop on error: %v", m)
	}
	_, m = do(t, ts, "POST", gullapi.PathExecBatch, `{"commands":["a","b"]}`, nil)
	if m["completed_steps"] != 2.0 || m["success"] != true || len(m["results"].([]any)) != 2 {
		t.Errorf("all ok: %v", m)
	}
	// The budget is shared: the second step gets what the first left, the
	// third none (it is not run and has no result).
	ex.mu.Lock()
	ex.timeouts = nil
	ex.mu.Unlock()
	t0 := time.Now()
	_, m = do(t, ts, "POST", gullapi.PathExecBatch, `{"commands":["sleep 1200","sleep 5000","c"],"timeout":2}`, nil)
	if d := time.Since(t0); d > 4*time.Second {
		t.Errorf("batch took %v with a 2s budget", d)
	}
	res = m["results"].([]any)
	if m["completed_steps"] != 2.0 || m["total_steps"] != 3.0 || m["success"] != false || len(res) != 2 {
		t.Fatalf("budget: %v", m)
	}
	if s := res[1].(map[string]any); s["exit_code"] != -1.0 || !strings.HasPrefix(s["stderr"].(string), "Command timed out after ") {
		t.Errorf("second step: %v", s)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.timeouts) != 2 || ex.timeouts[0] > 2*time.Second || ex.timeouts[0] < 1900*time.Millisecond || ex.timeouts[1] > 900*time.Millisecond || ex.timeouts[1] < 500*time.Millisecond {
		t.Errorf("step timeouts %v", ex.timeouts)
	}
}

func TestAuthAndOrigin(t *testing.T) {
	ts, _ := testServer(t, "s3cret", browser.Status{Installed: true, Active: true, Ready: true})
	body := `{"cmd":"get url"}`
	if code, m := do(t, ts, "POST", gullapi.PathExec, body, nil); code != 401 || m["code"] != gullapi.CodeUnauthorized {
		t.Errorf("no token: %d %v", code, m)
	}
	if code, _ := do(t, ts, "POST", gullapi.PathExec, body, map[string]string{"Authorization": "Bearer wrong"}); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code, _ := do(t, ts, "GET", gullapi.PathMeta, "", nil); code != 401 {
		t.Errorf("meta without token: %d", code)
	}
	if code, _ := do(t, ts, "POST", gullapi.PathExec, body, map[string]string{"Authorization": "Bearer s3cret"}); code != 200 {
		t.Errorf("bearer: %d", code)
	}
	basic := "Basic " + b64("gull:s3cret")
	if code, _ := do(t, ts, "POST", gullapi.PathExec, body, map[string]string{"Authorization": basic}); code != 200 {
		t.Errorf("basic: %d", code)
	}
	if code, m := do(t, ts, "GET", gullapi.PathHealth, "", nil); code != 200 || m["status"] != "healthy" || m["browser_ready"] != true || m["session"] != "sb" {
		t.Errorf("health without token: %d %v", code, m)
	}
	// What a page in the browser would send is refused, token or not.
	for _, h := range []map[string]string{
		{"Origin": "http://127.0.0.1:9999", "Authorization": "Bearer s3cret"},
		{"Origin": "null"},
		{"Sec-Fetch-Site": "cross-site", "Authorization": "Bearer s3cret"},
		{"Host": "evil.example.com:8115", "Authorization": "Bearer s3cret"},
		{"Host": "rebind.attacker.test"},
	} {
		if code, m := do(t, ts, "GET", gullapi.PathHealth, "", h); code != 403 || m["code"] != gullapi.CodeForbidden {
			t.Errorf("%v: %d %v", h, code, m)
		}
	}
	for _, host := range []string{"localhost:8115", "127.0.0.1", "[::1]:8115", "sandbox-abc:8115", "gull.example.internal:8115", "172.17.0.3:8115"} {
		if code, _ := do(t, ts, "GET", gullapi.PathHealth, "", map[string]string{"Host": host}); code != 200 {
			t.Errorf("Host %s: %d", host, code)
		}
	}
}

func TestHealthStates(t *testing.T) {
	for _, c := range []struct {
		st     browser.Status
		status string
	}{
		{browser.Status{Installed: false}, "unhealthy"},
		{browser.Status{Installed: true}, "healthy"},
		{browser.Status{Installed: true, Crashed: true}, "degraded"},
		{browser.Status{Installed: true, LastError: "boom"}, "degraded"},
		{browser.Status{Installed: true, Active: true, Ready: true}, "healthy"},
	} {
		ts, _ := testServer(t, "", c.st)
		_, m := do(t, ts, "GET", gullapi.PathHealth, "", nil)
		if m["status"] != c.status || m["browser_active"] != c.st.Active || m["browser_ready"] != c.st.Ready || m["version"] != "1.0" {
			t.Errorf("%+v: %v", c.st, m)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
