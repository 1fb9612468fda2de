package cli_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/term"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/mcp"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/sdk"
	"github.com/shipyard-dev/shipyard/sdk/sdktest"
)

// The tests in this file run the clients against the real bay binary (SQLite file, Docker
// driver, image ship:base). A missing Docker engine or image fails them; they never skip.

const realAPIKey = "sk-clients-0123456789abcdef"

// realImage is ship:base, or SHIPYARD_E2E_IMAGE (an image built with this tree's ship).
var realImage = cmp.Or(os.Getenv("SHIPYARD_E2E_IMAGE"), "ship:base")

// startRealBay runs `bay serve` on a free port and returns its URL; cleanup deletes the
// sandboxes left and stops it.
func startRealBay(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", realImage).CombinedOutput(); err != nil {
		t.Fatalf("image %s is needed (make image): %v %s", realImage, err, out)
	}
	dir := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.Config{Port: port, DataDir: dir, APIKey: realAPIKey, InstanceID: fmt.Sprintf("clients-%d", port),
		Extra: fmt.Sprintf(`profiles:
  - id: python-default
    image: %q
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
execs:
  image: %q
`, realImage, realImage)}
	logs := &testenv.LogBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bay, err := testenv.StartBay(ctx, testenv.BayOptions{Binary: bayBinary, Dir: dir, Config: cfg.YAML(), URL: cfg.URL(), Log: logs})
	if err != nil {
		t.Fatalf("bay not healthy: %v\n%s", err, logs)
	}
	url := cfg.URL()
	c, _ := sdk.New(url, realAPIKey)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if l, err := c.ListSandboxes(ctx, sdk.ListSandboxesRequest{Limit: 200}); err == nil {
			for _, sb := range l.Items {
				c.DeleteSandbox(ctx, sb.ID)
			}
		}
		bay.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("bay logs:\n%s", logs)
		}
	})
	return url
}

// runReal runs the CLI against the real bay with its API key in the environment.
func runReal(t *testing.T, url, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+url, "SHIPYARD_TOKEN="+realAPIKey)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func TestRealBay(t *testing.T) {
	url := startRealBay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := sdk.New(url, realAPIKey)
	if err != nil {
		t.Fatal(err)
	}

	// The contract the clients' fake bay is held to, against the real bay.
	t.Run("contract", func(t *testing.T) { sdktest.RunContract(t, c) })

	t.Run("sdk", func(t *testing.T) {
		if _, err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
		anon, _ := sdk.New(url, "")
		if _, err := anon.ListSandboxes(ctx, sdk.ListSandboxesRequest{}); !sdk.IsCode(err, bayapi.CodeUnauthorized) {
			t.Fatalf("anonymous: %v", err)
		}
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second}, sdk.WithIdempotencyKey("clients-create-1"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second}, sdk.WithIdempotencyKey("clients-create-1"))
		if err != nil || again.ID != sb.ID {
			t.Fatalf("idempotent replay: %v %v", again, err)
		}
		if _, err := sb.Python(ctx, "x = 41"); err != nil {
			t.Fatal(err)
		}
		r, err := sb.Python(ctx, "print(x + 1)")
		if err != nil || !r.Success || r.Output != "42" {
			t.Fatalf("state: %+v %v", r, err)
		}
		r, err = sb.Python(ctx, "1/0")
		if err != nil || r.Success || !strings.Contains(r.Error, "ZeroDivisionError") {
			t.Fatalf("raise: %+v %v", r, err)
		}
		sh, err := sb.ExecShell(ctx, sdk.ShellRequest{Command: "mkdir -p d && cd d && pwd && echo err >&2 && exit 3"})
		if err != nil || sh.ExitCode != 3 || sh.Output != "/workspace/d" || sh.Error != "err" {
			t.Fatalf("shell: %+v %v", sh, err)
		}
		if err := sb.WriteFile(ctx, "src/a.txt", "hello\n"); err != nil {
			t.Fatal(err)
		}
		if s, err := sb.ReadFile(ctx, "src/a.txt"); err != nil || s != "hello\n" {
			t.Fatalf("read: %q %v", s, err)
		}
		if _, err := sb.ReadFile(ctx, "../etc/passwd"); !sdk.IsCode(err, bayapi.CodeInvalidPath) {
			t.Fatalf("invalid path: %v", err)
		}
		// 8 MiB streamed upload and download.
		const size = 8 << 20
		up, err := sb.Upload(ctx, "big/blob.bin", sdktest.Pattern(size), size)
		if err != nil || up.Size != size {
			t.Fatalf("upload: %+v %v", up, err)
		}
		h := sha256.New()
		if n, err := sb.Download(ctx, "big/blob.bin", h); err != nil || n != size {
			t.Fatalf("download: %d %v", n, err)
		}
		want := sha256.New()
		io.Copy(want, sdktest.Pattern(size))
		if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
			t.Fatal("download differs from upload")
		}
		if _, err := sb.Download(ctx, "nope.bin", io.Discard); !sdk.IsCode(err, bayapi.CodeFileNotFound) {
			t.Fatalf("missing download: %v", err)
		}
		ents, err := sb.ListFiles(ctx, ".")
		if err != nil || len(ents) < 3 {
			t.Fatalf("ls: %+v %v", ents, err)
		}
		if err := sb.DeleteFile(ctx, "big"); err != nil {
			t.Fatal(err)
		}
		hist, err := sb.History(ctx, sdk.HistoryRequest{ExecType: "python"})
		if err != nil || hist.Total != 3 {
			t.Fatalf("history: %+v %v", hist, err)
		}
		last, err := c.LastExecution(ctx, sb.ID, "shell")
		if err != nil || !strings.Contains(last.Code, "mkdir") {
			t.Fatalf("last: %+v %v", last, err)
		}
		notes := "n1"
		if e, err := c.AnnotateExecution(ctx, sb.ID, last.ID, sdk.AnnotateRequest{Notes: &notes}); err != nil || e.Notes != "n1" {
			t.Fatalf("annotate: %v", err)
		}
		if e, err := c.GetExecution(ctx, sb.ID, last.ID); err != nil || e.ID != last.ID {
			t.Fatalf("get exec: %v", err)
		}
		if err := sb.ExtendTTL(ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := sb.Keepalive(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.Refresh(ctx); err != nil || sb.Status != bayapi.StatusReady {
			t.Fatalf("refresh: %v %v", sb.Status, err)
		}
		cargo, err := c.CreateCargo(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetCargo(ctx, cargo.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteCargo(ctx, cargo.ID); err != nil {
			t.Fatal(err)
		}
		if p, err := c.ListProfiles(ctx, true); err != nil || len(p.Items) != 1 {
			t.Fatalf("profiles: %v", err)
		}
		if _, err := c.GCStatus(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetSandbox(ctx, sb.ID); !sdk.IsNotFound(err) {
			t.Fatalf("deleted: %v", err)
		}
	})

	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("cli", func(t *testing.T) {
		if r := runReal(t, url, "", "python", sb.ID, "print(6*7)"); r.code != 0 || r.stdout != "42\n" {
			t.Fatalf("python: %+v", r)
		}
		if r := runReal(t, url, "import sys\nraise KeyError('k')", "python", sb.ID, "-"); r.code != 1 || !strings.Contains(r.stderr, "KeyError") {
			t.Fatalf("python raise: %+v", r)
		}
		if r := runReal(t, url, "echo out; echo err >&2; exit 5", "shell", sb.ID); r.code != 5 || r.stdout != "out\n" || r.stderr != "err\n" {
			t.Fatalf("shell: %+v", r)
		}
		local := filepath.Join(t.TempDir(), "in.bin")
		data := bytes.Repeat([]byte("\x00\xffabc\n"), 50000)
		os.WriteFile(local, data, 0o644)
		if r := runReal(t, url, "", "fs", "put", sb.ID, local, "up/in.bin"); r.code != 0 {
			t.Fatalf("put: %+v", r)
		}
		if r := runReal(t, url, "", "fs", "cat", sb.ID, "up/in.bin"); r.code != 0 || r.stdout != string(data) {
			t.Fatalf("cat: %d %d bytes", r.code, len(r.stdout))
		}
		// Like cp: into an existing directory, or one named with a trailing slash, under the
		// file's own name.
		if r := runReal(t, url, "", "fs", "put", sb.ID, local, "up"); r.code != 0 || !strings.Contains(r.stdout, "uploaded up/in.bin") {
			t.Fatalf("put into an existing directory: %+v", r)
		}
		if r := runReal(t, url, "", "fs", "put", sb.ID, local, "new/dir/"); r.code != 0 || !strings.Contains(r.stdout, "uploaded new/dir/in.bin") {
			t.Fatalf("put into dir/: %+v", r)
		}
		// Directories up and down.
		tree := filepath.Join(t.TempDir(), "proj")
		for name, body := range map[string]string{"a.txt": "A", "src/b.py": "print(1)", "src/deep/c.bin": string(data[:1000])} {
			os.MkdirAll(filepath.Dir(filepath.Join(tree, name)), 0o755)
			os.WriteFile(filepath.Join(tree, name), []byte(body), 0o644)
		}
		if r := runReal(t, url, "", "fs", "put", "-r", sb.ID, tree); r.code != 0 || !strings.Contains(r.stdout, "3 files") {
			t.Fatalf("put -r: %+v", r)
		}
		if r := runReal(t, url, "", "shell", sb.ID, "cd proj && find . -type f | sort && cat src/b.py"); r.code != 0 || r.stdout != "./a.txt\n./src/b.py\n./src/deep/c.bin\nprint(1)\n" {
			t.Fatalf("the uploaded tree: %+v", r)
		}
		back := filepath.Join(t.TempDir(), "back")
		if r := runReal(t, url, "", "fs", "get", "-r", sb.ID, "proj", back); r.code != 0 || !strings.Contains(r.stdout, "3 files") {
			t.Fatalf("get -r: %+v", r)
		}
		for name, want := range map[string]string{"a.txt": "A", "src/b.py": "print(1)", "src/deep/c.bin": string(data[:1000])} {
			if got, err := os.ReadFile(filepath.Join(back, name)); err != nil || string(got) != want {
				t.Errorf("downloaded %s: %q, %v", name, got, err)
			}
		}
		// Into an existing directory, like cp -r: under the remote directory's name.
		if r := runReal(t, url, "", "fs", "get", "-r", sb.ID, "proj", back); r.code != 0 {
			t.Fatalf("get -r into an existing directory: %+v", r)
		}
		if got, err := os.ReadFile(filepath.Join(back, "proj", "src", "b.py")); err != nil || string(got) != "print(1)" {
			t.Errorf("get -r into an existing directory: %q, %v", got, err)
		}
		if r := runReal(t, url, "", "sandbox", "get", sb.ID, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"status": "ready"`) {
			t.Fatalf("get: %+v", r)
		}
		if r := runReal(t, url, "", "fs", "cat", sb.ID, "missing"); r.code != 66 || !strings.Contains(r.stderr, "[file_not_found]") {
			t.Fatalf("missing: %+v", r)
		}
	})

	// A sandbox's network policy through the SDK and the CLI. The sandboxes here never start
	// compute (creates are lazy), so no policy network of the engine is involved: other test
	// bays on this engine may hold the gateway's ports.
	t.Run("network policy", func(t *testing.T) {
		none := sdk.NetworkPolicy{Mode: bayapi.NetworkNone}
		nsb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second, Network: &none})
		if err != nil || nsb.Network.Mode != bayapi.NetworkNone {
			t.Fatalf("create in mode none: %+v %v", nsb, err)
		}
		if err := nsb.SetNetwork(ctx, sdk.NetworkPolicy{Mode: bayapi.NetworkOpen}); err != nil || nsb.Network.Mode != bayapi.NetworkOpen {
			t.Fatalf("PATCH to open (the profile's ceiling): %+v %v", nsb.Network, err)
		}
		if _, err := c.SetNetwork(ctx, nsb.ID, sdk.NetworkPolicy{Mode: "closed"}); !sdk.IsCode(err, bayapi.CodeValidation) {
			t.Fatalf("an unknown mode: %v", err)
		}
		if _, err := c.SetNetwork(ctx, "sandbox-nope", sdk.NetworkPolicy{Mode: bayapi.NetworkNone}); !sdk.IsCode(err, bayapi.CodeNotFound) {
			t.Fatalf("an unknown sandbox: %v", err)
		}
		if ev, err := nsb.NetworkEvents(ctx); err != nil || ev.Denied != 0 || len(ev.Items) != 0 {
			t.Fatalf("events of a sandbox that never ran: %+v %v", ev, err)
		}

		if r := runReal(t, url, "", "sandbox", "network", nsb.ID, "--mode", "none"); r.code != 0 || r.stdout != nsb.ID+" none\n" {
			t.Fatalf("network --mode none: %+v", r)
		}
		if r := runReal(t, url, "", "sandbox", "get", nsb.ID); r.code != 0 || !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool {
			f := strings.Fields(l)
			return len(f) == 2 && f[0] == "network:" && f[1] == "none"
		}) {
			t.Fatalf("get shows the policy: %+v", r)
		}
		if r := runReal(t, url, "", "sandbox", "network", nsb.ID, "--mode", "open", "--allow", "example.com"); r.code != 64 || !strings.Contains(r.stderr, "need --mode allowlist") {
			t.Fatalf("--allow with mode open: %+v", r)
		}
		if r := runReal(t, url, "", "sandbox", "network", nsb.ID, "--mode", "sideways"); r.code != 64 {
			t.Fatalf("an unknown mode: %+v", r)
		}
		r := runReal(t, url, "", "sandbox", "create", "--network", "none")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("create --network none: %+v", r)
		}
		if r := runReal(t, url, "", "sandbox", "network", id); r.code != 0 || r.stdout != id+" none\n" {
			t.Fatalf("network of the created sandbox: %+v", r)
		}
		if r := runReal(t, url, "", "sandbox", "network-events", id); r.code != 0 || !strings.Contains(r.stdout, "TIME") || !strings.Contains(r.stdout, "(0 refused in all)") {
			t.Fatalf("network-events: %+v", r)
		}
		for _, del := range []string{nsb.ID, id} {
			if err := c.DeleteSandbox(ctx, del); err != nil {
				t.Error(err)
			}
		}
	})

	// The CLI's JSON is bay's answer, also where the real bay sends nulls the fake does not
	// (a job's history entry has no output; a ready sandbox has containers).
	t.Run("json", func(t *testing.T) {
		r := runReal(t, url, "", "job", "start", "--follow", sb.ID, "echo hi; exit 2")
		if r.code != 2 {
			t.Fatalf("job: %+v", r)
		}
		r = runReal(t, url, "", "job", "ls", sb.ID, "-o", "json")
		var jobs bayapi.JobList
		if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs.Items) == 0 {
			t.Fatalf("job ls: %+v %v", r, err)
		}
		job := jobs.Items[0].JobID
		checkJSONIsAnswer(t, url, realAPIKey, func(args ...string) result { return runReal(t, url, "", args...) }, []jsonCase{
			{[]string{"sandbox", "get", sb.ID}, "/v1/sandboxes/" + sb.ID},
			{[]string{"sandbox", "network-events", sb.ID}, "/v1/sandboxes/" + sb.ID + "/network/events"},
			{[]string{"history", sb.ID, "--last"}, "/v1/sandboxes/" + sb.ID + "/history/last"},
			{[]string{"history", sb.ID}, "/v1/sandboxes/" + sb.ID + "/history"},
			{[]string{"job", "ls", sb.ID}, "/v1/sandboxes/" + sb.ID + "/jobs"},
			{[]string{"job", "status", sb.ID, job}, "/v1/sandboxes/" + sb.ID + "/jobs/" + job},
			{[]string{"fs", "ls", sb.ID, "proj"}, "/v1/sandboxes/" + sb.ID + "/filesystem/directories?path=proj"},
			{[]string{"profiles", "--detail"}, "/v1/profiles?detail=true"},
			{[]string{"cargo", "list", "--managed"}, "/v1/cargos?managed=true"},
		})
	})

	t.Run("term", func(t *testing.T) {
		master, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer master.Close()
		defer tty.Close()
		pty.Setsize(tty, &pty.Winsize{Cols: 100, Rows: 30})
		before, _ := term.GetState(int(tty.Fd()))
		cmd := exec.Command(binary, "term", sb.ID)
		cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+url, "SHIPYARD_TOKEN="+realAPIKey)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		out := newPTYReader(master)
		master.Write([]byte("echo $((6*7))XY\r"))
		out.waitFor(t, "42XY")
		out.waitFor(t, "$ ")
		master.Write([]byte("stty size\r"))
		out.waitFor(t, "30 100")
		out.waitFor(t, "$ ")
		pty.Setsize(tty, &pty.Winsize{Cols: 132, Rows: 43})
		// The resize reaches the remote PTY asynchronously: ask until it shows, one command
		// at a time (each waits for its own end marker and the next prompt).
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			marker := fmt.Sprintf("END%d", i)
			master.Write([]byte("stty size; echo " + marker + "\r"))
			out.waitFor(t, "echo "+marker) // the echoed command line
			got := out.until(t, "\n"+marker)
			out.waitFor(t, "$ ")
			if strings.Contains(got, "43 132") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("resize not applied; last stty size: %q", got)
			}
		}
		master.Write([]byte{0x04})
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("term exit: %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("term did not end after Ctrl-D; pending output %q", out.buf)
		}
		after, _ := term.GetState(int(tty.Fd()))
		if !reflect.DeepEqual(before, after) {
			t.Fatal("terminal not restored")
		}
		// The remote shell's exit status is the command's.
		if r := runReal(t, url, "exit 3\n", "term", sb.ID); r.code != 3 {
			t.Fatalf("term ended by exit 3: %+v", r)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		cmd := exec.Command(binary, "mcp")
		cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+url, "SHIPYARD_TOKEN="+realAPIKey)
		cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
		s, err := cl.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "execute_python", Arguments: map[string]any{"sandbox_id": sb.ID, "code": "print('via mcp')"}})
		if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcpsdk.TextContent).Text, "via mcp") {
			t.Fatalf("%v %+v", err, res)
		}
		res, err = s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"sandbox_id": sb.ID, "path": "nope.txt"}})
		if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcpsdk.TextContent).Text, "**API Error:** [") {
			t.Fatalf("%v %+v", err, res)
		}
	})

	t.Run("mcp over http with the caller's key", func(t *testing.T) {
		h := mcp.NewHTTPHandler(mcp.LoopbackClients(func() string { return strings.TrimPrefix(url, "http://") }), mcp.DefaultOptions())
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		for _, tc := range []struct {
			token, want string
		}{{realAPIKey, "**Execution successful**"}, {"", "**API Error:** [unauthorized]"}, {"wrong", "**API Error:** [unauthorized] Invalid API key"}} {
			cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
			s, err := cl.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT(tc.token)}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "execute_python", Arguments: map[string]any{"sandbox_id": sb.ID, "code": "print(1)"}})
			if err != nil || !strings.HasPrefix(res.Content[0].(*mcpsdk.TextContent).Text, tc.want) {
				t.Fatalf("token %q: %v %+v", tc.token, err, res.Content)
			}
		}
	})
}

// until reads until want and returns what came before it.
func (r *ptyReader) until(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !bytes.Contains(r.buf, []byte(want)) {
		select {
		case b, ok := <-r.ch:
			if !ok {
				t.Fatalf("pty closed waiting for %q; got %q", want, r.buf)
			}
			r.buf = append(r.buf, b...)
		case <-deadline:
			t.Fatalf("no %q in %q", want, r.buf)
		}
	}
	i := bytes.Index(r.buf, []byte(want))
	before := string(r.buf[:i])
	r.buf = r.buf[i+len(want):]
	return before
}

type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b != "" {
		r.Header.Set("Authorization", "Bearer "+string(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}
