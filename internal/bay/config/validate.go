package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// ValidationError lists every invalid key; each problem names the key.
type ValidationError struct{ Problems []string }

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return "config: invalid " + e.Problems[0]
	}
	return fmt.Sprintf("config: %d invalid keys:\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// OwnerRe is the syntax of an owner name (API key owners and X-Owner).
var OwnerRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Database dialects returned by DatabaseConfig.Dialect.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// Dialect returns DialectSQLite or DialectPostgres for the URL, or an error naming the key.
// Accepted: sqlite://, sqlite+<driver>://, a plain file path (./bay.db, /abs/bay.db) or
// :memory:, postgres://, postgresql://, postgresql+<driver>://.
func (c DatabaseConfig) Dialect() (string, error) {
	u := strings.TrimSpace(c.URL)
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		if u == ":memory:" || strings.HasPrefix(u, "/") || strings.HasPrefix(u, ".") {
			return DialectSQLite, nil
		}
		return "", fmt.Errorf("database.url: %q is not a URL or a file path starting with / or . (e.g. sqlite:///./bay.db)", c.URL)
	}
	base, _, _ := strings.Cut(strings.ToLower(scheme), "+")
	switch base {
	case "sqlite":
		return DialectSQLite, nil
	case "postgres", "postgresql":
		return DialectPostgres, nil
	case "mysql":
		return "", fmt.Errorf("database.url: MySQL is not supported (use sqlite or postgresql)")
	}
	return "", fmt.Errorf("database.url: unsupported scheme %q (use sqlite:///path or postgresql://...)", scheme)
}

// SQLitePath returns the database file of a sqlite URL in SQLAlchemy's syntax (the same rules
// as internal/bay/sqlite.ParseURL): "sqlite+aiosqlite:///./bay.db" → "./bay.db",
// "sqlite:////var/lib/bay.db" → "/var/lib/bay.db", "sqlite:///:memory:" and "sqlite://" →
// ":memory:", a plain path → itself. ok is false for other dialects.
func (c DatabaseConfig) SQLitePath() (path string, ok bool) {
	if d, err := c.Dialect(); err != nil || d != DialectSQLite {
		return "", false
	}
	u := strings.TrimSpace(c.URL)
	_, rest, isURL := strings.Cut(u, "://")
	if !isURL {
		return u, true
	}
	if rest == "" {
		return ":memory:", true
	}
	return strings.TrimPrefix(rest, "/"), true
}

// PostgresDSN returns a URL for a PostgreSQL driver: the scheme's "+driver" part is dropped
// ("postgresql+asyncpg://u@h/db" → "postgresql://u@h/db"). ok is false for other dialects.
func (c DatabaseConfig) PostgresDSN() (dsn string, ok bool) {
	if d, err := c.Dialect(); err != nil || d != DialectPostgres {
		return "", false
	}
	scheme, rest, _ := strings.Cut(c.URL, "://")
	base, _, _ := strings.Cut(strings.ToLower(scheme), "+")
	return base + "://" + rest, true
}

// redactURLError is the reason of a URL parse error without the URL it quotes.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Validate checks every key (errors name the key: "gc.interval_seconds: must be > 0"),
// normalises driver.docker.socket (a bare path gets unix://), and rebuilds c.Profiles from
// c.ProfileSpecs. It returns a *ValidationError listing every problem.
func (c *Config) Validate() error {
	var probs []string
	add := func(key, format string, args ...any) {
		probs = append(probs, key+": "+fmt.Sprintf(format, args...))
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			add(key, "must be > 0 seconds, got %v", d)
		}
	}

	// server
	if c.Server.Host == "" {
		add("server.host", "is required")
	}
	if c.Server.Port < 1 || c.Server.Port > 65535 {
		add("server.port", "must be 1..65535, got %d", c.Server.Port)
	}

	// database
	if _, err := c.Database.Dialect(); err != nil {
		probs = append(probs, err.Error())
	} else if p, ok := c.Database.SQLitePath(); ok {
		_, rest, _ := strings.Cut(c.Database.URL, "://")
		switch {
		case p == "":
			add("database.url", "%q has no file path (e.g. sqlite:///./bay.db)", c.Database.URL)
		case strings.ContainsAny(p, "?#"):
			add("database.url", "%q: query parameters are not supported for sqlite", c.Database.URL)
		case rest != "" && strings.Contains(c.Database.URL, "://") && !strings.HasPrefix(rest, "/"):
			add("database.url", "%q: a host is not allowed (use sqlite:///relative or sqlite:////absolute)", c.Database.URL)
		}
	}

	if dsn, ok := c.Database.PostgresDSN(); ok {
		// The URL is not repeated: it may carry a password.
		if _, err := url.Parse(dsn); err != nil {
			add("database.url", "not a valid postgresql:// URL: %v", redactURLError(err))
		}
	}
	if c.Database.PoolSize < 2 || c.Database.PoolSize > 1000 {
		add("database.pool_size", "must be 2..1000, got %d", c.Database.PoolSize)
	}
	if c.Database.ConnectTimeout < time.Second || c.Database.ConnectTimeout > 300*time.Second {
		add("database.connect_timeout_seconds", "must be 1..300 seconds, got %v", c.Database.ConnectTimeout)
	}

	// driver
	switch c.Driver.Type {
	case "docker", "k8s":
	default:
		add("driver.type", "must be docker or k8s, got %q", c.Driver.Type)
	}
	oneOf(add, "driver.image_pull_policy", c.Driver.ImagePullPolicy, "always", "if_not_present", "never")
	d := &c.Driver.Docker
	switch {
	case d.Socket == "":
		add("driver.docker.socket", "is required")
	case strings.HasPrefix(d.Socket, "/"):
		d.Socket = "unix://" + d.Socket
	case strings.HasPrefix(d.Socket, "unix://"), strings.HasPrefix(d.Socket, "tcp://"):
	default:
		add("driver.docker.socket", "must be unix:///path, /path or tcp://host:port, got %q", d.Socket)
	}
	oneOf(add, "driver.docker.connect_mode", d.ConnectMode, "container_network", "host_port", "auto")
	oneOf(add, "driver.docker.image_cache", d.ImageCache, "auto", "on", "off")
	oneOf(add, "driver.docker.cargo_quota", d.CargoQuota, "auto", "loop", "off")
	if !filepath.IsAbs(d.CargoDir) {
		add("driver.docker.cargo_dir", "must be an absolute path, got %q", d.CargoDir)
	}
	if !filepath.IsAbs(d.NamesDir) || filepath.Clean(d.NamesDir) == "/" {
		add("driver.docker.names_dir", "must be an absolute path other than /, got %q", d.NamesDir)
	}
	if d.HostAddress == "" {
		add("driver.docker.host_address", "is required")
	}
	if d.HostPort < 0 || d.HostPort > 65535 {
		add("driver.docker.host_port", "must be 0 (random) or 1..65535, got %d", d.HostPort)
	}
	if c.Driver.Type == "k8s" {
		k := &c.Driver.K8s
		positive("driver.k8s.pod_startup_timeout", k.PodStartupTimeout)
		if k.PodStartupTimeout > time.Hour {
			add("driver.k8s.pod_startup_timeout", "must be at most 3600 seconds, got %v", k.PodStartupTimeout)
		}
		if k.Namespace == "" {
			add("driver.k8s.namespace", "is required")
		}
		if k.DefaultStorageSize == "" {
			add("driver.k8s.default_storage_size", "is required (a quantity such as 1Gi)")
		}
		if k.RequestRatio <= 0 || k.RequestRatio > 1 {
			add("driver.k8s.request_ratio", "must be in (0, 1], got %v", k.RequestRatio)
		}
		oneOf(add, "driver.k8s.connect_mode", k.ConnectMode, "pod_ip", "proxy")
		oneOf(add, "driver.k8s.host_mounts", k.HostMounts, "configmap", "hostpath")
		if g := k.EgressGateway; g.Service != "" {
			if g.TokenFile == "" {
				add("driver.k8s.egress_gateway.token_file", "is required with egress_gateway.service (the admin port's token)")
			}
			positive("driver.k8s.egress_gateway.apply_timeout", g.ApplyTimeout)
			for key, p := range map[string]int{"upstream_http_port": g.UpstreamHTTPPort, "upstream_tls_port": g.UpstreamTLSPort} {
				if p < 0 || p > 65535 {
					add("driver.k8s.egress_gateway."+key, "must be 0 (the default) or 1..65535, got %d", p)
				}
			}
		}
		// The driver checks the rest (names, quantities, capabilities, CIDRs) when bay starts.
	}

	// cargo
	if c.Cargo.DefaultSizeLimitMB <= 0 {
		add("cargo.default_size_limit_mb", "must be > 0, got %d", c.Cargo.DefaultSizeLimitMB)
	}
	if c.Cargo.MaxUploadBytes <= 0 {
		add("cargo.max_upload_bytes", "must be > 0, got %d", c.Cargo.MaxUploadBytes)
	}
	if c.Cargo.HostRootPath != "" && !strings.HasPrefix(c.Cargo.HostRootPath, "/") {
		add("cargo.host_root_path", "must be an absolute path, got %q", c.Cargo.HostRootPath)
	}

	// security
	hashes := map[string]string{}
	if c.Security.APIKey != "" {
		hashes[sha256Hex(c.Security.APIKey)] = "security.api_key"
	}
	for i, k := range c.Security.APIKeys {
		key := fmt.Sprintf("security.api_keys[%d]", i)
		var h string
		switch {
		case k.Key != "" && k.KeySHA256 != "":
			add(key, "set either key or key_sha256, not both")
		case k.Key != "":
			h = sha256Hex(k.Key)
		case k.KeySHA256 != "":
			if b, err := hex.DecodeString(k.KeySHA256); err != nil || len(b) != 32 {
				add(key+".key_sha256", "must be 64 hex characters")
			} else {
				h = strings.ToLower(k.KeySHA256)
			}
		default:
			add(key, "needs key or key_sha256")
		}
		if h != "" {
			if prev, dup := hashes[h]; dup {
				add(key, "same key as %s", prev)
			}
			hashes[h] = key
		}
		if k.Owner != "" && !OwnerRe.MatchString(k.Owner) {
			add(key+".owner", "%q must match %s", k.Owner, OwnerRe)
		} else if k.Owner == bay.OwnerWarmPool {
			add(key+".owner", "%q is reserved", k.Owner)
		}
	}
	for _, hosts := range []struct {
		key  string
		list []string
	}{{"security.blocked_hosts", c.Security.BlockedHosts}, {"security.allowed_hosts", c.Security.AllowedHosts}} {
		for i, h := range hosts.list {
			if _, err := netguard.ParseHosts([]string{h}); err != nil {
				add(fmt.Sprintf("%s[%d]", hosts.key, i), "%v", err)
			}
		}
	}

	for i, u := range c.Security.EgressDNSUpstream {
		if _, err := EgressUpstream(u); err != nil {
			add(fmt.Sprintf("security.egress_dns_upstream[%d]", i), "%v", err)
		}
	}
	if p := c.Security.EgressProxyPort; p < 0 || p > 65535 || p == 53 || p == 80 || p == 443 {
		add("security.egress_proxy_port", "must be 1..65535 but 53, 80 and 443 (0 = 3128), got %d", p)
	}

	// idempotency
	if c.Idempotency.TTLHours <= 0 {
		add("idempotency.ttl_hours", "must be > 0, got %d", c.Idempotency.TTLHours)
	}

	// gc
	positive("gc.interval_seconds", c.GC.Interval)
	if c.GC.OrphanContainer.Grace < 0 {
		add("gc.orphan_container.grace_seconds", "must be >= 0, got %v", c.GC.OrphanContainer.Grace)
	}
	if c.GC.InstanceID != "" && !OwnerRe.MatchString(c.GC.InstanceID) {
		add("gc.instance_id", "%q must be 1-64 letters, digits, '_', '.', '-' (it is a label value)", c.GC.InstanceID)
	}

	// warm_pool
	w := c.WarmPool
	if w.WarmupQueueWorkers < 1 {
		add("warm_pool.warmup_queue_workers", "must be >= 1, got %d", w.WarmupQueueWorkers)
	}
	if w.WarmupQueueMaxSize < 1 {
		add("warm_pool.warmup_queue_max_size", "must be >= 1, got %d", w.WarmupQueueMaxSize)
	}
	oneOf(add, "warm_pool.warmup_queue_drop_policy", w.WarmupQueueDropPolicy, "drop_newest", "drop_oldest")
	if w.WarmupQueueDropAlertThreshold < 1 {
		add("warm_pool.warmup_queue_drop_alert_threshold", "must be >= 1, got %d", w.WarmupQueueDropAlertThreshold)
	}
	positive("warm_pool.interval_seconds", w.Interval)

	// browser_learning
	b := c.BrowserLearning
	positive("browser_learning.interval_seconds", b.Interval)
	if b.BatchSize < 1 {
		add("browser_learning.batch_size", "must be >= 1, got %d", b.BatchSize)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{
		{"browser_learning.score_threshold", b.ScoreThreshold},
		{"browser_learning.replay_success_threshold", b.ReplaySuccessThreshold},
		{"browser_learning.success_drop_threshold", b.SuccessDropThreshold},
	} {
		if f.v < 0 || f.v > 1 {
			add(f.key, "must be between 0 and 1, got %v", f.v)
		}
	}
	if b.MinSamples < 0 {
		add("browser_learning.min_samples", "must be >= 0, got %d", b.MinSamples)
	}
	if b.CanaryWindowHours <= 0 {
		add("browser_learning.canary_window_hours", "must be > 0, got %v", b.CanaryWindowHours)
	}
	if b.ErrorRateMultiplierThreshold <= 0 {
		add("browser_learning.error_rate_multiplier_threshold", "must be > 0, got %v", b.ErrorRateMultiplierThreshold)
	}

	// browser_service
	if c.BrowserService.Enabled {
		checkURL(add, "browser_service.endpoint", c.BrowserService.Endpoint)
	}

	// proxy
	checkProxy("proxy", &c.Proxy, add)

	// session
	positive("session.readiness_timeout_seconds", c.Session.ReadinessTimeout)
	positive("jobs.max_duration_seconds", c.Jobs.MaxDuration)
	positive("jobs.poll_interval_seconds", c.Jobs.PollInterval)

	// reuse (the TTLs within what a request may ask: bayapi.MaxTTL, 366 days)
	const maxReuseTTL = 366 * 24 * time.Hour
	if m := c.Reuse.Mode; m != ReuseNone && m != ReuseOff && m != ReuseProjectAgent {
		add("reuse.reuse_mode", "must be none, off or project_agent, got %q", m)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"reuse.idle_ttl_sec", c.Reuse.IdleTTL}, {"reuse.hard_ttl_sec", c.Reuse.HardTTL}} {
		if f.d < 0 || f.d > maxReuseTTL {
			add(f.name, "must be 0 (no limit) to %d seconds, got %v", int64(maxReuseTTL.Seconds()), f.d)
		}
	}
	if c.Reuse.LockTimeout < time.Second || c.Reuse.LockTimeout > time.Hour {
		add("reuse.lock_timeout_sec", "must be 1..3600 seconds, got %v", c.Reuse.LockTimeout)
	}

	// skills
	if c.Skills.RootPath != "" && !strings.HasPrefix(c.Skills.RootPath, "/") {
		add("skills.root_path", "must be an absolute host path, got %q", c.Skills.RootPath)
	}
	checkSkills(&c.Skills, add)

	c.Execs.validate(add)
	c.Limits.validate(add)

	// profiles
	profiles := normalizeProfiles(c.ProfileSpecs, c.Proxy, c.Skills.RootPath, add)

	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	c.Profiles = profiles
	return nil
}

func oneOf(add func(key, format string, args ...any), key, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	add(key, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
}

func checkURL(add func(key, format string, args ...any), key, v string) {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		add(key, "must be a URL such as http://host:port, got %q", v)
	}
}

func checkProxy(key string, p *ProxyConfig, add func(key, format string, args ...any)) {
	if !p.Enabled {
		return
	}
	if p.HTTPProxy != "" {
		checkURL(add, key+".http_proxy", p.HTTPProxy)
	}
	if p.HTTPSProxy != "" {
		checkURL(add, key+".https_proxy", p.HTTPSProxy)
	}
}

// KeyHash is the stored form of an API key: the lowercase hex SHA-256 of the plaintext.
func KeyHash(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

func sha256Hex(s string) string { return KeyHash(s) }
