package pgtest

import (
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestNewDatabase starts the real cluster, and checks that each test database is separate and
// that the server runs with the settings the helper promises.
func TestNewDatabase(t *testing.T) {
	ctx := t.Context()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE x (v int)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("table of database a visible in b: %d, %v", n, err)
	}
	for setting, want := range map[string]string{"fsync": "off", "listen_addresses": "", "server_encoding": "UTF8"} {
		var got string
		if err := ca.QueryRow(ctx, `SELECT current_setting($1)`, setting).Scan(&got); err != nil || got != want {
			t.Fatalf("%s = %q (%v), want %q", setting, got, err, want)
		}
	}
}

// TestStartStop checks that a cluster runs unprivileged and leaves nothing behind.
func TestStartStop(t *testing.T) {
	c, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(c.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Fatalf("data directory owned by root: the server must run unprivileged")
	}
	if err := c.Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	pid := c.cmd.Process.Pid
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory left behind: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("postgres %d still running after Stop", pid)
	}
}
