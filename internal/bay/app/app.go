// Package app wires the bay daemon: configuration -> store -> driver -> authentication ->
// services (lifecycle, capability, history) -> background loops (GC, warm pool, idempotency sweep) -> HTTP server.
// Main.Run serves until its context ends, then drains in-flight requests and stops the loops.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/auth"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/console"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/bay/gullclient"
	"github.com/shipyard-dev/shipyard/internal/bay/history"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/jobs"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/bay/lease"
	"github.com/shipyard-dev/shipyard/internal/bay/metrics"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
	"github.com/shipyard-dev/shipyard/internal/bay/reuse"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/usage"
	"github.com/shipyard-dev/shipyard/internal/bay/warmpool"
	"github.com/shipyard-dev/shipyard/internal/logctx"
)

var (
	_ gc.Lifecycle        = (*sandbox.Service)(nil)
	_ warmpool.Lifecycle  = (*sandbox.Service)(nil)
	_ sandbox.WarmClaimer = (*warmpool.Pool)(nil)
	_ httpapi.GCAdmin     = (*gc.Scheduler)(nil)
)

// Main is the bay daemon. Zero fields take defaults; tests set Addr to 127.0.0.1:0 and may
// inject Config, Store or Driver.
type Main struct {
	// ConfigFile is the --config flag ("" = BAY_CONFIG_FILE or the search paths).
	ConfigFile string
	// Env is the environment ("KEY=value"); nil = os.Environ().
	Env []string
	// Config, when set, is used instead of loading one.
	Config *config.Config
	// Addr overrides server.host:server.port (e.g. "127.0.0.1:0").
	Addr string
	// Store and Driver, when set, are used instead of opening the configured ones (the caller
	// closes them).
	Store  bay.Store
	Driver bay.Driver
	// Log receives every component's logs (default: JSON on stderr at info).
	Log *slog.Logger
	// Version is reported by /health.
	Version string
	// ShutdownTimeout bounds the drain of in-flight requests (default 30 s).
	ShutdownTimeout time.Duration
	// MountMCP, when set, mounts the MCP server returned at /mcp (authenticated). The lead
	// wires internal/mcp here.
	MountMCP func(m *Main) http.Handler
	// Tune, when set, adjusts the lifecycle service's configuration before it is built
	// (benchmarks and tests).
	Tune func(*sandbox.Config)
	// BuildImage, when set, builds one of the images `bay image build` makes (bay.BuiltImages)
	// on the platform, writing progress lines to progress; with images.build_missing, bay
	// builds its profiles' missing images with it in the background. cmd/bay wires
	// internal/imagebuild.
	BuildImage func(ctx context.Context, image string, progress io.Writer) error

	mu      sync.Mutex
	addr    net.Addr
	ready   chan struct{}
	service *sandbox.Service
	server  *httpapi.Server
}

// Ready is closed once the server listens (Addr is valid then).
func (m *Main) Ready() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	return m.ready
}

// ListenAddr returns the address the server listens on (after Ready).
func (m *Main) ListenAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.addr == nil {
		return ""
	}
	return m.addr.String()
}

// Service returns the lifecycle service (after Ready).
func (m *Main) Service() *sandbox.Service {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.service
}

// Server returns the HTTP API (after Ready).
func (m *Main) Server() *httpapi.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.server
}

// Run builds everything and serves until ctx ends, then shuts down gracefully: the listener
// closes, in-flight requests drain (bounded by ShutdownTimeout), background loops stop, and
// the store and driver are closed.
func (m *Main) Run(ctx context.Context) (err error) {
	log := m.Log
	if log == nil {
		log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// Every line logged with a request's context names the request (and its owner).
	log = logctx.Wrap(log)
	env := m.Env
	if env == nil {
		env = os.Environ()
	}
	cfg := m.Config
	if cfg == nil {
		cfg, err = config.Load(config.LoadOptions{File: m.ConfigFile, Env: env})
		if err != nil {
			return err
		}
	}
	if cfg.File != "" {
		log.InfoContext(ctx, "configuration loaded", "file", cfg.File)
	}

	store := m.Store
	if store == nil {
		s, err := openStore(ctx, cfg.Database, log)
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
	}

	// Metrics observe the store and the driver through decorators (below), and the egress
	// gateway's refusals and DNS queries.
	met := metrics.New(m.Version, log)
	drv := m.Driver
	var guard *netguard.Guard // nil: no firewall to refresh
	if drv == nil {
		if cfg.Driver.Type == "k8s" {
			d, err := k8sDriver(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer d.Close()
			drv = d
		}
	}
	if drv == nil {
		dc := docker.DefaultConfig()
		dc.Socket = cfg.Driver.Docker.Socket
		dc.Network = cfg.Driver.Docker.Network
		dc.ConnectMode = docker.ConnectMode(cfg.Driver.Docker.ConnectMode)
		dc.HostAddress = cfg.Driver.Docker.HostAddress
		dc.PublishPorts = cfg.Driver.Docker.PublishPorts
		dc.HostPort = cfg.Driver.Docker.HostPort
		dc.ImageCache = docker.ImageCacheMode(cfg.Driver.Docker.ImageCache)
		dc.CargoQuota = docker.CargoQuotaMode(cfg.Driver.Docker.CargoQuota)
		dc.CargoDir = cfg.Driver.Docker.CargoDir
		dc.NamesDir = cfg.Driver.Docker.NamesDir
		d, err := docker.New(dc, log)
		if err != nil {
			return fmt.Errorf("docker driver: %w", err)
		}
		defer d.Close()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = d.Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("docker engine at %s is not reachable: %w", dc.Socket, err)
		}
		hook, g := networkGuard(ctx, cfg, log)
		d.SetNetworkGuard(hook)
		guard = g
		if eg := egressGateway(cfg, g != nil, met, log); eg != nil {
			d.SetEgress(eg)
			defer eg.Close()
		}
		drv = d
	}

	// Images bay builds in the background (images.build_missing) are not missing to a create:
	// it starts on the image's stand-in, or is told to retry, while they build.
	builds := &bay.ImageBuilds{}
	var imagePlan []string
	if ic, ok := bay.DriverPort[bay.ImageChecker](drv); ok {
		missing := findMissingImages(ctx, ic, cfg.Profiles, log)
		if cfg.Images.BuildMissing && m.BuildImage != nil {
			imagePlan = planImageBuilds(ctx, ic, missing, builds, log)
		} else if cfg.Images.BuildMissing {
			log.WarnContext(ctx, "images.build_missing is set, but this bay cannot build images")
		}
		warnMissingImages(ctx, missing, builds, log)
	}

	// Metrics observe the store and the driver through decorators; rawStore and rawDrv stay
	// for what must not be counted (the scrape's own reads) or needs the concrete driver.
	rawStore, rawDrv := store, drv
	store, drv = met.Store(store), met.Driver(drv)
	met.RegisterState(rawStore)

	dataDir := lookup(env, config.EnvDataDir)
	authn, _, err := auth.Provision(ctx, store, cfg, env, dataDir, log)
	if err != nil {
		return fmt.Errorf("provision api keys: %w", err)
	}

	instanceID := cfg.InstanceID()
	deployment, err := store.DeploymentID(ctx)
	if err != nil {
		return err
	}
	ship := shipclient.New(nil, log)
	// The global proxy block is already resolved into every profile container's (config).
	scfg := sandbox.Config{
		Profiles:           cfg.Profiles,
		InstanceID:         instanceID,
		Deployment:         deployment,
		ReadinessTimeout:   cfg.Session.ReadinessTimeout,
		DefaultCargoSizeMB: cfg.Cargo.DefaultSizeLimitMB,
		EagerVolume:        cfg.Cargo.EagerVolume,
		SkillsRoot:         cfg.Skills.RootPath,
		ImageBuilds:        builds,
	}
	if m.Tune != nil {
		m.Tune(&scfg)
	}
	svc := sandbox.New(store, drv, ship, nil, log, scfg)
	caps := capability.New(svc, ship, log, capability.Config{Limits: cfg.Limits.CallLimits()})
	caps.SetGull(gullclient.New(nil, log))
	lib, err := openSkills(ctx, cfg, store, dataDir, log)
	if err != nil {
		return fmt.Errorf("skill library: %w", err)
	}
	svc.SetSkills(lib)
	utcNow := func() time.Time { return time.Now().UTC() }
	if err := lease.ClaimInstance(ctx, store, instanceID, svc.BootID(), utcNow); err != nil {
		return fmt.Errorf("instance id: %w", err)
	}
	idem := idempotency.New(store, nil, idempotency.Config{Enabled: cfg.Idempotency.Enabled, TTL: cfg.Idempotency.TTL()}, log)

	gcc := gc.Config{
		Enabled: cfg.GC.Enabled, RunOnStartup: cfg.GC.RunOnStartup, Interval: cfg.GC.Interval,
		InstanceID: instanceID, BootID: svc.BootID(), Deployment: deployment,
		Tasks: map[string]bool{
			gc.TaskIdleSession: cfg.GC.IdleSession.Enabled, gc.TaskExpiredSandbox: cfg.GC.ExpiredSandbox.Enabled,
			gc.TaskOrphanCargo: cfg.GC.OrphanCargo.Enabled, gc.TaskOrphanContainer: cfg.GC.OrphanContainer.Enabled,
		},
		OrphanGrace:           cfg.GC.OrphanContainer.Grace,
		OrphanContainerDryRun: cfg.GC.OrphanContainer.DryRun,
		StaleStartAfter:       svc.Config().ReadinessTimeout + svc.Config().StaleStartMargin,
		Observe:               met.ObserveGC,
	}
	sched := gc.New(store, drv, svc, nil, log, gcc)

	wpc := warmpool.Config{
		Enabled: cfg.WarmPool.Enabled, InstanceID: instanceID, Interval: cfg.WarmPool.Interval,
		RunOnStartup: cfg.WarmPool.RunOnStartup, Workers: cfg.WarmPool.WarmupQueueWorkers,
		QueueSize: cfg.WarmPool.WarmupQueueMaxSize, DropPolicy: cfg.WarmPool.WarmupQueueDropPolicy,
		CleanupOnShutdown: cfg.WarmPool.CleanupOnShutdown,
	}
	for _, p := range cfg.Profiles {
		pc := warmpool.ProfileConfig{ProfileID: p.ID, Size: p.WarmPoolSize, RotateTTL: p.WarmRotateTTL, IdleTimeout: p.IdleTimeout}
		if spec, ok := cfg.ProfileSpec(p.ID); ok {
			pc.MaxAttempts = spec.WarmupRetryMaxAttempts
			pc.BackoffBase = time.Duration(spec.WarmupRetryBackoffBaseMS) * time.Millisecond
			pc.BackoffMax = time.Duration(spec.WarmupRetryBackoffMaxMS) * time.Millisecond
		}
		wpc.Profiles = append(wpc.Profiles, pc)
	}
	// A warm sandbox is made available only once its kernel has answered a silent cell, so a
	// claim never pays for the kernel start that ship began at boot.
	wpc.Prime = func(ctx context.Context, sess *bay.Session) error {
		res, err := ship.ExecPython(ctx, sess.AuthorizedURL(sess.Primary().Endpoint), shipapi.ExecPythonRequest{Code: "pass", Silent: true, Timeout: 60})
		if err != nil {
			return fmt.Errorf("prime kernel: %w", err)
		}
		if !res.Success {
			return fmt.Errorf("prime kernel: the warm-up cell failed")
		}
		return nil
	}
	pool := warmpool.New(store, drv, svc, nil, log, wpc)
	svc.SetWarmClaimer(pool)

	jobSvc := jobs.New(caps, ship, store, jobs.Config{MaxDuration: cfg.Jobs.MaxDuration, PollInterval: cfg.Jobs.PollInterval, Holder: svc.BootID(), Log: log})
	defer jobSvc.Close()
	if err := jobSvc.Resume(ctx); err != nil {
		return err
	}
	execSvc, err := buildExecs(ctx, cfg, store, drv, lib, dataDir, deployment, sched.GoneAfter(), log)
	if err != nil {
		return err
	}
	defer stopExecs(ctx, execSvc)
	// The skill lifecycle's store port is not behind the metrics decorator (its calls go
	// untimed): the decorator would hide it.
	skillLife, learn := skillLifecycle(rawStore, svc, caps, cfg, instanceID, log)
	opts := httpapi.Options{
		Service: svc, Capabilities: caps, History: history.New(store), Idempotency: idem, Auth: authn, GC: sched, Skills: lib, Log: log,
		Execs: execSvc, Jobs: jobSvc, SkillLife: skillLife,
		Reuse: reuse.Config{Disabled: cfg.Reuse.Mode != config.ReuseProjectAgent, LockTimeout: cfg.Reuse.LockTimeout,
			Defaults: reuse.Policy{IdleTTL: cfg.Reuse.IdleTTL, HardTTL: cfg.Reuse.HardTTL}},
		Version: m.Version, MaxUploadBytes: int64(cfg.Cargo.MaxUploadBytes),
		Observer: met, Readiness: readiness(rawStore, rawDrv),
		Keys: authn, WarmPool: warmPoolReport{pool: pool, met: met},
	}
	if u := usage.New(store, drv); u != nil {
		opts.Usage = u
	}
	api := httpapi.New(opts)
	// Prometheus scrapes with an API key like any client (bearer_token in its scrape config):
	// the metrics name no owner, but they describe the whole platform.
	api.Mount("GET "+bayapi.PathMetrics, met.Handler(), true)
	if m.MountMCP != nil {
		// MCP spot: the lead mounts internal/mcp here (authenticated like every endpoint).
		if h := m.MountMCP(m); h != nil {
			api.Mount("/mcp", h, true)
		}
	}

	api.Mount(console.Prefix, console.Handler(), false)

	addr := m.Addr
	if addr == "" {
		addr = net.JoinHostPort(cfg.Server.Host, strconv.Itoa(cfg.Server.Port))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           api.Handler(),
		MaxHeaderBytes:    httpapi.MaxHeaderBytes,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	// Running sandboxes of closed network policies are refused everything until the resolver
	// and gateway of this process know them again (a restart of bay): before serving.
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	if n, err := svc.RestoreNetworks(rctx); err != nil {
		log.WarnContext(ctx, "restoring the network policies of running sandboxes", "restored", n, "err", err)
	} else if n > 0 {
		log.InfoContext(ctx, "network policies of running sandboxes restored", "sandboxes", n)
	}
	rcancel()

	// Background loops run until bgCtx ends (after the HTTP drain).
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	loops := map[string]func(context.Context) error{"gc": sched.Run, "warmpool": pool.Run, "idempotency": idem.Run,
		"deathwatch": svc.WatchDeaths, "learning": learn, "apikeys": authn.Run, "netrestore": svc.KeepNetworksRestored,
		"instance": func(ctx context.Context) error {
			return lease.HoldInstance(ctx, store, instanceID, svc.BootID(), utcNow, log)
		}}
	if guard != nil {
		loops["netguard"] = guard.Run
	}
	if execSvc != nil {
		// The open execs of bay instances of this database that went away for good: at once,
		// then every execs.adopt_interval_seconds.
		loops["execadopt"] = execSvc.RunAdoption
	}
	var warmBuilt func(context.Context, string)
	if w, ok := rawDrv.(imageCacheWarmer); ok {
		loops["imagecache"] = func(ctx context.Context) error { warmImageCaches(ctx, w, cfg.Profiles, log); return nil }
		warmBuilt = func(ctx context.Context, img string) { warmImageCache(ctx, w, img, log) }
	}
	if len(imagePlan) > 0 {
		loops["imagebuild"] = func(ctx context.Context) error {
			buildImages(ctx, imagePlan, builds, m.BuildImage, warmBuilt, log)
			return nil
		}
	}
	for name, run := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(bgCtx); err != nil && !errors.Is(err, context.Canceled) {
				log.ErrorContext(ctx, "background loop stopped", "loop", name, "err", err)
			}
		}()
	}

	// What starting allocated and dropped (package initialisation, such as the JSON Schema
	// library's 1.7 MB for its metaschemas, the configuration, the migrations) would stay in
	// bay's resident memory until the heap grows enough for a collection: collect it once now
	// and hand the pages back (about 0.8 MiB of an idle bay).
	debug.FreeOSMemory()
	// Logged before ListenAddr answers, so that whoever waits for it reads the line first.
	log.InfoContext(ctx, "bay listening", "addr", ln.Addr().String(), "instance_id", instanceID, "version", m.Version)
	m.mu.Lock()
	m.addr, m.service, m.server = ln.Addr(), svc, api
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	close(m.ready)
	m.mu.Unlock()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(httpapi.WrapListener(ln, log)) }()

	select {
	case err = <-serveErr:
		stopBG()
		wg.Wait()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.InfoContext(ctx, "shutting down: draining in-flight requests")
	timeout := m.ShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.WarnContext(ctx, "drain incomplete, closing remaining connections", "err", err)
		_ = srv.Close()
	}
	stopBG()
	wg.Wait()
	log.InfoContext(ctx, "bay stopped")
	return nil
}

func lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// imageCacheWarmer is implemented by drivers with an image cache (internal/bay/docker).
type imageCacheWarmer interface {
	WarmImageCache(ctx context.Context, image string) (bool, error)
}

// warmImageCaches prepares the image cache of every profile image, one image at a time (each
// copy is disk-bound), and logs "image cache warm" once per image: benchmarks wait for it.
func warmImageCaches(ctx context.Context, w imageCacheWarmer, profiles []bay.Profile, log *slog.Logger) {
	var images []string
	for _, p := range profiles {
		for _, c := range p.Containers {
			if c.Image != "" && !slices.Contains(images, c.Image) {
				images = append(images, c.Image)
			}
		}
	}
	for _, img := range images {
		warmImageCache(ctx, w, img, log)
	}
}

// warmImageCache prepares the image cache of img and logs "image cache warm": benchmarks wait
// for it.
func warmImageCache(ctx context.Context, w imageCacheWarmer, img string, log *slog.Logger) {
	began := time.Now()
	used, err := w.WarmImageCache(ctx, img)
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "image cache not warmed; sandboxes of this image read it from the image", "image", img, "err", err)
		}
		return
	}
	log.InfoContext(ctx, "image cache warm", "image", img, "used", used, "took_ms", time.Since(began).Milliseconds())
}

// networkGuard returns the Docker driver's host firewall hook (internal/bay/netguard) and the
// guard to refresh in the background (nil when there is none). When the firewall is on but
// cannot be installed here, the hook fails every sandbox start with the reason (logged once
// now): sandboxes never run open unless security.sandbox_firewall is off.
func networkGuard(ctx context.Context, cfg *config.Config, log *slog.Logger) (docker.NetworkGuard, *netguard.Guard) {
	if !cfg.Security.SandboxFirewall {
		log.WarnContext(ctx, "security.sandbox_firewall is off: sandboxes can reach this host and private networks")
		return nil, nil
	}
	blocked, err := netguard.ParseHosts(cfg.Security.BlockedHosts)
	var allowed []netip.Prefix
	if err == nil {
		allowed, err = netguard.ParseHosts(cfg.Security.AllowedHosts)
	}
	var g *netguard.Guard
	if err == nil {
		g, err = netguard.New(ctx, netguard.Config{Blocked: blocked, Allowed: allowed, Log: log.With("component", "netguard")})
	}
	if err != nil {
		log.ErrorContext(ctx, "sandbox firewall unavailable: sandboxes will not start", "err", err)
		refused := bay.Errorf(bay.CodeUnavailable, "Sandboxes cannot start: the sandbox network firewall is unavailable on bay's host (see bay's log)").WithCause(err)
		return func(context.Context, string, map[string]string) error { return refused }, nil
	}
	// The driver puts runtimes on the configured network, except in host_port mode (see
	// docker's networks): that network is the operator's.
	if n := cfg.Driver.Docker.Network; n != "" && (cfg.Driver.Docker.ConnectMode != string(docker.ConnectHostPort) || n == "bridge") {
		log.WarnContext(ctx, "driver.docker.network is set: that network is the operator's and bay's firewall does not guard it",
			"network", cfg.Driver.Docker.Network)
	}
	return func(ctx context.Context, id string, options map[string]string) error {
		return g.Protect(ctx, netguard.BridgeName(id, options))
	}, g
}

// readiness are the checks of GET /readyz: the database answers a read (a missing row is an
// answer) and the container engine answers a ping.
func readiness(store bay.Reader, drv bay.Driver) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"database": func(ctx context.Context) error {
			if _, err := store.GetSandbox(ctx, "readiness-probe"); err != nil && !bay.IsNotFound(err) {
				return err
			}
			return nil
		},
		"engine": drv.Ping,
	}
}

// k8sDriver is the Kubernetes driver of driver.k8s, checked against the cluster.
func k8sDriver(ctx context.Context, cfg *config.Config, log *slog.Logger) (*k8s.Driver, error) {
	kc := k8s.DefaultConfig()
	c := cfg.Driver.K8s
	kc.Namespace, kc.Kubeconfig, kc.StorageClass = c.Namespace, c.Kubeconfig, c.StorageClass
	kc.DefaultStorageSize, kc.ImagePullSecrets, kc.PodStartupTimeout = c.DefaultStorageSize, c.ImagePullSecrets, c.PodStartupTimeout
	kc.LabelPrefix, kc.RuntimeClassName, kc.RuntimeCaps = c.LabelPrefix, c.RuntimeClassName, c.RuntimeCaps
	kc.NetworkPolicy, kc.BayCIDRs, kc.BayPodLabels, kc.BayNamespace = c.NetworkPolicy, c.BayCIDRs, c.BayPodLabels, c.BayNamespace
	kc.AllowDNS, kc.RequestRatio, kc.ConnectMode = c.AllowDNS, c.RequestRatio, k8s.ConnectMode(c.ConnectMode)
	kc.ImagePullPolicy = k8s.PullPolicy(cfg.Driver.ImagePullPolicy)
	kc.SeccompUserNamespacesProfile, kc.NoNetworkRuntimeClass = c.SeccompUsernsProfile, c.NoNetworkRuntimeClass
	kc.StorageEnforcesSize, kc.RunscRuntimeClass = c.StorageEnforcesSize, c.RunscRuntimeClass
	kc.HostMounts = k8s.HostMounts(c.HostMounts)
	// The ranges the host firewall keeps sandboxes from on Docker become the NetworkPolicies'
	// exceptions here.
	blocked, err := netguard.ParseHosts(cfg.Security.BlockedHosts)
	if err != nil {
		return nil, fmt.Errorf("k8s driver: security.blocked_hosts: %w", err)
	}
	kc.BlockedRanges = blocked
	if kc.AllowedRanges, err = netguard.ParseHosts(cfg.Security.AllowedHosts); err != nil {
		return nil, fmt.Errorf("k8s driver: security.allowed_hosts: %w", err)
	}
	if g := c.EgressGateway; g.Service != "" {
		tok, err := os.ReadFile(g.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("k8s driver: driver.k8s.egress_gateway.token_file: %w", err)
		}
		kc.EgressGateway = k8s.EgressGateway{Service: g.Service, Namespace: g.Namespace,
			Token: strings.TrimSpace(string(tok)), ApplyTimeout: g.ApplyTimeout}
	}
	d, err := k8s.New(kc, log)
	if err != nil {
		return nil, fmt.Errorf("k8s driver: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Ping(pctx); err != nil {
		return nil, fmt.Errorf("kubernetes cluster is not reachable: %w", err)
	}
	return d, nil
}

// warmPoolReport answers GET /v1/admin/warmpool: the pools' states from the store (every
// bay's warm sandboxes) with this bay's claim counters.
type warmPoolReport struct {
	pool *warmpool.Pool
	met  *metrics.Metrics
}

func (w warmPoolReport) WarmPoolStatus(ctx context.Context) (bayapi.WarmPoolStatus, error) {
	cfg := w.pool.Config()
	out := bayapi.WarmPoolStatus{Enabled: cfg.Enabled, IntervalSeconds: int(cfg.Interval / time.Second), Profiles: []bayapi.WarmPoolProfile{}}
	st, err := w.pool.Status(ctx)
	if err != nil {
		return out, err
	}
	for _, p := range st {
		hits, misses := w.met.WarmClaims(p.ProfileID)
		out.Profiles = append(out.Profiles, bayapi.WarmPoolProfile{Profile: p.ProfileID, Target: p.Target, Ready: p.Ready,
			Starting: p.Starting, Retiring: p.Retiring, Hits: hits, Misses: misses})
	}
	return out, nil
}
