package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// endpoint is one route with a way to fill its path parameters.
type endpoint struct {
	method, path string // {id} = sandbox, {eid} = execution, {cid} = cargo
	// destructive routes get only hostile ids, never the sandbox the phase reads through.
	destructive bool
	// files routes take ?path= and are probed for escapes.
	files bool
}

var endpoints = []endpoint{
	{method: "GET", path: "/health"},
	{method: "GET", path: "/openapi.json"},
	{method: "GET", path: "/v1/profiles"},
	{method: "POST", path: "/v1/sandboxes"},
	{method: "GET", path: "/v1/sandboxes"},
	{method: "GET", path: "/v1/sandboxes/{id}"},
	{method: "DELETE", path: "/v1/sandboxes/{id}", destructive: true},
	{method: "POST", path: "/v1/sandboxes/{id}/extend_ttl"},
	{method: "POST", path: "/v1/sandboxes/{id}/keepalive"},
	{method: "POST", path: "/v1/sandboxes/{id}/stop", destructive: true},
	{method: "POST", path: "/v1/sandboxes/{id}/python/exec"},
	{method: "POST", path: "/v1/sandboxes/{id}/shell/exec"},
	{method: "POST", path: "/v1/sandboxes/{id}/browser/exec"},
	{method: "POST", path: "/v1/sandboxes/{id}/browser/exec_batch"},
	{method: "GET", path: "/v1/sandboxes/{id}/filesystem/files", files: true},
	{method: "PUT", path: "/v1/sandboxes/{id}/filesystem/files", files: true},
	{method: "DELETE", path: "/v1/sandboxes/{id}/filesystem/files", files: true},
	{method: "GET", path: "/v1/sandboxes/{id}/filesystem/directories", files: true},
	{method: "POST", path: "/v1/sandboxes/{id}/filesystem/upload", files: true},
	{method: "GET", path: "/v1/sandboxes/{id}/filesystem/download", files: true},
	{method: "GET", path: "/v1/sandboxes/{id}/history"},
	{method: "GET", path: "/v1/sandboxes/{id}/history/last"},
	{method: "GET", path: "/v1/sandboxes/{id}/history/{eid}"},
	{method: "PATCH", path: "/v1/sandboxes/{id}/history/{eid}"},
	{method: "POST", path: "/v1/cargos"},
	{method: "GET", path: "/v1/cargos"},
	{method: "GET", path: "/v1/cargos/{cid}"},
	{method: "DELETE", path: "/v1/cargos/{cid}"},
	{method: "GET", path: "/v1/admin/gc/status"},
	// The skill library: hostile ids stand in for skill names and file paths.
	{method: "GET", path: "/v1/skills"},
	{method: "GET", path: "/v1/skills/{id}"},
	{method: "GET", path: "/v1/skills/{cid}/files/{eid}"},
	{method: "POST", path: "/v1/admin/skills"},
	{method: "POST", path: "/v1/admin/skills/validate"},
	{method: "DELETE", path: "/v1/admin/skills/{id}", destructive: true},
}

// Hostile values for numbers, strings, ids and workspace paths.
var (
	hostileNumbers = []any{-1, 0, 9223372037, 1e11, json.Number("9223372036854775807"), json.Number("9223372036854775808"),
		json.Number("-9223372036854775809"), json.Number("1e400"), 1.5, "30", true, nil, []any{1}, map[string]any{}}
	hostileStrings = []string{"", " ", "\x00", "a\x00b", "\u202e\u0000", "é", "\xff\xfe", strings.Repeat("A", 4096),
		strings.Repeat("é", 70000), "../../../../etc/passwd", "/etc/passwd", "%2e%2e%2f", "${HOME}", "'; DROP TABLE sandboxes; --",
		"{{7*7}}", "\r\nX-Injected: 1", "sandbox-000000000000", "cargo-x"}
	hostileIDs = []string{"sandbox-000000000000", "..", "%2e%2e", "sandbox-%00", strings.Repeat("a", 4096), "%E2%80%AE", "*", "sandbox-ZZZZZZZZZZZZ", "%ff"}
	// escapePaths must never read, list or write anything outside /workspace.
	escapePaths = []string{"../../etc/passwd", "../../../../../../etc/passwd", "/etc/passwd", "/etc", "/", "..", "a/../../etc/passwd",
		"etclink/passwd", "etclink", "pwlink", "rootlink/etc/passwd", "rootlink", "rellink", "dirlink/../../etc/passwd",
		"/proc/self/environ", "../../proc/1/root/etc/passwd", "/workspace/../etc/passwd", "./../etc/shadow"}
	oddPaths = []string{"", ".", "a\x00b", strings.Repeat("n", 4096), strings.Repeat("n/", 2100), strings.Repeat("n", 256),
		"ünï/cødé/文件.txt", "\u202etxt.exe", "a\nb", " ", "~", "$HOME/x", "con", "a//b", "./././x"}
	fieldNames = []string{"code", "command", "timeout", "path", "content", "ttl", "profile", "cargo_id", "extend_by",
		"size_limit_mb", "description", "tags", "notes", "cwd", "commands", "cmd", "stop_on_error", "include_code", "learn"}
)

// hostileBodies are fixed malformed bodies every endpoint gets.
func hostileBodies() [][]byte {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	return [][]byte{nil, []byte(""), []byte("{"), []byte("null"), []byte("[]"), []byte(`"x"`), []byte("{}{}"),
		[]byte(`{"a":1,"a":2}`), []byte(deep), []byte("\xff\xfe{\x00}"), []byte(`{"timeout": 1e400}`),
		[]byte(`{"timeout": 9223372036854775808}`), []byte(`{"ttl": -9223372036854775809}`),
		[]byte(`{"path": "../../etc/passwd", "content": "x"}`), []byte(`{"code": "print(1)", "timeout": 9223372037}`),
		bytes.Repeat([]byte("A"), 12<<20)}
}

// randomBody builds an object of a few known fields with hostile values.
func randomBody(rng *rand.Rand) []byte {
	m := map[string]any{}
	for range 1 + rng.IntN(4) {
		f := fieldNames[rng.IntN(len(fieldNames))]
		switch rng.IntN(3) {
		case 0:
			m[f] = hostileNumbers[rng.IntN(len(hostileNumbers))]
		case 1:
			m[f] = hostileStrings[rng.IntN(len(hostileStrings))]
		default:
			m[f] = escapePaths[rng.IntN(len(escapePaths))]
		}
	}
	// Code that runs is harmless and quick: the phase probes the API, not the kernel.
	if _, ok := m["code"]; ok && rng.IntN(2) == 0 {
		m["code"] = "print(1)"
	}
	if _, ok := m["command"]; ok && rng.IntN(2) == 0 {
		m["command"] = "echo 1"
	}
	raw, _ := json.Marshal(m)
	return raw
}

func randomQuery(rng *rand.Rand, files bool) string {
	keys := []string{"limit", "offset", "detail", "status", "cursor", "managed", "success_only", "exec_type", "has_notes", "path"}
	q := url.Values{}
	for range rng.IntN(4) {
		k := keys[rng.IntN(len(keys))]
		vals := []string{"-1", "0", "9223372037", "1e11", "9223372036854775807", "9223372036854775808", "abc", "", "\x00", strings.Repeat("9", 4096), "true", "ü"}
		q.Add(k, vals[rng.IntN(len(vals))])
	}
	if files {
		all := append(append([]string{}, escapePaths...), oddPaths...)
		q.Set("path", all[rng.IntN(len(all))])
	}
	return q.Encode()
}

func randomHeaders(rng *rand.Rand) map[string]string {
	h := map[string]string{}
	cts := []string{"application/json", "text/plain", "", "application/json; charset=utf-16", "multipart/form-data",
		"multipart/form-data; boundary=", "application/x-www-form-urlencoded", strings.Repeat("x", 1024)}
	h["Content-Type"] = cts[rng.IntN(len(cts))]
	keys := []string{"", "k", strings.Repeat("k", 10240), "ééé", "a b\tc", "00000000-0000-0000-0000-000000000000"}
	if k := keys[rng.IntN(len(keys))]; k != "" {
		h["Idempotency-Key"] = k
	}
	if rng.IntN(4) == 0 {
		h["X-Owner"] = ownerB
	}
	if rng.IntN(6) == 0 {
		h["X-Big"] = strings.Repeat("h", 30<<10)
	}
	return h
}

// Documented 5xx answers: a runtime route may answer 502/503/504 when the runtime fails. A
// request net/http refuses before routing (an unknown transfer coding, an unsupported protocol
// version included) is a client's mistake and answers 400. Any other 5xx, 500 above all,
// fails the suite.
var (
	runtime5xx = []int{502, 503, 504}
	no5xx      []int
)

// check classifies an answer: 500 and undocumented 5xx fail, every error is the envelope.
func (h *hostileRun) check(what string, r resp, documented5xx []int) {
	h.rep.mu.Lock()
	defer h.rep.mu.Unlock()
	f := &h.rep.Hostile
	f.Inputs++
	if r.Err != nil {
		f.NoAnswer++
		return
	}
	f.ByStatus[r.Status]++
	if r.Status >= 500 {
		f.FiveXX++
		if r.Status == 500 {
			f.Status500++
		}
		if !slices.Contains(documented5xx, r.Status) {
			h.rep.Failures = append(h.rep.Failures, fmt.Sprintf("hostile: %s answered %s", what, r))
		}
	}
	// A HEAD answer has no body to hold the envelope; only its status counts.
	if r.Status >= 400 && !strings.HasPrefix(what, "HEAD ") {
		if r.Str("error.code") == "" || r.Str("error.message") == "" || r.Str("error.request_id") == "" {
			f.NonEnvelope++
			h.rep.Failures = append(h.rep.Failures, fmt.Sprintf("hostile: %s answered outside the error envelope: %s", what, r))
		}
	}
}

type hostileRun struct {
	rep *report
	a   *api
}

func hostilePhase(t *testing.T, rep *report, s settings, a *api, sa string) {
	h := &hostileRun{rep: rep, a: a}
	before := map[string]bool{}
	for _, id := range a.created() {
		before[id] = true
	}
	// The generated creates that succeeded are deleted after the phase, so that the later
	// phases start from the sandboxes they made themselves.
	defer func() {
		for _, id := range a.created() {
			if !before[id] {
				if r := a.do("DELETE", "/v1/sandboxes/"+id, nil, nil); r.Status == 204 {
					a.forget(id)
				}
			}
		}
	}()
	// Links out of the workspace, made from inside: the files API must not follow them out.
	links := func() {
		a.shellOK(t, sa, "ln -sfn /etc etclink && ln -sfn /etc/passwd pwlink && ln -sfn / rootlink && "+
			"ln -sfn ../../../../etc/passwd rellink && ln -sfn /tmp tmplink && mkdir -p dir && ln -sfn ../.. dirlink && echo hi > ok.txt")
	}
	links()
	eid := a.shell(sa, "echo seed", 30).Str("execution_id")
	cid := a.do("POST", "/v1/cargos", map[string]any{}, nil).Str("id")

	escapes(t, h, sa)
	links()

	rng := rand.New(rand.NewPCG(1, 2))
	fixed := hostileBodies()
	began := time.Now()
	for _, ep := range endpoints {
		documented := no5xx
		if strings.Contains(ep.path, "{id}/") {
			documented = runtime5xx
		}
		if ep.files {
			links() // a DELETE of the batch before may have removed one
		}
		for i := range s.InputsPerEndpoint + len(fixed) {
			path := ep.path
			id := sa
			if ep.destructive || rng.IntN(5) == 0 {
				id = hostileIDs[rng.IntN(len(hostileIDs))]
			}
			path = strings.ReplaceAll(path, "{id}", id)
			path = strings.ReplaceAll(path, "{eid}", pick(rng, eid, hostileIDs))
			path = strings.ReplaceAll(path, "{cid}", pick(rng, cid, hostileIDs))
			if q := randomQuery(rng, ep.files); q != "" {
				path += "?" + q
			}
			var body []byte
			if i < len(fixed) {
				body = fixed[i]
			} else {
				body = randomBody(rng)
			}
			if ep.method == "GET" && i >= len(fixed) && rng.IntN(2) == 0 {
				body = nil
			}
			hdr := randomHeaders(rng)
			if body == nil {
				hdr["Content-Type"] = ""
			}
			what := fmt.Sprintf("%s %s (body %d bytes)", ep.method, shorten(path), len(body))
			r := a.do(ep.method, path, body, hdr)
			h.check(what, r, documented)
			if ep.files && r.Status == 200 {
				h.escapeCheck(what, r)
			}
		}
	}
	methods(h)
	raw(t, h)
	t.Logf("hostile: %d inputs in %v", rep.Hostile.Inputs, time.Since(began).Round(time.Millisecond))
	// bay is still up and the sandbox still answers.
	if r := a.do("GET", "/health", nil, nil); r.Status != 200 {
		rep.fail("hostile: bay /health after the phase: %s", r)
	}
	a.shellOK(t, sa, "test -f ok.txt")
}

func pick(rng *rand.Rand, good string, bad []string) string {
	if good != "" && rng.IntN(3) > 0 {
		return good
	}
	return bad[rng.IntN(len(bad))]
}

func shorten(s string) string {
	if len(s) > 160 {
		return s[:160] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}

// escapeCheck fails an answer of the files API that shows content from outside the workspace.
func (h *hostileRun) escapeCheck(what string, r resp) {
	body := string(r.Body)
	if strings.Contains(body, "root:x:0:0") || strings.Contains(body, "root:*:") ||
		strings.Contains(body, `"name":"passwd"`) || strings.Contains(body, `"name":"shadow"`) ||
		strings.Contains(body, `"name":"os-release"`) || strings.Contains(body, "PATH=") {
		h.escaped("%s answered content from outside the workspace: %s", what, r)
	}
}

// escapes reads, lists, downloads, writes and deletes through every escape path.
func escapes(t *testing.T, h *hostileRun, sa string) {
	a := h.a
	base := "/v1/sandboxes/" + sa + "/filesystem/"
	for _, p := range escapePaths {
		q := "?path=" + url.QueryEscape(p)
		for _, ep := range []string{"files", "directories", "download"} {
			r := a.do("GET", base+ep+q, nil, nil)
			h.count()
			h.check("GET "+ep+" "+p, r, runtime5xx)
			if r.Status == 200 {
				h.escapeCheck("GET "+ep+" "+p, r)
			}
		}
		name := p + "/chaos-escape"
		if strings.HasSuffix(p, "passwd") || strings.HasSuffix(p, "environ") || strings.HasSuffix(p, "shadow") {
			name = p
		}
		r := a.do("PUT", base+"files", map[string]any{"path": name, "content": "x"}, nil)
		h.count()
		h.check("PUT files "+name, r, runtime5xx)
		r = a.upload(sa, name, []byte("x"))
		h.count()
		h.check("upload "+name, r, runtime5xx)
		r = a.do("DELETE", base+"files?path="+url.QueryEscape(p), nil, nil)
		h.count()
		h.check("DELETE files "+p, r, runtime5xx)
	}
	// Writes through a link to /tmp must not land in /tmp.
	for _, p := range []string{"tmplink/chaos-escape", "../tmp/chaos-escape", "/tmp/chaos-escape"} {
		r := a.do("PUT", base+"files", map[string]any{"path": p, "content": "x"}, nil)
		h.count()
		h.check("PUT files "+p, r, runtime5xx)
		r = a.upload(sa, p, []byte("x"))
		h.count()
		h.check("upload "+p, r, runtime5xx)
	}
	// Reads and deletes through a link to /tmp must neither show nor remove what /tmp holds.
	a.shellOK(t, sa, "echo keep-me > /tmp/chaos-keep && ln -sfn /tmp tmplink")
	for _, p := range []string{"tmplink/chaos-keep", "tmplink/", "tmplink/.", "../tmp/chaos-keep", "/tmp/chaos-keep"} {
		q := "?path=" + url.QueryEscape(p)
		for _, ep := range []string{"files", "download", "directories"} {
			r := a.do("GET", base+ep+q, nil, nil)
			h.count()
			h.check("GET "+ep+" "+p, r, runtime5xx)
			if r.Status == 200 && (strings.Contains(string(r.Body), "keep-me") || strings.Contains(string(r.Body), "chaos-keep")) {
				h.escaped("GET %s %s showed /tmp of the container: %s", ep, p, r)
			}
		}
		r := a.do("DELETE", base+"files"+q, nil, nil)
		h.count()
		h.check("DELETE files "+p, r, runtime5xx)
	}
	if out := a.shellOK(t, sa, "cat /tmp/chaos-keep 2>&1; true"); !strings.Contains(out, "keep-me") {
		h.escaped("a DELETE through a link to /tmp removed /tmp/chaos-keep of the container: %q", out)
	}
	out := a.shellOK(t, sa, "ls /tmp/chaos-escape /etc/chaos-escape /chaos-escape 2>/dev/null; test -e /etc/passwd && echo intact")
	if strings.Contains(out, "chaos-escape") {
		h.escaped("a write through the files API landed outside the workspace: %q", out)
	}
	if !strings.Contains(out, "intact") {
		h.rep.fail("escape: a delete through the files API removed /etc/passwd of the container: %q", out)
	}
}

func (h *hostileRun) escaped(format string, args ...any) {
	h.rep.mu.Lock()
	h.rep.Hostile.Escapes++
	h.rep.mu.Unlock()
	h.rep.fail("escape: "+format, args...)
}

func (h *hostileRun) count() {
	h.rep.mu.Lock()
	h.rep.Hostile.EscapeTries++
	h.rep.mu.Unlock()
}

// raw sends requests Go's client refuses to build: NUL and line breaks in the request line and
// headers, odd methods, huge headers, lying lengths and broken chunking.
func raw(t *testing.T, h *hostileRun) {
	host := strings.TrimPrefix(h.a.b.url, "http://")
	auth := "Authorization: Bearer " + h.a.key + "\r\n"
	reqs := []string{
		"GET /v1/sandboxes\x00 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n" + auth + "\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \x00\x01\r\n" + auth + "\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 200<<10) + "\r\n" + auth + "\r\n",
		"PROPFIND /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"TRACE /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"get /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"G\x00T /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n",
		"GET http://127.0.0.1:1/v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"GET /v1/../../etc/passwd HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"GET /v1/sandboxes/%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"GET /v1/sandboxes HTTP/9.9\r\nHost: x\r\n" + auth + "\r\n",
		"GET /v1/sandboxes\r\n\r\n",
		"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: -1\r\n\r\n{}",
		"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
		"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
		"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + strings.Repeat("k", 60<<10) + "\r\n\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Zm9vOmJhcg==\r\n\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n\r\n",
		"GET /v1/sandboxes?limit=9223372036854775808&limit=-1 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 5\r\n\r\n",
	}
	for _, raw := range reqs {
		what := "raw " + shorten(strings.SplitN(raw, "\r\n", 2)[0])
		r := rawRequest(host, raw)
		if strings.Contains(raw, "Content-Length: 5\r\n\r\n") && r.Err != nil {
			// The server waits for a body that never comes; our deadline ends it.
			r.Err = nil
			continue
		}
		h.check(what, r, no5xx)
	}
}

// methods sends every other method to every route, on a sandbox that does not exist so that
// no method can harm the phase's own: 405 method_not_allowed or 404, in the envelope.
func methods(h *hostileRun) {
	for _, ep := range endpoints {
		path := strings.NewReplacer("{id}", "sandbox-000000000000", "{eid}", "exec-000000000000", "{cid}", "cargo-000000000000").Replace(ep.path)
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "HEAD", "PROPFIND"} {
			if m == ep.method {
				continue
			}
			r := h.a.do(m, path, []byte("{}"), nil)
			h.check(m+" "+path, r, no5xx)
		}
	}
}

// rawRequest writes bytes to bay and reads one answer (10 s at most).
func rawRequest(host, raw string) resp {
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return resp{Err: err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(raw)); err != nil {
		return resp{Err: err}
	}
	hr, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return resp{Err: err}
	}
	defer hr.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(hr.Body)
	r := resp{Status: hr.StatusCode, Header: hr.Header, Body: buf.Bytes()}
	_ = json.Unmarshal(r.Body, &r.JSON)
	return r
}
