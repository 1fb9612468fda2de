package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/testenv"
)

var longFlag = flag.Bool("chaos.long", false, "run the long chaos suite (also SHIPYARD_CHAOS=long)")

// image runs every sandbox of the suite: the light flavour, which holds python3 too.
const image = "ship:base"

// Owners and their keys; the keys exist only in the config of the bay the suite starts.
const (
	ownerA = "default" // the owner of security.api_key
	ownerB = "bob"
	keyA   = "sk-chaos-default-0123456789abcdef"
	keyB   = "sk-chaos-bob-fedcba9876543210"
)

var bayBin string

func TestMain(m *testing.M) {
	flag.Parse()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	bin, removeBin, err := testenv.BuildBay(root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(1)
	}
	bayBin = bin
	restoreFirewall := testenv.KeepHostFirewallAsFound()
	code := m.Run()
	restoreFirewall()
	removeBin()
	os.Exit(code)
}

// settings size one run.
type settings struct {
	Mode              string
	InputsPerEndpoint int           // generated requests per endpoint in the hostile phase
	AbuseWindow       time.Duration // how long each abuse runs while the neighbour is measured
	LoadClients       int
	LoadDuration      time.Duration
	ForkBombSeconds   int
	DiskMB            int
}

func currentSettings() settings {
	if *longFlag || os.Getenv("SHIPYARD_CHAOS") == "long" {
		return settings{Mode: "long", InputsPerEndpoint: 300, AbuseWindow: 20 * time.Second,
			LoadClients: 8, LoadDuration: 60 * time.Second, ForkBombSeconds: 20, DiskMB: 500}
	}
	return settings{Mode: "bounded", InputsPerEndpoint: 40, AbuseWindow: 8 * time.Second,
		LoadClients: 4, LoadDuration: 15 * time.Second, ForkBombSeconds: 10, DiskMB: 200}
}

// bay is the bay process under test, restartable on the same database.
type bay struct {
	instance string // gc.instance_id: bay labels what it creates with it
	url      string
	dir      string
	cfg      string
	logs     *testenv.LogBuffer
	proc     *testenv.BayProcess
}

// bayConfig is testenv's configuration with owner A's key as security.api_key (owner
// "default") and owner B's added in security.api_keys, one profile on the light image.
func bayConfig(port int, dir, instance string) string {
	cfg := testenv.Config{Port: port, DataDir: dir, APIKey: keyA, InstanceID: instance,
		Extra: fmt.Sprintf(`profiles:
  - id: python-default
    image: %q
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
`, image)}
	return strings.Replace(cfg.YAML(), "security:\n", fmt.Sprintf("security:\n  api_keys:\n    - {key: %q, owner: %s}\n", keyB, ownerB), 1)
}

func startBay(t *testing.T) *bay {
	t.Helper()
	dir := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	instance := fmt.Sprintf("chaos-%d-%d", os.Getpid(), port)
	b := &bay{instance: instance, url: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir, logs: &testenv.LogBuffer{},
		cfg: bayConfig(port, dir, instance)}
	if _, err := b.launch(); err != nil {
		t.Fatal(err)
	}
	return b
}

// launch starts bay on its config and database and returns how long it took to get healthy.
func (b *bay) launch() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	p, err := testenv.StartBay(ctx, testenv.BayOptions{Binary: bayBin, Dir: b.dir, Config: b.cfg, URL: b.url, Log: b.logs})
	if err != nil {
		return 0, fmt.Errorf("start bay: %w\n%s", err, b.logs.String())
	}
	b.proc = p
	return time.Since(began), nil
}

func (b *bay) running() bool {
	if b.proc == nil {
		return false
	}
	select {
	case <-b.proc.Exited():
		return false
	default:
		return true
	}
}

// resp is one answer; Err is set when no HTTP answer came.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
	Err    error
	Took   time.Duration
}

func (r resp) String() string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	body := r.Body
	if len(body) > 300 {
		body = append(body[:300:300], "..."...)
	}
	return fmt.Sprintf("%d %s", r.Status, body)
}

// Get walks a dotted path through the JSON body.
func (r resp) Get(path string) any {
	var cur any = r.JSON
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

func (r resp) Str(path string) string { s, _ := r.Get(path).(string); return s }

// api is one owner's client of the bay; it records what it created for the final cleanup.
type api struct {
	b     *bay
	key   string
	owner string
	hc    *http.Client

	mu        sync.Mutex
	sandboxes map[string]bool
	cargos    map[string]bool
}

func newAPI(b *bay, key, owner string) *api {
	return &api{b: b, key: key, owner: owner, hc: &http.Client{Timeout: 3 * time.Minute},
		sandboxes: map[string]bool{}, cargos: map[string]bool{}}
}

// do sends a request. body is nil, []byte (sent as is) or a value encoded as JSON; hdr values
// replace the defaults ("" deletes one).
func (a *api) do(method, path string, body any, hdr map[string]string) resp {
	var rd io.Reader
	ctype := ""
	switch v := body.(type) {
	case nil:
	case []byte:
		rd, ctype = bytes.NewReader(v), "application/json"
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return resp{Err: err}
		}
		rd, ctype = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequest(method, a.b.url+path, rd)
	if err != nil {
		return resp{Err: err}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header[k] = []string{v}
		}
	}
	return a.send(req)
}

func (a *api) send(req *http.Request) resp {
	began := time.Now()
	hr, err := a.hc.Do(req)
	if err != nil {
		return resp{Err: err, Took: time.Since(began)}
	}
	defer hr.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(hr.Body, 32<<20))
	r := resp{Status: hr.StatusCode, Header: hr.Header, Body: raw, Err: err, Took: time.Since(began)}
	if strings.HasPrefix(hr.Header.Get("Content-Type"), "application/json") && len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.JSON)
	}
	if r.Status == 201 && req.Method == "POST" {
		a.track(req.URL.Path, r.Str("id"))
	}
	return r
}

// track remembers a sandbox or cargo that a POST created, whatever the body that created it.
func (a *api) track(path, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case path == "/v1/sandboxes" && strings.HasPrefix(id, "sandbox-"):
		a.sandboxes[id] = true
	case path == "/v1/cargos" && id != "":
		a.cargos[id] = true
	}
}

func (a *api) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sandboxes, id)
}

func (a *api) upload(id, path string, data []byte) resp {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("path", path)
	fw, _ := mw.CreateFormFile("file", "f.bin")
	fw.Write(data)
	mw.Close()
	req, err := http.NewRequest("POST", a.b.url+"/v1/sandboxes/"+id+"/filesystem/upload", &buf)
	if err != nil {
		return resp{Err: err}
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+a.key)
	return a.send(req)
}

// createSandbox makes a sandbox of the default profile.
func (a *api) createSandbox(t *testing.T) string {
	t.Helper()
	r := a.do("POST", "/v1/sandboxes", map[string]any{}, nil)
	if r.Status != 201 || !strings.HasPrefix(r.Str("id"), "sandbox-") {
		t.Fatalf("%s: create sandbox: %s", a.owner, r)
	}
	return r.Str("id")
}

// shell runs a command in a sandbox with a timeout in seconds.
func (a *api) shell(id, command string, timeout int) resp {
	return a.do("POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": command, "timeout": timeout}, nil)
}

// shellOK runs a command and fails the test unless it succeeded; it returns the output.
func (a *api) shellOK(t *testing.T, id, command string) string {
	t.Helper()
	r := a.shell(id, command, 120)
	if r.Status != 200 || r.Get("success") != true {
		t.Fatalf("%s: shell %q in %s: %s", a.owner, command, id, r)
	}
	return r.Str("output")
}

// cleanup deletes every sandbox and cargo the owner created and reports what did not go.
func (a *api) cleanup() []string {
	a.mu.Lock()
	var sbs, cargos []string
	for id := range a.sandboxes {
		sbs = append(sbs, id)
	}
	for id := range a.cargos {
		cargos = append(cargos, id)
	}
	a.mu.Unlock()
	var failed []string
	for _, id := range sbs {
		if r := a.do("DELETE", "/v1/sandboxes/"+id, nil, nil); r.Status != 204 && r.Status != 404 {
			failed = append(failed, fmt.Sprintf("delete %s: %s", id, r))
		}
	}
	for _, id := range cargos {
		if r := a.do("DELETE", "/v1/cargos/"+id, nil, nil); r.Status != 204 && r.Status != 404 {
			failed = append(failed, fmt.Sprintf("delete %s: %s", id, r))
		}
	}
	return failed
}

func (a *api) created() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for id := range a.sandboxes {
		ids = append(ids, id)
	}
	return ids
}

// dockerClient returns an Engine API client; a missing engine or image fails the test.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := testenv.EngineClient(context.Background(), image)
	if err != nil {
		t.Fatalf("the chaos suite need the Docker engine and their image: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// containers lists the containers of a sandbox: ids of all, and of the running ones.
func containers(cli *client.Client, sandboxID string) (all, running []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "bay.sandbox_id="+sandboxID)})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers of %s: %w", sandboxID, err)
	}
	for _, c := range res.Items {
		all = append(all, c.ID)
		if c.State == "running" {
			running = append(running, c.ID)
		}
	}
	return all, running, nil
}

// untilSuccess repeats a shell call until it succeeds or limit passes; it returns the time
// to the success (or -1) and the last answer.
func untilSuccess(a *api, id, command string, limit time.Duration) (time.Duration, resp) {
	began := time.Now()
	var last resp
	for time.Since(began) < limit {
		last = a.shell(id, command, 30)
		if last.Status == 200 && last.Get("success") == true {
			return time.Since(began), last
		}
		time.Sleep(250 * time.Millisecond)
	}
	return -1, last
}

// leftovers finds the containers, volumes and networks that carry this bay's instance id,
// removes them, and names them: after the suite's deletes there must be none.
func leftovers(cli *client.Client, instance string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := make(client.Filters).Add("label", "bay.instance_id="+instance)
	var left []string
	if res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err != nil {
		left = append(left, "list containers: "+err.Error())
	} else {
		for _, c := range res.Items {
			left = append(left, "container "+c.ID[:12])
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	if res, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f}); err != nil {
		left = append(left, "list volumes: "+err.Error())
	} else {
		for _, v := range res.Items {
			left = append(left, "volume "+v.Name)
			_, _ = cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
	if res, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err != nil {
		left = append(left, "list networks: "+err.Error())
	} else {
		for _, n := range res.Items {
			left = append(left, "network "+n.Name)
			_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	}
	return left
}
