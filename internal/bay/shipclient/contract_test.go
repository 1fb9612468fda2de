package shipclient_test

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
)

// The ship stub stands in for ship in the tests of bay's services: this contract holds it to
// the real ship on every point those tests rely on (the runtime token, meta, files, errors,
// exec shapes, the terminal), so that a service test passing against the stub means something.
func TestContract(t *testing.T) {
	const token = "contract-token"
	t.Run("real ship", func(t *testing.T) {
		ep, _ := startShipToken(t, token)
		runContract(t, ep, token)
	})
	t.Run("stub", func(t *testing.T) {
		s := shipstub.New()
		t.Cleanup(s.Close)
		s.Token = token
		runContract(t, s.URL(), token)
	})
}

func runContract(t *testing.T, ep, token string) {
	ctx := context.Background()
	c := shipclient.New(nil, nil)
	u, _ := url.Parse(ep)
	u.User = url.UserPassword(bay.RuntimeUserName, token)
	authed := u.String()
	u.User = url.UserPassword(bay.RuntimeUserName, "wrong")
	wrong := u.String()

	if err := c.Health(ctx, ep); err != nil {
		t.Fatalf("health without a token: %v (bay's readiness probe sends none)", err)
	}
	for name, e := range map[string]string{"no token": ep, "wrong token": wrong} {
		if _, err := c.Meta(ctx, e); err == nil {
			t.Errorf("meta with %s answered", name)
		}
		if _, err := c.ExecShell(ctx, e, shipapi.ExecShellRequest{Command: "true"}); err == nil {
			t.Errorf("shell with %s answered", name)
		}
		if conn, err := c.DialTerminal(ctx, e, 80, 24); err == nil {
			conn.CloseNow()
			t.Errorf("terminal with %s opened", name)
		}
	}

	m, err := c.Describe(ctx, authed)
	if err != nil || m.Name != "ship" || m.Version == "" {
		t.Fatalf("describe: %+v, %v", m, err)
	}
	for _, capability := range []string{"filesystem", "python", "shell"} {
		if !slices.Contains(m.Capabilities, capability) {
			t.Errorf("capabilities %v lack %s", m.Capabilities, capability)
		}
	}

	if _, err := c.WriteFile(ctx, authed, "contract.txt", "hello"); err != nil {
		t.Fatal(err)
	}
	if r, err := c.ReadFile(ctx, authed, "contract.txt"); err != nil || r.Content != "hello" {
		t.Fatalf("read back: %+v, %v", r, err)
	}
	ls, err := c.ListDir(ctx, authed, ".", false)
	if err != nil || !slices.ContainsFunc(ls.Files, func(f shipapi.FileInfo) bool { return f.Name == "contract.txt" }) {
		t.Fatalf("list: %+v, %v", ls, err)
	}
	if err := c.DeleteFile(ctx, authed, "contract.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFile(ctx, authed, "contract.txt"); code(err) != bay.CodeFileNotFound {
		t.Errorf("read of a deleted file: %v, want file_not_found", err)
	}
	if err := c.DeleteFile(ctx, authed, "contract.txt"); code(err) != bay.CodeFileNotFound {
		t.Errorf("delete of a missing file: %v, want file_not_found", err)
	}
	if _, _, err := c.Download(ctx, authed, "contract.txt"); code(err) != bay.CodeFileNotFound {
		t.Errorf("download of a missing file: %v, want file_not_found", err)
	}

	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	if up, err := c.Upload(ctx, authed, "up.bin", bytes.NewReader(data)); err != nil || up.Size != int64(len(data)) {
		t.Fatalf("upload: %+v, %v", up, err)
	}
	rc, _, err := c.Download(ctx, authed, "up.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("download: %d bytes, want the %d uploaded", len(got), len(data))
	}

	to := 10
	sh, err := c.ExecShell(ctx, authed, shipapi.ExecShellRequest{Command: "true", Timeout: &to})
	if err != nil || !sh.Success || sh.ReturnCode != 0 {
		t.Fatalf("shell: %+v, %v", sh, err)
	}
	py, err := c.ExecPython(ctx, authed, shipapi.ExecPythonRequest{Code: "1", Timeout: 30})
	if err != nil || !py.Success || py.ExecutionCount == nil || py.Output.Images == nil {
		t.Fatalf("python: %+v, %v", py, err)
	}

	conn, err := c.DialTerminal(ctx, authed, 80, 24)
	if err != nil {
		t.Fatalf("terminal: %v", err)
	}
	defer conn.CloseNow()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.Write(rctx, websocket.MessageBinary, []byte("echo contract\n")); err != nil {
		t.Fatalf("terminal write: %v", err)
	}
	if _, b, err := conn.Read(rctx); err != nil || len(b) == 0 {
		t.Fatalf("terminal read: %q, %v", b, err)
	}
}
