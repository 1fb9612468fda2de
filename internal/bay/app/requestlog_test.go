package app_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestEveryLineOfARequestCarriesItsID drives a sandbox through its life (create, a session
// start, a failed start, a stop, a delete, a cargo of its own) with a request id on every call,
// and reads the whole debug log: once the daemon is up, with its background loops idle, every
// line is caused by one of those requests and must carry that request's id. The lifecycle
// messages each request is known to cause are checked to carry its id, not another's.
func TestEveryLineOfARequestCarriesItsID(t *testing.T) {
	m, drv, logs, stop := runEchoBay(t, nil)
	startup := len(jsonLines(logs))
	base := "http://" + m.ListenAddr()
	sent := map[string]bool{}
	call := func(id, method, path, body string, want int) []byte {
		t.Helper()
		sent[id] = true
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("X-Request-Id", id)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, res.StatusCode, b, want)
		}
		return b
	}

	var sb struct{ ID string }
	_ = json.Unmarshal(call("rid-create", "POST", "/v1/sandboxes", `{}`, 201), &sb)
	call("rid-exec", "POST", "/v1/sandboxes/"+sb.ID+"/python/exec", `{"code":"1"}`, 200)
	call("rid-stop", "POST", "/v1/sandboxes/"+sb.ID+"/stop", ``, 200)
	drv.Fail("CreateInstance", errors.New("engine refused"), 1)
	call("rid-failed-start", "POST", "/v1/sandboxes/"+sb.ID+"/python/exec", `{"code":"1"}`, 500)
	call("rid-restart", "POST", "/v1/sandboxes/"+sb.ID+"/python/exec", `{"code":"1"}`, 200)
	call("rid-delete", "DELETE", "/v1/sandboxes/"+sb.ID, ``, 204)
	var cg struct{ ID string }
	_ = json.Unmarshal(call("rid-cargo", "POST", "/v1/cargos", `{}`, 201), &cg)
	call("rid-cargo-delete", "DELETE", "/v1/cargos/"+cg.ID, ``, 204)
	call("rid-missing", "GET", "/v1/sandboxes/sbx-nope", ``, 404)

	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	// The lines of the shutdown are nobody's request.
	lines := jsonLines(logs)
	shutdown := len(lines)
	for i, l := range lines {
		if i >= startup && l["msg"] == "shutting down: draining in-flight requests" {
			shutdown = i
			break
		}
	}
	caused := map[string][]string{}
	for _, l := range lines[startup:shutdown] {
		id, _ := l["request_id"].(string)
		if !sent[id] {
			t.Errorf("a line logged while requests ran carries no request id of theirs: %v", l)
			continue
		}
		msg, _ := l["msg"].(string)
		caused[id] = append(caused[id], msg)
	}
	for id, msgs := range map[string][]string{
		"rid-create":       {"sandbox created"},
		"rid-exec":         {"session ready"},
		"rid-stop":         {"sessions destroyed"},
		"rid-failed-start": {"create runtime instance failed", "request failed"},
		"rid-restart":      {"session discarded", "session ready"},
		"rid-delete":       {"sandbox deleted"},
		"rid-cargo":        {"cargo created"},
		"rid-cargo-delete": {"cargo deleted"},
		"rid-missing":      {"request refused"},
	} {
		for _, want := range append(msgs, "request") {
			found := false
			for _, got := range caused[id] {
				found = found || got == want
			}
			if !found {
				t.Errorf("request %s: no %q line with its id; its lines: %q", id, want, caused[id])
			}
		}
	}
}
