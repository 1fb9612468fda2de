package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEnvOverridesFile(t *testing.T) {
	file := `
server: {port: 9000}
database: {url: "sqlite:///file.db"}
gc: {instance_id: from-file, enabled: true}
security: {allow_anonymous: true}
`
	c := mustLoad(t, file,
		"BAY_SERVER__PORT=9100",
		"BAY_DATABASE__URL=postgresql+asyncpg://u:p@db:5432/bay",
		"BAY_GC__INSTANCE_ID=from-env",
		"bay_gc__enabled=false", // case-insensitive
		"BAY_SECURITY__ALLOW_ANONYMOUS=False",
		"BAY_DRIVER__DOCKER__CONNECT_MODE=host_port",
		"BAY_BROWSER_AUTO_RELEASE_ENABLED=0",
		"BAY_GC__INTERVAL_SECONDS=90",
		"BAY_WARM_POOL__INTERVAL_SECONDS=1m30s",
		"BAY_BROWSER_LEARNING__SCORE_THRESHOLD=0.5",
		"BAY_SECURITY__BLOCKED_HOSTS=[\"1.2.3.4/32\"]",
		"BAY_CARGO__MAX_UPLOAD_BYTES=512m",
		"BAY_SERVER__HOST=0.0.0.0",
		"BAY_IMAGES__BUILD_MISSING=true",
		"BAY_API_KEY=ignored-here", "BAY_DATA_DIR=/x", "BAY_CONFIG_FILE=", // read directly, not keys
		"HOSTNAME=host-1", "PATH=/bin",
	)
	checks := []struct {
		name      string
		got, want any
	}{
		{"port", c.Server.Port, 9100},
		{"host", c.Server.Host, "0.0.0.0"},
		{"url", c.Database.URL, "postgresql+asyncpg://u:p@db:5432/bay"},
		{"instance", c.InstanceID(), "from-env"},
		{"gc enabled", c.GC.Enabled, false},
		{"anonymous", c.Security.AllowAnonymous, false},
		{"connect mode", c.Driver.Docker.ConnectMode, "host_port"},
		{"auto release", c.BrowserAutoReleaseEnabled, false},
		{"gc interval", c.GC.Interval, 90 * time.Second},
		{"warm interval", c.WarmPool.Interval, 90 * time.Second},
		{"score", c.BrowserLearning.ScoreThreshold, 0.5},
		{"blocked", c.Security.BlockedHosts, []string{"1.2.3.4/32"}},
		{"upload", c.Cargo.MaxUploadBytes, ByteSize(512 << 20)},
		{"build missing", c.Images.BuildMissing, true},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
	if dsn, ok := c.Database.PostgresDSN(); !ok || dsn != "postgresql://u:p@db:5432/bay" {
		t.Errorf("dsn %q %v", dsn, ok)
	}
}

func TestEnvBeatsExplicitNullInFile(t *testing.T) {
	// The reference lets `instance_id: null` in YAML beat the env var; we do not.
	c := mustLoad(t, "gc:\n  instance_id: null\n", "BAY_GC__INSTANCE_ID=env-id")
	if c.InstanceID() != "env-id" {
		t.Errorf("instance id %q", c.InstanceID())
	}
}

func TestEnvJSONBlocksAndSpecificVarsWin(t *testing.T) {
	c := mustLoad(t, "",
		`BAY_GC={"enabled": false, "interval_seconds": 10, "orphan_container": {"enabled": true, "dry_run": true}}`,
		"BAY_GC__INTERVAL_SECONDS=20",
	)
	if c.GC.Enabled || c.GC.Interval != 20*time.Second || !c.GC.OrphanContainer.Enabled || !c.GC.OrphanContainer.DryRun ||
		c.GC.OrphanContainer.Grace != 300*time.Second || !c.GC.IdleSession.Enabled {
		t.Errorf("gc = %+v", c.GC)
	}
}

func TestEnvProfilesJSON(t *testing.T) {
	c := mustLoad(t, "profiles: [{id: from-file}]\n",
		`BAY_PROFILES=[{"id":"p","image":"ship:test","warm_pool_size":2,"resources":{"cpus":0.5,"memory":"256m"}}]`)
	if len(c.Profiles) != 1 || c.Profiles[0].ID != "p" || c.Profiles[0].WarmPoolSize != 2 {
		t.Fatalf("profiles %+v", c.Profiles)
	}
	pc := c.Profiles[0].Primary()
	if pc.Image != "ship:test" || pc.Resources.MemoryBytes != 256<<20 || pc.Resources.CPUs != 0.5 ||
		c.Profiles[0].IdleTimeout != 1800*time.Second {
		t.Errorf("primary %+v", pc)
	}
}

func TestEnvErrors(t *testing.T) {
	cases := []struct {
		env  string
		want string
	}{
		{"BAY_GC__IDLE_SESION__ENABLED=true", `environment: BAY_GC__IDLE_SESION__ENABLED: unknown key "gc.idle_sesion.enabled" (did you mean "gc.idle_session"?)`},
		{"BAY_SERVR__PORT=1", `unknown key "servr.port" (did you mean "server"?)`},
		{"BAY_LOG_LEVEL=debug", `BAY_LOG_LEVEL: unknown key "log_level"`},
		{"BAY_SERVER__PORT__X=1", `"server.port" is not a section`},
		{"BAY_SERVER__PORT=eighty", `BAY_SERVER__PORT: server.port: expected an integer, got "eighty"`},
		{"BAY_GC__ENABLED=maybe", `gc.enabled: expected a boolean`},
		{"BAY_GC__ENABLED=", `BAY_GC__ENABLED (gc.enabled): empty value`},
		{"BAY_PROFILES=[{", `BAY_PROFILES (profiles): cannot parse value`},
		{`BAY_PROFILES=[{"id":"p","imag":"x"}]`, `BAY_PROFILES: unknown key "profiles[0].imag" (did you mean "profiles[0].image"?)`},
		{"BAY_PROFILES={}", `profiles: expected a list`},
		{"BAY_SERVER__PORT=0", `server.port: must be 1..65535`},
	}
	for _, tc := range cases {
		t.Run(tc.env, func(t *testing.T) {
			_, err := load(t, "", tc.env)
			wantErr(t, err, tc.want)
		})
	}
}

func TestEnvIgnoreList(t *testing.T) {
	c, err := Load(LoadOptions{Env: []string{"BAY_LOG_LEVEL=debug"}, SearchPaths: []string{}, IgnoreEnv: []string{"bay_log_level"}})
	if err != nil || c == nil {
		t.Fatal(err)
	}
}

func TestFileDiscovery(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte("server: {port: 1001}\n"), 0o600)
	os.WriteFile(b, []byte("server: {port: 1002}\n"), 0o600)
	missing := filepath.Join(dir, "missing.yaml")

	t.Run("BAY_CONFIG_FILE wins over search paths", func(t *testing.T) {
		c, err := Load(LoadOptions{Env: []string{"BAY_CONFIG_FILE=" + b}, SearchPaths: []string{a}})
		if err != nil || c.Server.Port != 1002 || c.File != b {
			t.Fatalf("%v %+v", err, c)
		}
	})
	t.Run("opts.File wins over BAY_CONFIG_FILE", func(t *testing.T) {
		c, err := Load(LoadOptions{File: a, Env: []string{"BAY_CONFIG_FILE=" + b}})
		if err != nil || c.Server.Port != 1001 {
			t.Fatalf("%v %+v", err, c)
		}
	})
	t.Run("missing BAY_CONFIG_FILE is an error", func(t *testing.T) {
		_, err := Load(LoadOptions{Env: []string{"BAY_CONFIG_FILE=" + missing}, SearchPaths: []string{a}})
		wantErr(t, err, "BAY_CONFIG_FILE="+missing, "no such file")
	})
	t.Run("missing opts.File is an error", func(t *testing.T) {
		_, err := Load(LoadOptions{File: missing, Env: []string{}})
		wantErr(t, err, missing)
	})
	t.Run("first existing search path", func(t *testing.T) {
		c, err := Load(LoadOptions{Env: []string{}, SearchPaths: []string{missing, b, a}})
		if err != nil || c.Server.Port != 1002 {
			t.Fatalf("%v %+v", err, c)
		}
	})
	t.Run("none found: defaults", func(t *testing.T) {
		c, err := Load(LoadOptions{Env: []string{}, SearchPaths: []string{missing}})
		if err != nil || c.File != "" || c.Server.Port != 8114 {
			t.Fatalf("%v %+v", err, c)
		}
	})
	t.Run("./config.yaml in the working directory", func(t *testing.T) {
		t.Chdir(dir)
		os.WriteFile("config.yaml", []byte("server: {port: 1003}\n"), 0o600)
		c, err := Load(LoadOptions{Env: []string{}})
		if err != nil || c.Server.Port != 1003 || c.File != "config.yaml" {
			t.Fatalf("%v %+v", err, c)
		}
	})
	t.Run("error names the file", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		os.WriteFile(bad, []byte("gc:\n  idle_sesion: {}\n"), 0o600)
		_, err := Load(LoadOptions{File: bad, Env: []string{}})
		wantErr(t, err, bad+`:2: unknown key "gc.idle_sesion" (did you mean "gc.idle_session"?)`)
	})
}

func TestYAMLAnchorsAndMergeKeys(t *testing.T) {
	c := mustLoad(t, `
profiles:
  - &base
    id: a
    resources: &res {cpus: 0.5, memory: 512m}
    warm_pool_size: 3
  - id: b
    <<: *base
  - id: c
    resources: *res
`)
	for _, id := range []string{"a", "b", "c"} {
		p, ok := c.Profile(id)
		if !ok || p.Primary().Resources.MemoryBytes != 512<<20 {
			t.Errorf("%s: %+v", id, p)
		}
	}
	if p, _ := c.Profile("b"); p.WarmPoolSize != 3 {
		t.Errorf("merge key: warm %d", p.WarmPoolSize)
	}
}

func TestSizes(t *testing.T) {
	cases := map[string]int64{
		"1048576": 1 << 20, "1k": 1 << 10, "1K": 1 << 10, "512m": 512 << 20, "1g": 1 << 30, "1G": 1 << 30,
		"2Gi": 2 << 30, "1GB": 1 << 30, "1.5g": 3 << 29, "1t": 1 << 40, "0": 0, " 4g ": 4 << 30, "100b": 100,
	}
	for in, want := range cases {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "g", "-1g", "1x", "lots", "1e400"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", bad)
		}
	}
	c := mustLoad(t, "profiles: [{id: a, resources: {memory: 1073741824}}]\n")
	if c.Profiles[0].Primary().Resources.MemoryBytes != 1<<30 {
		t.Errorf("memory as a YAML int: %+v", c.Profiles[0].Primary().Resources)
	}
}

func TestDatabaseURLs(t *testing.T) {
	cases := []struct {
		url, dialect, path string
	}{
		{"sqlite+aiosqlite:///./bay.db", DialectSQLite, "./bay.db"},
		{"sqlite:///bay.db", DialectSQLite, "bay.db"},
		{"sqlite:////var/lib/bay/bay.db", DialectSQLite, "/var/lib/bay/bay.db"},
		{"sqlite:///:memory:", DialectSQLite, ":memory:"},
		{"postgresql+asyncpg://u@h/db", DialectPostgres, ""},
		{"postgres://u@h/db?sslmode=disable", DialectPostgres, ""},
		{"sqlite://", DialectSQLite, ":memory:"},
		{"./data/bay.db", DialectSQLite, "./data/bay.db"},
		{"/var/lib/bay.db", DialectSQLite, "/var/lib/bay.db"},
	}
	for _, tc := range cases {
		c := mustLoad(t, "database: {url: '"+tc.url+"'}\n")
		d, _ := c.Database.Dialect()
		p, _ := c.Database.SQLitePath()
		if d != tc.dialect || p != tc.path {
			t.Errorf("%s: dialect %q path %q", tc.url, d, p)
		}
	}
	for _, bad := range []string{"sqlite:///", "sqlite:///x.db?mode=ro", "sqlite://host/x.db"} {
		_, err := load(t, "database: {url: '"+bad+"'}\n")
		wantErr(t, err, "database.url")
	}
}

func TestDatabasePool(t *testing.T) {
	c := mustLoad(t, "")
	if c.Database.PoolSize != 10 || c.Database.ConnectTimeout != 10*time.Second {
		t.Fatalf("defaults: pool_size %d, connect_timeout %v", c.Database.PoolSize, c.Database.ConnectTimeout)
	}
	c = mustLoad(t, "database: {pool_size: 40, connect_timeout_seconds: 3}\n")
	if c.Database.PoolSize != 40 || c.Database.ConnectTimeout != 3*time.Second {
		t.Fatalf("set: pool_size %d, connect_timeout %v", c.Database.PoolSize, c.Database.ConnectTimeout)
	}
	c = mustLoad(t, "", "BAY_DATABASE__POOL_SIZE=5")
	if c.Database.PoolSize != 5 {
		t.Fatalf("env: pool_size %d", c.Database.PoolSize)
	}
	for _, bad := range []string{"{pool_size: 1}", "{pool_size: 1001}", "{pool_size: -3}",
		"{connect_timeout_seconds: 0}", "{connect_timeout_seconds: 301}"} {
		_, err := load(t, "database: "+bad+"\n")
		wantErr(t, err, "database.")
	}
	// A malformed PostgreSQL URL is refused without repeating it (it may carry a password).
	_, err := load(t, "database: {url: 'postgresql://bay:hunter22@[::1/bay'}\n")
	wantErr(t, err, "database.url", "not a valid postgresql:// URL")
	if strings.Contains(err.Error(), "hunter22") {
		t.Fatalf("error repeats the password: %v", err)
	}
}

func TestSocketNormalised(t *testing.T) {
	c := mustLoad(t, "driver: {docker: {socket: /run/docker.sock}}\n")
	if c.Driver.Docker.Socket != "unix:///run/docker.sock" {
		t.Errorf("socket %q", c.Driver.Docker.Socket)
	}
	c = mustLoad(t, "driver: {docker: {socket: 'tcp://127.0.0.1:2375'}}\n")
	if !strings.HasPrefix(c.Driver.Docker.Socket, "tcp://") {
		t.Errorf("socket %q", c.Driver.Docker.Socket)
	}
}

func TestOurAdditions(t *testing.T) {
	c := mustLoad(t, `
security:
  api_keys:
    - {key: "sk-alice", owner: alice}
    - {key_sha256: "`+strings.Repeat("AB", 32)+`", owner: bob}
    - {key: "sk-default"}
  revoke_unlisted_keys: true
gc:
  orphan_container: {enabled: true, grace_seconds: 60, dry_run: true}
cargo: {max_upload_bytes: 1g}
session: {readiness_timeout_seconds: 30}
skills: {root_path: /srv/skills}
profiles:
  - id: p
    skills: [pdf, docx]
    pids_limit: 512
`)
	if len(c.Security.APIKeys) != 3 || c.Security.APIKeys[1].Owner != "bob" || !c.Security.RevokeUnlistedKeys {
		t.Errorf("api keys %+v", c.Security)
	}
	if c.GC.OrphanContainer.Grace != time.Minute || !c.GC.OrphanContainer.DryRun {
		t.Errorf("orphan %+v", c.GC.OrphanContainer)
	}
	if c.Cargo.MaxUploadBytes != 1<<30 || c.Session.ReadinessTimeout != 30*time.Second || c.Skills.RootPath != "/srv/skills" {
		t.Errorf("cargo/session/skills %+v %+v %+v", c.Cargo, c.Session, c.Skills)
	}
	p, _ := c.Profile("p")
	if !reflect.DeepEqual(p.Skills, []string{"pdf", "docx"}) || p.PidsLimit != 512 {
		t.Errorf("profile %+v", p)
	}
}
