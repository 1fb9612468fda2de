package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// load writes yamlText (if non-empty) to a temp config file and loads it with env.
func load(t *testing.T, yamlText string, env ...string) (*Config, error) {
	t.Helper()
	opts := LoadOptions{Env: append([]string{}, env...), SearchPaths: []string{}}
	if yamlText != "" {
		f := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(f, []byte(yamlText), 0o600); err != nil {
			t.Fatal(err)
		}
		opts.File = f
	}
	return Load(opts)
}

func mustLoad(t *testing.T, yamlText string, env ...string) *Config {
	t.Helper()
	c, err := load(t, yamlText, env...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Load succeeded, want error containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q\ndoes not contain %q", err, s)
		}
	}
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, "")
	if c.File != "" {
		t.Errorf("File = %q, want none", c.File)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.host", c.Server.Host, "127.0.0.1"},
		{"server.port", c.Server.Port, 8114},
		{"database.url", c.Database.URL, "sqlite+aiosqlite:///./bay.db"},
		{"driver.type", c.Driver.Type, "docker"},
		{"driver.image_pull_policy", c.Driver.ImagePullPolicy, "if_not_present"},
		{"driver.docker.socket", c.Driver.Docker.Socket, "unix:///var/run/docker.sock"},
		{"driver.docker.connect_mode", c.Driver.Docker.ConnectMode, "auto"},
		{"driver.docker.image_cache", c.Driver.Docker.ImageCache, "auto"},
		{"driver.docker.host_address", c.Driver.Docker.HostAddress, "127.0.0.1"},
		{"driver.docker.publish_ports", c.Driver.Docker.PublishPorts, true},
		{"driver.docker.host_port", c.Driver.Docker.HostPort, 0},
		{"driver.k8s.namespace", c.Driver.K8s.Namespace, "bay"},
		{"driver.k8s.pod_startup_timeout", c.Driver.K8s.PodStartupTimeout, 60 * time.Second},
		{"driver.k8s.default_storage_size", c.Driver.K8s.DefaultStorageSize, "1Gi"},
		{"driver.k8s.label_prefix", c.Driver.K8s.LabelPrefix, "bay"},
		{"cargo.root_path", c.Cargo.RootPath, "/var/lib/bay/cargos"},
		{"cargo.default_size_limit_mb", c.Cargo.DefaultSizeLimitMB, 1024},
		{"cargo.mount_path", c.Cargo.MountPath, "/workspace"},
		{"cargo.max_upload_bytes", c.Cargo.MaxUploadBytes, ByteSize(10 << 30)},
		{"security.allow_anonymous", c.Security.AllowAnonymous, false},
		{"security.api_key", c.Security.APIKey, ""},
		{"security.blocked_hosts", len(c.Security.BlockedHosts), len(netguard.DefaultBlocked)},
		{"security.allowed_hosts", len(c.Security.AllowedHosts), 0},
		{"security.sandbox_firewall", c.Security.SandboxFirewall, true},
		{"idempotency.enabled", c.Idempotency.Enabled, true},
		{"idempotency.ttl", c.Idempotency.TTL(), time.Hour},
		{"gc.enabled", c.GC.Enabled, true},
		{"gc.run_on_startup", c.GC.RunOnStartup, true},
		{"gc.interval_seconds", c.GC.Interval, 300 * time.Second},
		{"gc.idle_session", c.GC.IdleSession.Enabled, true},
		{"gc.expired_sandbox", c.GC.ExpiredSandbox.Enabled, true},
		{"gc.orphan_cargo", c.GC.OrphanCargo.Enabled, true},
		{"gc.orphan_container", c.GC.OrphanContainer.Enabled, false},
		{"gc.orphan_container.grace_seconds", c.GC.OrphanContainer.Grace, 300 * time.Second},
		{"warm_pool.enabled", c.WarmPool.Enabled, true},
		{"warm_pool.warmup_queue_workers", c.WarmPool.WarmupQueueWorkers, 2},
		{"warm_pool.warmup_queue_max_size", c.WarmPool.WarmupQueueMaxSize, 256},
		{"warm_pool.warmup_queue_drop_policy", c.WarmPool.WarmupQueueDropPolicy, "drop_newest"},
		{"warm_pool.interval_seconds", c.WarmPool.Interval, 30 * time.Second},
		{"browser_learning.batch_size", c.BrowserLearning.BatchSize, 20},
		{"browser_learning.score_threshold", c.BrowserLearning.ScoreThreshold, 0.85},
		{"browser_service.enabled", c.BrowserService.Enabled, false},
		{"browser_service.endpoint", c.BrowserService.Endpoint, "http://gull-service:8115"},
		{"browser_auto_release_enabled", c.BrowserAutoReleaseEnabled, true},
		{"proxy.enabled", c.Proxy.Enabled, false},
		{"proxy.default_no_proxy", c.Proxy.DefaultNoProxy, DefaultNoProxy},
		{"session.readiness_timeout_seconds", c.Session.ReadinessTimeout, 60 * time.Second},
		{"reuse.reuse_mode", c.Reuse.Mode, ReuseProjectAgent},
		{"reuse.idle_ttl_sec", c.Reuse.IdleTTL, 1800 * time.Second},
		{"reuse.hard_ttl_sec", c.Reuse.HardTTL, 21600 * time.Second},
		{"reuse.lock_timeout_sec", c.Reuse.LockTimeout, 600 * time.Second},
		{"instance id", c.InstanceID(), "bay"},
		{"profiles", len(c.Profiles), 3},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
	p, ok := c.Profile("python-data")
	if !ok {
		t.Fatal("python-data missing")
	}
	pc := p.Primary()
	if pc.Name != "primary" || pc.Image != "ship:latest" || pc.Resources.CPUs != 2 || pc.Resources.MemoryBytes != 4<<30 ||
		pc.RuntimeType != "ship" || pc.RuntimePort != 8123 || p.IdleTimeout != 1800*time.Second {
		t.Errorf("python-data = %+v / %+v", p, pc)
	}
	if _, ok := c.Profile("nope"); ok {
		t.Error("Profile(nope) found")
	}
	bp, ok := c.Profile("browser-python")
	if !ok || len(bp.Containers) != 2 || bp.Primary().Name != "ship" || bp.ContainerFor("browser").RuntimeType != "gull" ||
		bp.ContainerFor("python").Name != "ship" || bp.ContainerFor("filesystem").Name != "ship" || bp.PidsLimit != 512 {
		t.Errorf("browser-python = %+v", bp)
	}
	// Ship's kernel starts on the first python call, not beside Chromium at the sandbox's start.
	if env := ContainerEnv(bp, bp.Primary()); env["SHIP_NO_KERNEL"] != "1" || ContainerEnv(bp, bp.ContainerFor("browser"))["SHIP_NO_KERNEL"] != "" {
		t.Errorf("browser-python env: ship %v, browser %v", env, ContainerEnv(bp, bp.ContainerFor("browser")))
	}
}

func TestEmptyFileMeansDefaults(t *testing.T) {
	for _, text := range []string{"\n", "# only a comment\n", "---\n", "~\n"} {
		c := mustLoad(t, text)
		if !reflect.DeepEqual(c.Profiles, DefaultConfig().Profiles) || c.Server.Port != 8114 {
			t.Errorf("%q: not defaults", text)
		}
	}
}

func TestReferenceExampleConfigs(t *testing.T) {
	t.Run("config.yaml.example", func(t *testing.T) {
		c, err := Load(LoadOptions{File: "testdata/reference-config.yaml.example", Env: []string{"HOSTNAME=h1"}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Driver.Docker.ConnectMode != "host_port" || c.Server.Host != "0.0.0.0" || !c.Security.AllowAnonymous {
			t.Errorf("unexpected: %+v", c.Driver.Docker)
		}
		if c.GC.InstanceID != "" || c.InstanceID() != "h1" {
			t.Errorf("instance id %q / %q", c.GC.InstanceID, c.InstanceID())
		}
		if len(c.Profiles) != 2 || c.Profiles[0].WarmPoolSize != 1 || c.Profiles[1].WarmPoolSize != 1 {
			t.Errorf("profiles: %+v", c.Profiles)
		}
		if d := c.Profiles[0].Description; d == nil || *d != "Standard Python sandbox" {
			t.Errorf("description %v", d)
		}
		// Legacy capabilities list wins, config order kept.
		if got := c.Profiles[0].Capabilities(); !reflect.DeepEqual(got, []string{"filesystem", "shell", "python"}) {
			t.Errorf("capabilities %v", got)
		}
	})
	t.Run("deploy/docker", func(t *testing.T) {
		c, err := Load(LoadOptions{File: "testdata/reference-deploy-docker.yaml", Env: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		if c.InstanceID() != "bay-prod" || !c.GC.OrphanContainer.Enabled || c.Security.APIKey != "CHANGE-ME" ||
			c.Driver.Docker.Network != "bay-network" || c.Driver.Docker.PublishPorts {
			t.Errorf("unexpected %+v", c)
		}
		p, _ := c.Profile("browser-python")
		if p == nil || p.MultiContainer() || p.Primary().Name != "ship" || !p.HasCapability("browser") {
			t.Errorf("browser-python = %+v", p)
		}
		if spec, _ := c.ProfileSpec("browser-python"); spec.Browser == nil || *spec.Browser != "shared" {
			t.Errorf("browser = %v", spec.Browser)
		}
		if path, ok := c.Database.SQLitePath(); !ok || path != "./data/bay.db" {
			t.Errorf("sqlite path %q %v", path, ok)
		}
	})
	t.Run("dev", func(t *testing.T) {
		c, err := Load(LoadOptions{File: "testdata/reference-dev.yaml", Env: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		if c.GC.Interval != time.Minute || c.Profiles[0].IdleTimeout != 10*time.Minute || c.WarmPool.WarmupQueueMaxSize != 16 {
			t.Errorf("unexpected %+v", c.GC)
		}
	})
	t.Run("k8s configmap", func(t *testing.T) {
		c, err := Load(LoadOptions{File: "testdata/reference-k8s-configmap.yaml", Env: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Driver.Type != "k8s" || c.Driver.K8s.PodStartupTimeout != 120*time.Second || !c.Driver.K8s.NetworkPolicy {
			t.Errorf("driver = %+v", c.Driver)
		}
	})
	t.Run("k8s bad request ratio", func(t *testing.T) {
		_, err := Load(LoadOptions{File: "testdata/reference-k8s-configmap.yaml", Env: []string{"BAY_DRIVER__K8S__REQUEST_RATIO=2"}})
		wantErr(t, err, "driver.k8s.request_ratio")
	})
	t.Run("our config.example.yaml", func(t *testing.T) {
		if _, err := Load(LoadOptions{File: "../../../config.example.yaml", Env: []string{}}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestErrorTypes(t *testing.T) {
	_, err := load(t, "gc: {idle_sesion: {enabled: true}}\n")
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("want *LoadError, got %T %v", err, err)
	}
	_, err = load(t, "server: {port: 0}\n")
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %T %v", err, err)
	}
}

func TestUnknownKeysInFile(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"top level", "servr: {port: 1}\n", []string{`unknown key "servr" (did you mean "server"?)`}},
		{"nested", "gc:\n  idle_sesion:\n    enabled: true\n", []string{`config.yaml:2: unknown key "gc.idle_sesion" (did you mean "gc.idle_session"?)`}},
		{"deep", "driver:\n  docker:\n    conect_mode: auto\n", []string{`unknown key "driver.docker.conect_mode" (did you mean "driver.docker.connect_mode"?)`}},
		{"in profile", "profiles:\n  - id: p\n    imag: x\n", []string{`unknown key "profiles[0].imag" (did you mean "profiles[0].image"?)`}},
		{"in container", "profiles:\n  - id: p\n    containers:\n      - name: a\n        image: x\n        primary: [x]\n", []string{`unknown key "profiles[0].containers[0].primary"`}},
		{"no suggestion", "gc:\n  zzzzzzzzzz: 1\n", []string{`unknown key "gc.zzzzzzzzzz"`}},
		{"all reported", "servr: 1\ngc: {enabld: true}\n", []string{`"servr"`, `"gc.enabld"`, "2 problems"}},
		{"duplicate key", "gc:\n  enabled: true\n  enabled: false\n", []string{`"gc.enabled"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			wantErr(t, err, tc.want...)
		})
	}
	// A key in a free-form env map is not a config key.
	mustLoad(t, "profiles:\n  - id: p\n    env: {ANYTHING: x, PORT: 8080}\n")
}

func TestBadValues(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       string
	}{
		{"int", "server: {port: abc}\n", `server.port: expected an integer, got "abc"`},
		{"bool", "gc: {enabled: maybe}\n", `gc.enabled: expected a boolean`},
		{"duration", "gc: {interval_seconds: soon}\n", `gc.interval_seconds: expected a duration`},
		{"section not mapping", "gc: 5\n", `gc: expected a mapping`},
		{"list not list", "profiles: {id: x}\n", `profiles: expected a list`},
		{"string from list", "server: {host: [a]}\n", `server.host: expected a string`},
		{"yaml syntax", "server: [\n", `yaml:`},
		{"port range", "server: {port: 70000}\n", `server.port: must be 1..65535`},
		{"connect mode", "driver: {docker: {connect_mode: bridge}}\n", `driver.docker.connect_mode: must be one of container_network, host_port, auto`},
		{"image cache", "driver: {docker: {image_cache: maybe}}\n", `driver.docker.image_cache: must be one of auto, on, off`},
		{"driver type", "driver: {type: podman}\n", `driver.type: must be docker or k8s`},
		{"pull policy", "driver: {image_pull_policy: sometimes}\n", `driver.image_pull_policy`},
		{"socket", "driver: {docker: {socket: 'ssh://x'}}\n", `driver.docker.socket`},
		{"db scheme", "database: {url: 'mongodb://x'}\n", `database.url: unsupported scheme "mongodb"`},
		{"db mysql", "database: {url: 'mysql+asyncmy://x'}\n", `MySQL is not supported`},
		{"db no scheme", "database: {url: 'bay.db'}\n", `database.url: "bay.db" is not a URL`},
		{"ttl hours", "idempotency: {ttl_hours: 0}\n", `idempotency.ttl_hours: must be > 0`},
		{"gc interval", "gc: {interval_seconds: 0}\n", `gc.interval_seconds: must be > 0`},
		{"negative grace", "gc: {orphan_container: {grace_seconds: -1}}\n", `gc.orphan_container.grace_seconds: must be >= 0`},
		{"workers", "warm_pool: {warmup_queue_workers: 0}\n", `warm_pool.warmup_queue_workers`},
		{"drop policy", "warm_pool: {warmup_queue_drop_policy: drop_all}\n", `warm_pool.warmup_queue_drop_policy`},
		{"threshold", "browser_learning: {score_threshold: 1.5}\n", `browser_learning.score_threshold: must be between 0 and 1`},
		{"browser endpoint", "browser_service: {enabled: true, endpoint: nope}\n", `browser_service.endpoint`},
		{"proxy url", "proxy: {enabled: true, http_proxy: 'not a url'}\n", `proxy.http_proxy`},
		{"upload size", "cargo: {max_upload_bytes: 10x}\n", `invalid size "10x"`},
		{"readiness", "session: {readiness_timeout_seconds: 0}\n", `session.readiness_timeout_seconds`},
		{"instance id", "gc: {instance_id: 'a b'}\n", `gc.instance_id`},
		{"no profiles", "profiles: []\n", `profiles: at least one profile is required`},
		{"profile id", "profiles: [{image: x}]\n", `profiles[0].id: is required`},
		{"dup profile", "profiles: [{id: a}, {id: a}]\n", `profiles[1].id: duplicate profile id "a"`},
		{"no image in container", "profiles: [{id: a, containers: [{name: c}]}]\n", `profiles[0].containers[0].image: is required`},
		{"no name in container", "profiles: [{id: a, containers: [{image: c}]}]\n", `profiles[0].containers[0].name: is required`},
		{"dup container", "profiles: [{id: a, containers: [{name: c, image: i}, {name: c, image: i}]}]\n", `profiles[0].containers[1].name: duplicate container name "c"`},
		{"container ports", "profiles: [{id: a, containers: [{name: c, image: i}, {name: d, image: i}]}]\n", `profiles[0].containers[1].runtime_port: 8123 is also container "c"'s`},
		{"runtime type", "profiles: [{id: a, runtime_type: browser}]\n", `profiles[0].runtime_type: must be ship or gull`},
		{"container runtime type", "profiles: [{id: a, containers: [{name: c, image: i, runtime_type: x}]}]\n", `profiles[0].containers[0].runtime_type`},
		{"runtime port", "profiles: [{id: a, runtime_port: 99999}]\n", `profiles[0].runtime_port`},
		{"memory", "profiles: [{id: a, resources: {memory: lots}}]\n", `profiles[0].resources.memory: invalid size "lots"`},
		{"cpus", "profiles: [{id: a, resources: {cpus: -1}}]\n", `profiles[0].resources.cpus`},
		{"warm size", "profiles: [{id: a, warm_pool_size: -1}]\n", `profiles[0].warm_pool_size: must be >= 0`},
		{"idle", "profiles: [{id: a, idle_timeout: 0}]\n", `profiles[0].idle_timeout`},
		{"browser mode", "profiles: [{id: a, browser: both}]\n", `profiles[0].browser`},
		{"pids", "profiles: [{id: a, pids_limit: -5}]\n", `profiles[0].pids_limit`},
		{"capability", "profiles: [{id: a, capabilities: ['Py thon']}]\n", `profiles[0].capabilities[0]`},
		{"library skill name", "profiles: [{id: a, skills: [pdf, 'Shell.Run']}]\n", `profiles[0].skills[1]`},
		{"skills dir", "skills: {dir: rel}\n", `skills.dir`},
		{"skills max files", "skills: {max_files: 0}\n", `skills.max_files`},
		{"skill name", "skills: {root_path: /srv/skills}\nprofiles: [{id: a, skills: ['../etc']}]\n", `profiles[0].skills[0]`},
		{"api key both", "security: {api_keys: [{key: a, key_sha256: b}]}\n", `security.api_keys[0]: set either key or key_sha256`},
		{"api key none", "security: {api_keys: [{owner: a}]}\n", `security.api_keys[0]: needs key or key_sha256`},
		{"api key hash", "security: {api_keys: [{key_sha256: abc}]}\n", `security.api_keys[0].key_sha256: must be 64 hex`},
		{"api key owner", "security: {api_keys: [{key: k, owner: 'a b'}]}\n", `security.api_keys[0].owner`},
		{"api key reserved owner", "security: {api_keys: [{key: k, owner: warm-pool}]}\n", `is reserved`},
		{"api key dup", "security: {api_key: k, api_keys: [{key: k, owner: x}]}\n", `security.api_keys[0]: same key as security.api_key`},
		{"blocked host", "security: {blocked_hosts: ['10.0.0.0/8', 'intranet']}\n", `security.blocked_hosts[1]: "intranet" is neither a CIDR range nor an IP address`},
		{"blocked empty", "security: {blocked_hosts: ['']}\n", `security.blocked_hosts[0]`},
		{"allowed host", "security: {allowed_hosts: ['10.1.2.3/33']}\n", `security.allowed_hosts[0]`},
		{"firewall bool", "security: {sandbox_firewall: maybe}\n", `security.sandbox_firewall: expected a boolean`},
		{"reuse mode", "reuse: {reuse_mode: agent}\n", `reuse.reuse_mode: must be none, off or project_agent`},
		{"reuse idle ttl", "reuse: {idle_ttl_sec: -1}\n", `reuse.idle_ttl_sec`},
		{"reuse hard ttl", "reuse: {hard_ttl_sec: 99999999}\n", `reuse.hard_ttl_sec`},
		{"reuse lock timeout", "reuse: {lock_timeout_sec: 0}\n", `reuse.lock_timeout_sec: must be 1..3600`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			wantErr(t, err, tc.want)
		})
	}
}

func TestEveryErrorIsReported(t *testing.T) {
	_, err := load(t, "server: {port: 0}\ngc: {interval_seconds: 0}\n")
	wantErr(t, err, "2 invalid keys", "server.port", "gc.interval_seconds")
}
