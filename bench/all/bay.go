package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// Profiles of the generated configuration.
const (
	profileCold    = "bench"
	profileWarm    = "bench-warm"
	profileBrowser = "bench-browser"
	// profileGVisor is profileCold under gVisor (runtime: runsc): the gvisor figures.
	profileGVisor = "bench-gvisor"
)

// bayProc is the bay daemon under test: bin/bay serve with a generated config.yaml, a SQLite
// file in a temporary directory, the Docker driver (connect_mode auto), an API key and GC off.
type bayProc struct {
	proc     *testenv.BayProcess
	URL      string
	Instance string
	Key      string
	LogPath  string
	dir      string
	logs     *os.File
	hc       *http.Client
}

// startBay writes the configuration and starts bay; it returns once /health answers 200.
func (b *bench) startBay(ctx context.Context) (*bayProc, error) {
	dir, err := os.MkdirTemp("", "shipyard-bench-bay-")
	if err != nil {
		return nil, err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	bp := &bayProc{
		Instance: "bench-" + b.runID, Key: "sk-bench-" + b.runID + "-0123456789abcdef", dir: dir,
		LogPath: filepath.Join(b.out, "bay.log"),
	}
	cfg := testenv.Config{Port: port, DataDir: dir, APIKey: bp.Key, InstanceID: bp.Instance,
		Driver: "  image_pull_policy: never\n",
		Extra: fmt.Sprintf(`execs:
  workspace_root: %q
  image: %q
  max_concurrent_execs: %d
  queue_size: 256
limits: # the transfer figure moves up to 1 GiB through bay in one upload and one download
  input_max_bytes: 2g
  total_input_max_bytes: 2g
  output_max_bytes: 2g
warm_pool:
  enabled: true
  run_on_startup: true
  interval_seconds: 1
  warmup_queue_workers: 2
profiles:
  - id: %s
    image: %q
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 3600
  - id: %s
    image: %q
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 3600
    warm_pool_size: %d
    warm_rotate_ttl: 3600
  - id: %s
    idle_timeout: 3600
    pids_limit: 512
    containers:
      - name: ship
        image: %q
        resources: {cpus: 1.0, memory: "1g"}
        capabilities: [python, shell, filesystem]
        primary_for: [python, shell, filesystem]
        env: {SHIP_NO_KERNEL: "1"} # as the default browser-python profile
      - name: browser
        image: %q
        runtime_type: gull
        runtime_port: 8115
        resources: {cpus: 1.0, memory: "1g"}
        capabilities: [browser]
  - id: %s
    image: %q
    runtime: runsc
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 3600
`, filepath.Join(dir, "workspace"), b.image, execConcurrency, profileCold, b.image, profileWarm, b.image, b.warmPool, profileBrowser, b.image, b.gullImage,
			profileGVisor, b.image)}
	bp.URL = cfg.URL()
	if err := os.WriteFile(filepath.Join(b.out, "bay-config.yaml"), []byte(cfg.YAML()), 0o644); err != nil {
		return nil, err
	}
	bp.logs, err = os.Create(bp.LogPath)
	if err != nil {
		return nil, err
	}
	bp.hc = &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	bp.proc, err = testenv.StartBay(wctx, testenv.BayOptions{Binary: b.bayBin, Args: []string{"serve", "--log-level", "info"},
		Dir: dir, Config: cfg.YAML(), URL: bp.URL, Log: bp.logs, OwnProcessGroup: true})
	if err != nil {
		bp.logs.Close()
		os.RemoveAll(dir)
		tail, _ := os.ReadFile(bp.LogPath)
		return nil, fmt.Errorf("%w\n%s", err, lastLines(string(tail), 20))
	}
	if err := bp.waitImageCache(ctx); err != nil {
		bp.stop()
		return nil, err
	}
	return bp, nil
}

// waitImageCache waits until bay has reported on its image cache (the profiles here share one
// image), so that no figure measures creates made while the cache is still being copied.
func (bp *bayProc) waitImageCache(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		logs, err := os.ReadFile(bp.LogPath)
		if err != nil {
			return err
		}
		if strings.Contains(string(logs), `"msg":"image cache warm"`) || strings.Contains(string(logs), `"msg":"image cache not warmed`) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bay did not report on its image cache: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends bay (SIGTERM, then SIGKILL after 30 s) and removes its directory.
func (bp *bayProc) stop() error {
	err := bp.proc.Stop(30 * time.Second)
	bp.logs.Close()
	os.RemoveAll(bp.dir)
	return err
}

// bayError is a non-2xx answer of bay.
type bayError struct {
	Status int
	Body   string
}

func (e *bayError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

func (bp *bayProc) do(ctx context.Context, method, path string, in, out any) error {
	var rd io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, bp.URL+path, rd)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(bayapi.HeaderAuthorization, "Bearer "+bp.Key)
	resp, err := bp.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %w", method, path, &bayError{Status: resp.StatusCode, Body: string(bytes.TrimSpace(body))})
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// create makes a sandbox of profile and registers it for cleanup. warm reports a warm-pool
// claim (a cold create answers idle_expires_at null, a claim the warm-up's deadline).
func (b *bench) create(ctx context.Context, profile string) (id string, warm bool, err error) {
	var r bayapi.SandboxResponse
	if err := b.bay.do(ctx, http.MethodPost, bayapi.PathSandboxes, map[string]any{"profile": profile}, &r); err != nil {
		return "", false, err
	}
	b.clean.sandbox(r.ID)
	return r.ID, r.IdleExpiresAt != nil, nil
}

// deleteSandbox deletes through bay's DELETE on a detached context (not timed).
func (b *bench) deleteSandbox(ctx context.Context, id string) error {
	ctx, cancel := detached(ctx, 60*time.Second)
	defer cancel()
	err := b.bay.do(ctx, http.MethodDelete, "/v1/sandboxes/"+id, nil, nil)
	var be *bayError
	if err == nil || (errors.As(err, &be) && be.Status == http.StatusNotFound) {
		b.clean.sandboxGone(id)
		return nil
	}
	return err
}

// python runs code through bay and checks the output.
func (b *bench) python(ctx context.Context, id, code, want string) error {
	var r bayapi.PythonExecResponse
	if err := b.bay.do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/python/exec", map[string]any{"code": code, "timeout": 120}, &r); err != nil {
		return err
	}
	if !r.Success || lastLine(r.Output) != want {
		return fmt.Errorf("python %q through bay: success=%v output=%q error=%v", code, r.Success, r.Output, deref(r.Error))
	}
	return nil
}

// browser runs one browser command through bay and checks that it succeeded.
func (b *bench) browser(ctx context.Context, id, cmd string) error {
	var r bayapi.BrowserExecResponse
	if err := b.bay.do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/browser/exec", map[string]any{"cmd": cmd, "timeout": 120}, &r); err != nil {
		return err
	}
	if !r.Success {
		return fmt.Errorf("browser %q through bay: exit %d: %v", cmd, r.ExitCode, deref(r.Error))
	}
	return nil
}

// shell runs command through bay and checks the exit code.
func (b *bench) shell(ctx context.Context, id, command string) error {
	var r bayapi.ShellExecResponse
	if err := b.bay.do(ctx, http.MethodPost, "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": command, "timeout": 120}, &r); err != nil {
		return err
	}
	if !r.Success || r.ExitCode != 0 {
		return fmt.Errorf("shell %q through bay: exit %d: %v", command, r.ExitCode, deref(r.Error))
	}
	return nil
}

// upload streams size bytes from src to path through bay's multipart upload (never holding
// the file in memory on this side either).
func (b *bench) upload(ctx context.Context, id, path string, src io.Reader, size int64) error {
	pr, ctype := multipartStream(bayapi.UploadPathField, path, bayapi.UploadFileField, filepath.Base(path), src)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.bay.URL+"/v1/sandboxes/"+id+"/filesystem/upload", pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set(bayapi.HeaderAuthorization, "Bearer "+b.bay.Key)
	resp, err := b.bay.hc.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("upload: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upload: HTTP %d: %s", resp.StatusCode, body)
	}
	var r bayapi.UploadResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if r.Size != size {
		return fmt.Errorf("upload: bay stored %d bytes, sent %d", r.Size, size)
	}
	return nil
}

// download streams path from bay into dst and returns the byte count.
func (b *bench) download(ctx context.Context, id, path string, dst io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.bay.URL+"/v1/sandboxes/"+id+"/filesystem/download?path="+url.QueryEscape(path), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set(bayapi.HeaderAuthorization, "Bearer "+b.bay.Key)
	resp, err := b.bay.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("download: HTTP %d: %s", resp.StatusCode, body)
	}
	return io.Copy(dst, resp.Body)
}

// sandboxContainer finds the running container of a bay sandbox and its runtime endpoint
// (the container IP, as bay's connect_mode auto resolves it), with the session's runtime
// token from the container's environment as user info, as bay itself calls ship.
func (b *bench) sandboxContainer(ctx context.Context, sandboxID string) (id, endpoint string, err error) {
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", "bay.sandbox_id="+sandboxID)})
	if err != nil {
		return "", "", fmt.Errorf("list containers of %s: %w", sandboxID, err)
	}
	if len(res.Items) != 1 {
		return "", "", fmt.Errorf("sandbox %s has %d running containers, want 1", sandboxID, len(res.Items))
	}
	c := res.Items[0]
	ins, err := b.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return "", "", fmt.Errorf("inspect the container of %s: %w", sandboxID, err)
	}
	userinfo := ""
	for _, kv := range ins.Container.Config.Env {
		if tok, ok := strings.CutPrefix(kv, shipapi.EnvAuthToken+"="); ok {
			userinfo = "bench:" + tok + "@"
		}
	}
	if c.NetworkSettings != nil {
		for _, ep := range c.NetworkSettings.Networks {
			if ep != nil && ep.IPAddress.IsValid() {
				return c.ID, "http://" + userinfo + ep.IPAddress.String() + ":" + strconv.Itoa(shipapi.DefaultPort), nil
			}
		}
	}
	return c.ID, "", fmt.Errorf("container %s of %s has no IP address", c.ID, sandboxID)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// multipartStream returns a body that streams a multipart form of one text field followed by
// one file part read from src (never held in memory), and its Content-Type. bay's and ship's
// upload endpoints differ only in the field names. A write error ends the body with that error.
func multipartStream(textField, value, fileField, filename string, src io.Reader) (*io.PipeReader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField(textField, value)
		if err == nil {
			var fw io.Writer
			if fw, err = mw.CreateFormFile(fileField, filename); err == nil {
				_, err = io.Copy(fw, src)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType()
}
