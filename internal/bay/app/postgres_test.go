package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// syncBuffer is a log sink shared by a bay's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startBay runs a whole bay on 127.0.0.1:0 with database.url set to url (the fake driver: a
// lazy create starts no container) and returns its base URL; it stops when t ends.
func startBay(t *testing.T, url, instance string, logs io.Writer) string {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Database.URL = url
	cfg.Database.PoolSize = 4
	cfg.Security.APIKey = "sk-test"
	cfg.GC.RunOnStartup = false
	cfg.GC.InstanceID = instance
	cfg.WarmPool.RunOnStartup = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := &app.Main{
		Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + t.TempDir()},
		Driver: fake.New(), Version: "test",
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bay %s: run: %v", instance, err)
		}
	})
	select {
	case <-m.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("bay %s: run: %v", instance, err)
	}
	return "http://" + m.ListenAddr()
}

// call makes an authenticated request; headers are extra "Name", "value" pairs.
func call(t *testing.T, method, url, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return res.StatusCode, v
}

// TestBayOnPostgres runs two bays on one real PostgreSQL database (the URL carries a
// password, the postgresql+asyncpg:// form of the reference): a sandbox created through one
// is listed and read through the other, the rows are in the server, and no log line shows the
// password.
func TestBayOnPostgres(t *testing.T) {
	const secret = "pg-s3cret-Pw"
	url := strings.Replace(pgtest.NewDatabase(t), "postgres:///", "postgresql+asyncpg://bay:"+secret+"@/", 1)
	var logs syncBuffer
	a := startBay(t, url, "bay-a", &logs)
	b := startBay(t, url, "bay-b", &logs)

	st, v := call(t, "POST", a+"/v1/sandboxes", `{"profile":"python-default","ttl":600}`)
	if st != 201 {
		t.Fatalf("create on bay-a: %d %v", st, v)
	}
	id, _ := v["id"].(string)
	if id == "" || v["status"] != "idle" {
		t.Fatalf("create: %v", v)
	}
	st, v = call(t, "GET", b+"/v1/sandboxes", "")
	items, _ := v["items"].([]any)
	if st != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("list on bay-b: %d %v", st, v)
	}
	if st, v := call(t, "GET", b+"/v1/sandboxes/"+id, ""); st != 200 || v["id"] != id {
		t.Fatalf("get on bay-b: %d %v", st, v)
	}
	// An idempotent create replayed on the other bay returns the first response.
	st1, v1 := call(t, "POST", a+"/v1/sandboxes", `{}`, "Idempotency-Key", "create-once")
	st2, v2 := call(t, "POST", b+"/v1/sandboxes", `{}`, "Idempotency-Key", "create-once")
	if st1 != 201 || st2 != 201 || v1["id"] != v2["id"] {
		t.Fatalf("idempotent create across bays: %d %v / %d %v", st1, v1, st2, v2)
	}

	conn, err := pgx.Connect(t.Context(), strings.Replace(url, "postgresql+asyncpg://", "postgres://", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM sandboxes WHERE deleted_at IS NULL`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("sandboxes in the server: %d, %v", n, err)
	}
	if !strings.Contains(logs.String(), "postgres store open") {
		t.Fatalf("no store log line:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("a log line shows the database password:\n%s", logs.String())
	}
}

// TestBayRefusesUnreachablePostgres: a server that is not there fails the start with an error
// that names it without the password.
func TestBayRefusesUnreachablePostgres(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Database.URL = "postgresql://bay:hunter22@/bay?host=" + t.TempDir()
	cfg.Database.ConnectTimeout = 2 * time.Second
	cfg.Security.APIKey = "sk-test"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m := &app.Main{Config: cfg, Addr: "127.0.0.1:0", Driver: fake.New(), Env: []string{},
		Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	err := m.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "open database") {
		t.Fatalf("run: %v", err)
	}
	if strings.Contains(err.Error()+logs.String(), "hunter22") {
		t.Fatalf("password shown: %v\n%s", err, logs.String())
	}
}
