// Package pgtest runs a real PostgreSQL server for the tests of one test binary: Debian's
// PostgreSQL (initdb, postgres) in a temporary directory, reachable only through a Unix socket
// in that directory, with fsync off. Each test gets a database of its own.
//
// Use it from TestMain, which owns the cluster's life:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and in a test:
//
//	url := pgtest.NewDatabase(t) // postgres:///test_7?host=/tmp/pgtest-123/run&user=bay
//
// The cluster starts on the first NewDatabase (a binary whose tests never ask for one pays
// nothing) and is stopped and removed when Main returns. Missing PostgreSQL binaries fail the
// test: they are installed by scripts/install-deps.sh.
//
// initdb refuses to run as root. Under root (CI), the server runs as the unprivileged
// "postgres" system user the Debian package creates; the temporary directory is handed to it.
// Otherwise it runs as the current user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvBinDir names a directory holding initdb and postgres, overriding the search of
// /usr/lib/postgresql/<version>/bin (the newest version found is used).
const EnvBinDir = "PGTEST_BIN_DIR"

// Superuser is the cluster's bootstrap role; tests connect as it.
const Superuser = "bay"

// Cluster is one running server.
type Cluster struct {
	dir     string // temporary root, removed by Stop
	dataDir string
	sockDir string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	log     string // server log file
	version string
}

var (
	mainCalled atomic.Bool
	startOnce  sync.Once
	shared     *Cluster
	startErr   error
	dbSeq      atomic.Int64
)

// Main runs the tests of m and stops the cluster if one was started. Call it from TestMain.
func Main(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Shared returns the test binary's cluster, starting it on first use. It fails t when
// PostgreSQL cannot be started (missing binaries included).
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main (it stops the cluster)")
	}
	startOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared, startErr = Start(ctx)
	})
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	return shared
}

// NewDatabase creates an empty database on the shared cluster for t, drops it when t ends,
// and returns its postgres:// URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	c := Shared(t)
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := c.Exec(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c.URL(name)
}

// URL returns the postgres:// URL of database db on this cluster (Unix socket, superuser).
func (c *Cluster) URL(db string) string {
	q := url.Values{"host": {c.sockDir}, "port": {strconv.Itoa(c.port)}, "user": {Superuser}}
	return "postgres:///" + url.PathEscape(db) + "?" + q.Encode()
}

// SocketDir is the directory of the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.sockDir }

// Port is the number in the socket's name (the server listens on no TCP port).
func (c *Cluster) Port() int { return c.port }

// Version is the server's major version directory name ("15").
func (c *Cluster) Version() string { return c.version }

// Exec runs one statement on the "postgres" maintenance database.
func (c *Cluster) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to test cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// binDir finds the directory of initdb and postgres.
func binDir() (dir, version string, err error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, filepath.Base(filepath.Dir(d)), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", "", errors.New("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin " +
			"(install Debian's postgresql package: scripts/install-deps.sh)")
	}
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi > vj
	})
	d := filepath.Dir(matches[0])
	return d, filepath.Base(filepath.Dir(d)), nil
}

// runAs returns the credential to run the server with: none (the current user) unless the
// process is root, then the "postgres" system user.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no unprivileged postgres user to run the server as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// traversable reports whether every directory from / to dir lets others through (o+x), so
// that the server's unprivileged user can reach a directory created inside it.
func traversable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// Start creates and starts a new cluster in a temporary directory. The caller must Stop it.
func Start(ctx context.Context) (c *Cluster, err error) {
	bin, version, err := binDir()
	if err != nil {
		return nil, err
	}
	for _, exe := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, exe)); err != nil {
			return nil, fmt.Errorf("postgresql binary: %w", err)
		}
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	base := os.TempDir()
	if cred != nil && !traversable(base) {
		base = "/tmp" // a private $TMPDIR (0700 under /root) is closed to the server's user
	}
	dir, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{dir: dir, dataDir: filepath.Join(dir, "data"), sockDir: filepath.Join(dir, "run"),
		log: filepath.Join(dir, "server.log"), version: version, port: 5432}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		// The server's user owns the whole directory; the test (root) reaches the socket anyway.
		for _, p := range []string{dir, c.sockDir} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("hand %s to the postgres user: %w", p, err)
			}
		}
	}
	env := []string{"LC_ALL=C.UTF-8", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "HOME=" + dir, "TZ=UTC"}
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()

	// Trust authentication is safe here: the only way in is the socket in a directory only the
	// server's user (and root) can enter.
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "--no-sync", "--no-instructions",
		"-D", c.dataDir, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
	initdb.Dir, initdb.Env, initdb.Stdout, initdb.Stderr = dir, env, logf, logf
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := initdb.Run(); err != nil {
		return nil, fmt.Errorf("initdb: %w; log:\n%s", err, c.tail())
	}

	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", c.dataDir, "-p", strconv.Itoa(c.port),
		"-k", c.sockDir, "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	c.cmd.Dir, c.cmd.Env, c.cmd.Stdout, c.cmd.Stderr = dir, env, logf, logf
	// Pdeathsig: a test binary killed without running Main's cleanup takes the server along.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c.exited = make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// waitReady polls the socket until the server accepts a connection.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited while starting: %v; log:\n%s", c.cmd.ProcessState, c.tail())
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w (last: %v); log:\n%s", ctx.Err(), err, c.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tail returns the end of the server log.
func (c *Cluster) tail() string {
	b, _ := os.ReadFile(c.log)
	s := string(b)
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return strings.TrimSpace(s)
}

// Stop shuts the server down (fast shutdown: sessions are ended) and removes its directory.
func (c *Cluster) Stop() error {
	var errs []error
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
			errs = append(errs, errors.New("postgres did not stop within 30s: killed"))
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
