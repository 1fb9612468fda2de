// Package config is bay's configuration: every key of the Python Shipyard Neo's config.yaml is
// accepted, plus our additions (docs/configuration.md lists them all).
//
// Sources, lowest to highest priority: DefaultConfig(), the YAML file, then BAY_* environment
// variables (BAY_<SECTION>__<KEY>, case-insensitive, "__" nests). The reference applies the file
// over the environment; we apply the environment over the file, as its docstrings promised.
//
// Unknown keys at any depth, in the file or in BAY_* variables, fail the load with the key's
// path and a suggestion. Load calls Validate, which also normalises the profiles into
// []bay.Profile (Config.Profiles).
package config

import (
	"slices"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// Config is bay's whole configuration. YAML keys are the struct tags. Fields tagged yaml:"-"
// are derived by Load/Validate and cannot be configured.
type Config struct {
	Server          ServerConfig          `yaml:"server"`
	Database        DatabaseConfig        `yaml:"database"`
	Driver          DriverConfig          `yaml:"driver"`
	Cargo           CargoConfig           `yaml:"cargo"`
	Security        SecurityConfig        `yaml:"security"`
	Idempotency     IdempotencyConfig     `yaml:"idempotency"`
	GC              GCConfig              `yaml:"gc"`
	WarmPool        WarmPoolConfig        `yaml:"warm_pool"`
	BrowserLearning BrowserLearningConfig `yaml:"browser_learning"`
	BrowserService  BrowserServiceConfig  `yaml:"browser_service"`
	// BrowserAutoReleaseEnabled is a top-level key (env BAY_BROWSER_AUTO_RELEASE_ENABLED).
	BrowserAutoReleaseEnabled bool `yaml:"browser_auto_release_enabled"`
	// Proxy is the global proxy block injected into runtime containers.
	Proxy ProxyConfig `yaml:"proxy"`
	// Session holds session lifecycle settings (ours).
	Session SessionConfig `yaml:"session"`
	// Skills holds the host skills library (ours).
	Skills SkillsConfig `yaml:"skills"`
	// Execs holds the audited one-shot executions (ours).
	Execs ExecsConfig `yaml:"execs"`
	// Jobs holds the limits of jobs (ours).
	Jobs JobsConfig `yaml:"jobs"`
	// Limits bounds the ordinary sandbox calls: exec timeouts, output, input and file sizes (ours).
	Limits LimitsConfig `yaml:"limits"`
	// Reuse holds the defaults of sandbox reuse by key (seed 002's [tools.e2b] reuse keys).
	Reuse ReuseConfig `yaml:"reuse"`
	// Images is what bay does about its profiles' images (ours).
	Images ImagesConfig `yaml:"images"`
	// ProfileSpecs is the "profiles" list as written. A list in the file or in BAY_PROFILES
	// replaces the default profiles entirely.
	ProfileSpecs []ProfileSpec `yaml:"profiles"`

	// Profiles is ProfileSpecs normalised, rebuilt by Validate.
	Profiles []bay.Profile `yaml:"-"`
	// File is the config file that was loaded ("" = none, defaults and environment only).
	File string `yaml:"-"`
	// Hostname is $HOSTNAME as seen by Load, the fallback GC instance id.
	Hostname string `yaml:"-"`
}

// ServerConfig is where bay's HTTP API listens.
type ServerConfig struct {
	// Host defaults to 127.0.0.1 (reference: 0.0.0.0): nothing listens publicly unless asked.
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
}

// DatabaseConfig selects the store.
type DatabaseConfig struct {
	// URL: sqlite+aiosqlite:///./bay.db, sqlite:///path, sqlite:////abs/path,
	// postgresql+asyncpg://..., postgresql://..., postgres://...
	URL  string `yaml:"url"`
	Echo bool   `yaml:"echo"` // log SQL statements
	// PoolSize bounds the connections to a PostgreSQL server (each is one server backend);
	// 2..1000. SQLite ignores it (one write connection, a read pool sized by the CPUs).
	PoolSize int `yaml:"pool_size"`
	// ConnectTimeout bounds the opening of one PostgreSQL connection; 1..300 s.
	ConnectTimeout time.Duration `yaml:"connect_timeout_seconds"`
}

// DriverConfig selects and configures the container engine.
type DriverConfig struct {
	Type            string       `yaml:"type"`              // docker | k8s
	ImagePullPolicy string       `yaml:"image_pull_policy"` // always | if_not_present | never
	Docker          DockerConfig `yaml:"docker"`
	K8s             K8sConfig    `yaml:"k8s"`
}

// DockerConfig configures the Docker driver.
type DockerConfig struct {
	// Socket is the engine address: unix:///path, a bare path (unix:// is prefixed by
	// Validate), or tcp://host:port.
	Socket       string `yaml:"socket"`
	Network      string `yaml:"network"`      // existing network to attach runtimes to ("" = none)
	ConnectMode  string `yaml:"connect_mode"` // container_network | host_port | auto
	HostAddress  string `yaml:"host_address"` // host used in host_port endpoints
	PublishPorts bool   `yaml:"publish_ports"`
	HostPort     int    `yaml:"host_port"` // fixed host port, 0 = random
	// ImageCache serves an image's declared hot paths (its Python trees) from engine volumes:
	// auto (on when the engine's storage driver is fuse-overlayfs or vfs) | on | off. Ours.
	ImageCache string `yaml:"image_cache"`
	// CargoQuota bounds each cargo by its size limit with a loop-mounted file: auto, loop, off.
	CargoQuota string `yaml:"cargo_quota"`
	// CargoDir holds the files and mount points of bounded cargos.
	CargoDir string `yaml:"cargo_dir"`
	// NamesDir holds the resolv.conf and hosts files of sandboxes under gVisor (runsc), which
	// cannot reach the engine's embedded DNS server. A path of the engine's host.
	NamesDir string `yaml:"names_dir"`
}

// K8sConfig configures the Kubernetes driver (internal/bay/k8s, whose Config documents each
// key).
type K8sConfig struct {
	Namespace          string        `yaml:"namespace"`
	Kubeconfig         string        `yaml:"kubeconfig"`
	StorageClass       string        `yaml:"storage_class"`
	DefaultStorageSize string        `yaml:"default_storage_size"`
	ImagePullSecrets   []string      `yaml:"image_pull_secrets"`
	PodStartupTimeout  time.Duration `yaml:"pod_startup_timeout"` // seconds in YAML
	LabelPrefix        string        `yaml:"label_prefix"`
	// Ours.
	RuntimeClassName string              `yaml:"runtime_class_name"`
	RuntimeCaps      map[string][]string `yaml:"runtime_caps"`
	NetworkPolicy    bool                `yaml:"network_policy"`
	BayCIDRs         []string            `yaml:"bay_cidrs"`
	BayPodLabels     map[string]string   `yaml:"bay_pod_labels"`
	BayNamespace     string              `yaml:"bay_namespace"`
	AllowDNS         bool                `yaml:"allow_dns"`
	RequestRatio     float64             `yaml:"request_ratio"`
	ConnectMode      string              `yaml:"connect_mode"` // pod_ip | proxy
	// SeccompUsernsProfile is the Localhost seccomp profile of the user-namespace opt-in,
	// relative to the kubelet's seccomp root; NoNetworkRuntimeClass the RuntimeClass of
	// one-shots in network mode none ("" = the Pod network under a deny-all policy).
	SeccompUsernsProfile  string `yaml:"seccomp_userns_profile"`
	NoNetworkRuntimeClass string `yaml:"no_network_runtime_class"`
	// RunscRuntimeClass is the RuntimeClass of the Pods of a profile with runtime: runsc.
	RunscRuntimeClass   string `yaml:"runsc_runtime_class"`
	StorageEnforcesSize bool   `yaml:"storage_enforces_size"`
	// HostMounts is how skill folders reach the Pods: configmap | hostpath.
	HostMounts string `yaml:"host_mounts"`
	// EgressGateway is the gateway Deployment that enforces allowlists naming hosts
	// (`bay egress-gateway`); without it such allowlists are refused.
	EgressGateway K8sEgressGatewayConfig `yaml:"egress_gateway"`
}

// K8sEgressGatewayConfig points the Kubernetes driver at its egress gateway (internal/bay/k8s/
// egressgw); the gateway reads the same block (and security.*) from the same file.
type K8sEgressGatewayConfig struct {
	// Service is the gateway's Service ("" = no gateway); Namespace its namespace (default
	// driver.k8s.namespace).
	Service   string `yaml:"service"`
	Namespace string `yaml:"namespace"`
	// TokenFile holds the admin port's bearer token (a Secret mounted in bay and the gateway).
	TokenFile string `yaml:"token_file"`
	// ApplyTimeout bounds bay's wait for every ready gateway Pod to apply a new or changed
	// policy (seconds in YAML; default 15).
	ApplyTimeout time.Duration `yaml:"apply_timeout"`
	// UpstreamHTTPPort and UpstreamTLSPort are the ports transparent HTTP and TLS go to
	// upstream (default 80 and 443; tests point them at their own servers).
	UpstreamHTTPPort int `yaml:"upstream_http_port"`
	UpstreamTLSPort  int `yaml:"upstream_tls_port"`
}

// CargoConfig configures workspace volumes.
type CargoConfig struct {
	RootPath           string `yaml:"root_path"`
	HostRootPath       string `yaml:"host_root_path"` // set: bind-mount host dirs instead of volumes
	DefaultSizeLimitMB int    `yaml:"default_size_limit_mb"`
	MountPath          string `yaml:"mount_path"` // inert: always /workspace
	// MaxUploadBytes bounds one filesystem upload (ours, default 10 GiB); larger → 413.
	MaxUploadBytes ByteSize `yaml:"max_upload_bytes"`
	// EagerVolume (ours) creates a managed cargo's volume before POST /v1/sandboxes answers,
	// as the reference does; by default it is made at the first start, keeping creates fast.
	EagerVolume bool `yaml:"eager_volume"`
}

// SecurityConfig configures authentication.
type SecurityConfig struct {
	// APIKey is a plaintext key for owner "default"; BAY_API_KEY beats it.
	APIKey string `yaml:"api_key"`
	// AllowAnonymous defaults to false (reference: true).
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// BlockedHosts are the destinations (CIDR ranges or addresses) sandboxes may not reach;
	// default netguard.DefaultBlocked. The host's own addresses are always blocked.
	BlockedHosts []string `yaml:"blocked_hosts"`
	// AllowedHosts are exceptions to BlockedHosts and to the host block (ours).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// SandboxFirewall installs the host firewall that enforces BlockedHosts (ours, default
	// true). When it cannot be installed, sandboxes do not start; false runs them without.
	SandboxFirewall bool `yaml:"sandbox_firewall"`
	// EgressDNSUpstream are the DNS servers ("host" or "host:port") bay's egress resolver and
	// gateway ask for allowlisted sandboxes (ours; default: the nameservers of the host's
	// /etc/resolv.conf).
	EgressDNSUpstream []string `yaml:"egress_dns_upstream"`
	// EgressProxyPort is the egress gateway's HTTP proxy port on the allowlist network's
	// gateway address (ours; default 3128).
	EgressProxyPort int `yaml:"egress_proxy_port"`
	// APIKeys are extra keys with owners (ours), plaintext or sha256 hex.
	APIKeys []APIKeyConfig `yaml:"api_keys"`
	// RevokeUnlistedKeys: accept only the configured keys, ignoring other stored keys (ours).
	RevokeUnlistedKeys bool `yaml:"revoke_unlisted_keys"`
}

// APIKeyConfig is one configured API key: exactly one of Key and KeySHA256.
type APIKeyConfig struct {
	Key       string `yaml:"key"`        // plaintext
	KeySHA256 string `yaml:"key_sha256"` // sha256 hex of the plaintext
	Owner     string `yaml:"owner"`      // default "default"
	// Admin lets the key manage the skill library (ours). Keys of the owner "default" always
	// can.
	Admin bool `yaml:"admin"`
}

// IdempotencyConfig configures Idempotency-Key handling.
type IdempotencyConfig struct {
	Enabled  bool `yaml:"enabled"`
	TTLHours int  `yaml:"ttl_hours"`
}

// TTL is TTLHours as a duration.
func (c IdempotencyConfig) TTL() time.Duration { return time.Duration(c.TTLHours) * time.Hour }

// GCConfig configures the garbage collector.
type GCConfig struct {
	Enabled      bool          `yaml:"enabled"` // background loop; manual runs work regardless
	RunOnStartup bool          `yaml:"run_on_startup"`
	Interval     time.Duration `yaml:"interval_seconds"`
	// InstanceID labels every container bay creates; see Config.InstanceID for the fallback.
	InstanceID      string              `yaml:"instance_id"`
	IdleSession     GCTaskConfig        `yaml:"idle_session"`
	ExpiredSandbox  GCTaskConfig        `yaml:"expired_sandbox"`
	OrphanCargo     GCTaskConfig        `yaml:"orphan_cargo"`
	OrphanContainer OrphanContainerTask `yaml:"orphan_container"`
}

// GCTaskConfig switches one GC task.
type GCTaskConfig struct {
	Enabled bool `yaml:"enabled"`
}

// OrphanContainerTask configures the orphan container task.
type OrphanContainerTask struct {
	Enabled bool `yaml:"enabled"`
	// Grace: containers younger than this are never collected (ours, default 300 s).
	Grace time.Duration `yaml:"grace_seconds"`
	// DryRun logs what would be removed without removing it (ours).
	DryRun bool `yaml:"dry_run"`
}

// WarmPoolConfig configures the warm pool.
type WarmPoolConfig struct {
	Enabled                       bool          `yaml:"enabled"`
	WarmupQueueWorkers            int           `yaml:"warmup_queue_workers"`
	WarmupQueueMaxSize            int           `yaml:"warmup_queue_max_size"`
	WarmupQueueDropPolicy         string        `yaml:"warmup_queue_drop_policy"` // drop_newest | drop_oldest
	WarmupQueueDropAlertThreshold int           `yaml:"warmup_queue_drop_alert_threshold"`
	Interval                      time.Duration `yaml:"interval_seconds"`
	RunOnStartup                  bool          `yaml:"run_on_startup"`
	// CleanupOnShutdown (ours) deletes this instance's warm sandboxes when bay stops. Off by
	// default: a restarted bay reuses them, and another bay's warm sandboxes are never touched.
	CleanupOnShutdown bool `yaml:"cleanup_on_shutdown"`
}

// BrowserLearningConfig configures browser skill learning (internal/bay/learning).
type BrowserLearningConfig struct {
	Enabled                      bool          `yaml:"enabled"`
	RunOnStartup                 bool          `yaml:"run_on_startup"`
	Interval                     time.Duration `yaml:"interval_seconds"`
	BatchSize                    int           `yaml:"batch_size"`
	ScoreThreshold               float64       `yaml:"score_threshold"`
	ReplaySuccessThreshold       float64       `yaml:"replay_success_threshold"`
	MinSamples                   int           `yaml:"min_samples"`
	CanaryWindowHours            float64       `yaml:"canary_window_hours"`
	SuccessDropThreshold         float64       `yaml:"success_drop_threshold"`
	ErrorRateMultiplierThreshold float64       `yaml:"error_rate_multiplier_threshold"`
}

// BrowserServiceConfig is the shared Gull service (inert for now).
type BrowserServiceConfig struct {
	Enabled  bool   `yaml:"enabled"`
	Endpoint string `yaml:"endpoint"`
}

// ProxyConfig is a proxy block (global, profile or container level). A profile- or
// container-level block replaces the global one entirely (not per field).
type ProxyConfig struct {
	Enabled    bool   `yaml:"enabled"`
	HTTPProxy  string `yaml:"http_proxy"`
	HTTPSProxy string `yaml:"https_proxy"`
	// NoProxy is appended to DefaultNoProxy.
	NoProxy        string `yaml:"no_proxy"`
	DefaultNoProxy string `yaml:"default_no_proxy"`
}

// DefaultNoProxy is the default of default_no_proxy.
const DefaultNoProxy = "localhost,127.0.0.1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,*.local,.svc,.svc.cluster.local,.pod.cluster.local"

func (p *ProxyConfig) applyDefaults() { *p = ProxyConfig{DefaultNoProxy: DefaultNoProxy} }

// SessionConfig holds session lifecycle settings (ours).
type SessionConfig struct {
	// ReadinessTimeout bounds the wait for a started runtime's /health (reference: 120 s
	// hard-coded; default here 60 s). A session "starting" for longer is stale.
	ReadinessTimeout time.Duration `yaml:"readiness_timeout_seconds"`
}

// JobsConfig bounds jobs, the long-running commands of the jobs API (ours).
type JobsConfig struct {
	// MaxDuration bounds a job's timeout and is the timeout of a job that gives none (24 h).
	MaxDuration time.Duration `yaml:"max_duration_seconds"`
	// PollInterval is how often bay asks a sandbox's runtime about each running job (2 s);
	// every poll refreshes the sandbox's idle deadline, so it must stay below idle timeouts.
	PollInterval time.Duration `yaml:"poll_interval_seconds"`
}

// Reuse modes (seed 002's reuse_mode): none and off refuse creates with reuse; project_agent
// serves them (the key is the caller's, e.g. "<project>:<agent>").
const (
	ReuseNone         = "none"
	ReuseOff          = "off"
	ReuseProjectAgent = "project_agent"
)

// ReuseConfig is sandbox reuse by key (POST /v1/sandboxes with reuse), named after seed 002's
// [tools.e2b] keys.
type ReuseConfig struct {
	// Mode is ReuseProjectAgent (default) or ReuseNone/ReuseOff.
	Mode string `yaml:"reuse_mode"`
	// IdleTTL and HardTTL apply to a reuse request that gives no idle_ttl or hard_ttl (1800 s
	// and 21600 s; 0: no limit): a sandbox idle, or alive, longer is deleted and replaced, and
	// a new sandbox gets the hard TTL as its TTL when the request gives none.
	IdleTTL time.Duration `yaml:"idle_ttl_sec"`
	HardTTL time.Duration `yaml:"hard_ttl_sec"`
	// LockTimeout bounds how long a create waits for the other creates of the same key, which
	// run one at a time under a lease in the database (so across bays too): 600 s.
	LockTimeout time.Duration `yaml:"lock_timeout_sec"`
}

// ImagesConfig is what bay does about its profiles' images.
type ImagesConfig struct {
	// BuildMissing makes bay build, in the background after it starts serving, the profile
	// images that `bay image build` makes (ship:latest, ship:base, gull:latest) and the engine
	// lacks, one at a time, the smallest first (it needs the runtime binaries at bin/ship and
	// bin/gull of the working directory, as `make build` leaves them). Meanwhile a create of a
	// ship:latest profile starts on ship:base once that is built, and other creates of a
	// profile whose image is being built are answered 503 unavailable with Retry-After.
	// Default false: production images are built ahead (`bay image build`); `make run` sets it
	// so that a fresh machine serves sandboxes minutes before the full image is ready.
	BuildMissing bool `yaml:"build_missing"`
}

// SkillsConfig is the skill library (ours, internal/bay/skills).
type SkillsConfig struct {
	// RootPath is the legacy host directory holding one folder per skill: when set,
	// profiles[].skills names folders under it (mounted read-only at /skills/<name>) instead
	// of library skills. "" (default) = profiles name library skills.
	RootPath string `yaml:"root_path"`
	// Dir holds the library's versions; default <BAY_DATA_DIR or .>/skills. Sessions
	// bind-mount from it, so it must be a path on the engine's host.
	Dir string `yaml:"dir"`
	// SeedDir is a host directory of skill folders stored into the library at startup
	// (unchanged ones are kept as they are); `make run` points it at the repository's skills/.
	SeedDir string `yaml:"seed_dir"`
	// Upload bounds: the archive as sent, the unpacked files, the entries.
	MaxArchiveBytes  ByteSize `yaml:"max_archive_bytes"`
	MaxUnpackedBytes ByteSize `yaml:"max_unpacked_bytes"`
	MaxFiles         int      `yaml:"max_files"`
}

// ProfileSpec is one entry of "profiles" as written, in the legacy
// single-container form or the containers: form. Validate normalises it into a bay.Profile.
type ProfileSpec struct {
	ID          string  `yaml:"id"`
	Description *string `yaml:"description"`

	// Legacy single-container form.
	Image        string            `yaml:"image"`
	RuntimeType  string            `yaml:"runtime_type"`
	RuntimePort  int               `yaml:"runtime_port"`
	Resources    *ResourcesSpec    `yaml:"resources"`
	Capabilities []string          `yaml:"capabilities"`
	Env          map[string]string `yaml:"env"`
	Proxy        *ProxyConfig      `yaml:"proxy"`

	// Multi-container form.
	Containers []ContainerSpec `yaml:"containers"`
	Startup    *StartupSpec    `yaml:"startup"` // inert

	IdleTimeout                   time.Duration `yaml:"idle_timeout"` // seconds in YAML
	WarmPoolSize                  int           `yaml:"warm_pool_size"`
	WarmRotateTTL                 time.Duration `yaml:"warm_rotate_ttl"` // seconds in YAML
	WarmClaimTimeoutMS            int           `yaml:"warm_claim_timeout_ms"`
	WarmupRetryMaxAttempts        int           `yaml:"warmup_retry_max_attempts"`
	WarmupRetryBackoffBaseMS      int           `yaml:"warmup_retry_backoff_base_ms"`
	WarmupRetryBackoffMaxMS       int           `yaml:"warmup_retry_backoff_max_ms"`
	WarmupCircuitBreakerThreshold int           `yaml:"warmup_circuit_breaker_threshold"`
	Browser                       *string       `yaml:"browser"` // shared | isolated | null

	// Ours.
	Skills    []string `yaml:"skills"`     // library skills (host folders with skills.root_path) mounted read-only at /skills
	PidsLimit int64    `yaml:"pids_limit"` // 0 = driver default (256)
	// TmpSizeMB bounds /tmp and /var/tmp of each container (memory-backed, counted in its
	// memory limit); 0 = driver default (256).
	TmpSizeMB int64 `yaml:"tmp_size_mb"`
	// Network is the profile's network policy, the ceiling of every sandbox's (default open).
	Network *NetworkSpec `yaml:"network"`
	// Runtime is the container runtime of the profile's containers: runc or runsc (gVisor,
	// docs/gvisor.md); unset = the platform's default.
	Runtime string `yaml:"runtime"`
}

// NetworkSpec is a network policy block: mode none | allowlist | open, allow and deny entries.
type NetworkSpec struct {
	Mode  string   `yaml:"mode"`
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

func (p *ProfileSpec) applyDefaults() {
	*p = ProfileSpec{
		IdleTimeout:                   1800 * time.Second,
		WarmRotateTTL:                 1800 * time.Second,
		WarmClaimTimeoutMS:            200,
		WarmupRetryMaxAttempts:        3,
		WarmupRetryBackoffBaseMS:      200,
		WarmupRetryBackoffMaxMS:       5000,
		WarmupCircuitBreakerThreshold: 10,
	}
}

// ContainerSpec is one container of a containers: profile as written.
type ContainerSpec struct {
	Name            string            `yaml:"name"`
	Image           string            `yaml:"image"`
	RuntimeType     string            `yaml:"runtime_type"`
	RuntimePort     int               `yaml:"runtime_port"`
	Resources       ResourcesSpec     `yaml:"resources"`
	Capabilities    []string          `yaml:"capabilities"`
	PrimaryFor      []string          `yaml:"primary_for"`
	Env             map[string]string `yaml:"env"`
	Proxy           *ProxyConfig      `yaml:"proxy"`
	HealthCheckPath string            `yaml:"health_check_path"` // inert: always /health
	// ChromiumSandbox (ours, gull containers) keeps Chromium's own sandbox: the container
	// gets a system-call filter that lets it make user and PID namespaces for its renderers.
	ChromiumSandbox bool `yaml:"chromium_sandbox"`
}

func (c *ContainerSpec) applyDefaults() {
	*c = ContainerSpec{
		RuntimeType:     bay.RuntimeShip,
		RuntimePort:     DefaultRuntimePort,
		Resources:       defaultResources(),
		HealthCheckPath: "/health",
	}
}

// ResourcesSpec is a container's limits as written.
type ResourcesSpec struct {
	CPUs   float64 `yaml:"cpus"`
	Memory string  `yaml:"memory"` // k/m/g suffix (1024-based) or bytes
}

func (r *ResourcesSpec) applyDefaults() { *r = defaultResources() }

func defaultResources() ResourcesSpec { return ResourcesSpec{CPUs: 1.0, Memory: "1g"} }

// StartupSpec is declared by the reference and ignored.
type StartupSpec struct {
	Order      string `yaml:"order"`
	WaitForAll bool   `yaml:"wait_for_all"`
}

func (s *StartupSpec) applyDefaults() { *s = StartupSpec{Order: "parallel", WaitForAll: true} }

// DefaultRuntimePort is Ship's port, the default runtime_port.
const DefaultRuntimePort = 8123

// DefaultMaxUploadBytes is the default cargo.max_upload_bytes: 10 GiB.
const DefaultMaxUploadBytes = 10 << 30

// DefaultConfig returns the defaults of every key (the reference's, and ours), with Profiles
// already normalised.
func DefaultConfig() *Config {
	c := &Config{
		Server:   ServerConfig{Host: "127.0.0.1", Port: 8114},
		Database: DatabaseConfig{URL: "sqlite+aiosqlite:///./bay.db", PoolSize: 10, ConnectTimeout: 10 * time.Second},
		Driver: DriverConfig{
			Type:            "docker",
			ImagePullPolicy: "if_not_present",
			Docker: DockerConfig{
				Socket:       "unix:///var/run/docker.sock",
				ConnectMode:  "auto",
				HostAddress:  "127.0.0.1",
				PublishPorts: true,
				ImageCache:   "auto",
				CargoQuota:   "auto",
				CargoDir:     "/var/lib/shipyard/cargos",
				NamesDir:     "/var/lib/shipyard/names",
			},
			K8s: K8sConfig{
				Namespace:          "bay",
				DefaultStorageSize: "1Gi",
				ImagePullSecrets:   []string{},
				PodStartupTimeout:  60 * time.Second,
				LabelPrefix:        "bay",
				NetworkPolicy:      true,
				AllowDNS:           true,
				RequestRatio:       0.25,
				ConnectMode:        "pod_ip",
				// As internal/bay/k8s.DefaultSeccompUserNamespacesProfile (scripts/k8s installs it).
				SeccompUsernsProfile: "shipyard/userns.json",
				RunscRuntimeClass:    "gvisor",
				HostMounts:           "configmap",
				EgressGateway:        K8sEgressGatewayConfig{ApplyTimeout: 15 * time.Second},
			},
		},
		Skills: SkillsConfig{MaxArchiveBytes: 32 << 20, MaxUnpackedBytes: 64 << 20, MaxFiles: 2000},
		Cargo: CargoConfig{
			RootPath:           "/var/lib/bay/cargos",
			DefaultSizeLimitMB: 1024,
			MountPath:          "/workspace",
			MaxUploadBytes:     DefaultMaxUploadBytes,
		},
		Security: SecurityConfig{
			AllowAnonymous:  false,
			BlockedHosts:    slices.Clone(netguard.DefaultBlocked),
			AllowedHosts:    []string{},
			SandboxFirewall: true,
		},
		Idempotency: IdempotencyConfig{Enabled: true, TTLHours: 1},
		GC: GCConfig{
			Enabled:        true,
			RunOnStartup:   true,
			Interval:       300 * time.Second,
			IdleSession:    GCTaskConfig{Enabled: true},
			ExpiredSandbox: GCTaskConfig{Enabled: true},
			OrphanCargo:    GCTaskConfig{Enabled: true},
			OrphanContainer: OrphanContainerTask{
				Enabled: false,
				Grace:   300 * time.Second,
			},
		},
		WarmPool: WarmPoolConfig{
			Enabled:                       true,
			WarmupQueueWorkers:            2,
			WarmupQueueMaxSize:            256,
			WarmupQueueDropPolicy:         "drop_newest",
			WarmupQueueDropAlertThreshold: 50,
			Interval:                      30 * time.Second,
			RunOnStartup:                  true,
		},
		BrowserLearning: BrowserLearningConfig{
			Enabled:                      true,
			RunOnStartup:                 true,
			Interval:                     300 * time.Second,
			BatchSize:                    20,
			ScoreThreshold:               0.85,
			ReplaySuccessThreshold:       0.95,
			MinSamples:                   30,
			CanaryWindowHours:            24,
			SuccessDropThreshold:         0.03,
			ErrorRateMultiplierThreshold: 2.0,
		},
		BrowserService:            BrowserServiceConfig{Enabled: false, Endpoint: "http://gull-service:8115"},
		BrowserAutoReleaseEnabled: true,
		Proxy:                     ProxyConfig{DefaultNoProxy: DefaultNoProxy},
		Session:                   SessionConfig{ReadinessTimeout: 60 * time.Second},
		Execs:                     defaultExecs(),
		Jobs:                      JobsConfig{MaxDuration: 24 * time.Hour, PollInterval: 2 * time.Second},
		Limits:                    defaultLimits(),
		Reuse:                     ReuseConfig{Mode: ReuseProjectAgent, IdleTTL: 1800 * time.Second, HardTTL: 21600 * time.Second, LockTimeout: 600 * time.Second},
		ProfileSpecs:              DefaultProfileSpecs(),
	}
	if err := c.Validate(); err != nil {
		panic("config: defaults are invalid: " + err.Error())
	}
	return c
}

// DefaultProfileSpecs are the profiles used when none are configured.
func DefaultProfileSpecs() []ProfileSpec {
	mk := func(id, image string, cpus float64, mem string) ProfileSpec {
		var p ProfileSpec
		p.applyDefaults()
		p.ID = id
		p.Image = image
		p.Resources = &ResourcesSpec{CPUs: cpus, Memory: mem}
		p.Capabilities = []string{"filesystem", "shell", "python"}
		return p
	}
	return []ProfileSpec{
		mk("python-default", "ship:latest", 1.0, "1g"),
		mk("python-data", "ship:latest", 2.0, "4g"),
		browserPython(),
	}
}

// browserPython is ship plus a gull browser sidecar sharing the cargo: ship serves python,
// shell and files, gull the browser. Chromium's threads count against the pids limit, so the
// profile allows 512 (a page with a few cross-site frames needs over 256). Ship starts its
// kernel on the first python call (shipapi.EnvNoKernel), so that Chromium does not share the
// sandbox's start with it; that call waits for the kernel instead.
func browserPython() ProfileSpec {
	var p ProfileSpec
	p.applyDefaults()
	p.ID = "browser-python"
	desc := "Python sandbox with a headless browser (Chromium) next to it"
	p.Description = &desc
	var ship, gull ContainerSpec
	ship.applyDefaults()
	ship.Name, ship.Image = "ship", "ship:latest"
	ship.Capabilities = []string{"python", "shell", "filesystem"}
	ship.PrimaryFor = []string{"python", "shell", "filesystem"}
	ship.Env = map[string]string{shipapi.EnvNoKernel: "1"}
	gull.applyDefaults()
	gull.Name, gull.Image, gull.RuntimeType, gull.RuntimePort = "browser", "gull:latest", bay.RuntimeGull, 8115
	gull.Capabilities = []string{"browser"}
	p.Containers = []ContainerSpec{ship, gull}
	p.PidsLimit = 512
	return p
}

// Profile returns the normalised profile with the given id.
func (c *Config) Profile(id string) (*bay.Profile, bool) {
	for i := range c.Profiles {
		if c.Profiles[i].ID == id {
			return &c.Profiles[i], true
		}
	}
	return nil, false
}

// ProfileSpec returns the profile spec (as written) with the given id, for the settings that
// bay.Profile does not carry (warm-up retry settings, browser mode).
func (c *Config) ProfileSpec(id string) (*ProfileSpec, bool) {
	for i := range c.ProfileSpecs {
		if c.ProfileSpecs[i].ID == id {
			return &c.ProfileSpecs[i], true
		}
	}
	return nil, false
}

// InstanceID is the GC instance id written into container labels: gc.instance_id, else
// $HOSTNAME (as seen by Load), else "bay".
func (c *Config) InstanceID() string {
	switch {
	case c.GC.InstanceID != "":
		return c.GC.InstanceID
	case c.Hostname != "":
		return c.Hostname
	default:
		return "bay"
	}
}
