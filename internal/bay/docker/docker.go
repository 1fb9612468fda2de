// Package docker is the bay.Driver on the Docker Engine API (through the moby Go client, never
// the docker CLI). It passes internal/bay/drivertest against a real engine.
//
// What it guarantees, where the reference implementation did not:
//
//   - every container is hardened regardless of its spec: all capabilities dropped,
//     no-new-privileges, a non-root user (the spec's, default 1000:1000), a pids limit (the
//     spec's, default 256), memory with swap capped at the same value, no privileged mode, no
//     host or container network mode;
//   - a runtime port is published on a loopback address only, never on 0.0.0.0, and unless a
//     network is configured runtimes cannot reach each other (SandboxNetwork);
//   - DestroyInstance force-removes (kill + remove, anonymous volumes included), so nothing
//     exited is left behind, and a missing container is success;
//   - a container never silently gets a fresh empty volume: a missing cargo volume is reported
//     (the engine would auto-create one), and a missing image says how to build it (there is no
//     registry, the driver never pulls);
//   - on a storage driver that is slow to read (fuse-overlayfs, vfs), an image's declared hot
//     paths are served from engine volumes, read-only (imagecache.go).
//
// The root filesystem is read-only, and /tmp and /var/tmp are tmpfs of a bounded size (the spec's
// TmpBytes, default DefaultTmpBytes, counted in the memory limit): a sandbox writes only there,
// to /dev/shm and to its cargo, so user code cannot fill the host's disk through the container's
// writable layer (the storage drivers in use here, overlay2 on ext4 and fuse-overlayfs, cannot
// bound it). $HOME is the workspace, so caches and user installs land in the cargo.
//
// The client negotiates the API version with the engine (here 1.41, Docker 20.10), and the
// driver uses no feature newer than 1.41.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ConnectMode is how bay reaches a runtime's port.
type ConnectMode string

const (
	// ConnectContainerNetwork: the container's IP on the configured network (or its first
	// network); bay must be able to route to it (same host, or bay in a container on that
	// network).
	ConnectContainerNetwork ConnectMode = "container_network"
	// ConnectHostPort: the runtime port published on a loopback address of the engine's host.
	ConnectHostPort ConnectMode = "host_port"
	// ConnectAuto: the container IP when there is one, else the published port.
	ConnectAuto ConnectMode = "auto"
)

// Defaults.
const (
	DefaultSocket      = "unix:///var/run/docker.sock"
	DefaultHostAddress = "127.0.0.1"
	DefaultPidsLimit   = 256
	DefaultTmpBytes    = 256 << 20
	DefaultStopTimeout = 10 * time.Second
	DefaultUser        = "1000:1000"
	// RemoveTimeout bounds a removal when its ctx has no deadline of its own. A force
	// removal (SIGKILL and delete) takes well under a second on an idle engine, but 50
	// concurrent deletes made some take more than 5 s: the bound is generous so that a loaded
	// engine is waited for rather than given up on (a container still there keeps its volume
	// in use).
	RemoveTimeout = 60 * time.Second
)

// Config mirrors config.yaml's driver.docker block, plus DefaultPidsLimit and StopTimeout.
type Config struct {
	// Socket is the engine address: unix:///path (a bare path gets unix:// prefixed) or
	// tcp://host:port.
	Socket string `yaml:"socket"`
	// Network is an existing network to attach runtimes to (container_network and auto modes);
	// "" = SandboxNetwork, bay's own bridge without inter-container communication (also in
	// host_port mode); "bridge" = the engine's default bridge, where sandboxes reach each other.
	Network     string      `yaml:"network"`
	ConnectMode ConnectMode `yaml:"connect_mode"`
	// HostAddress is the host in host_port endpoints; it must be a loopback address (or
	// "localhost") because ports are published on loopback only.
	HostAddress string `yaml:"host_address"`
	// PublishPorts publishes the runtime port (host_port and auto modes; host_port requires it).
	PublishPorts bool `yaml:"publish_ports"`
	// HostPort is a fixed host port (0 = random); only usable with one running container.
	HostPort int `yaml:"host_port"`
	// DefaultPidsLimit applies when a spec has none (0 here = DefaultPidsLimit).
	DefaultPidsLimit int64 `yaml:"default_pids_limit"`
	// DefaultTmpBytes bounds /tmp and /var/tmp when a spec has none (0 here = DefaultTmpBytes).
	DefaultTmpBytes int64 `yaml:"-"`
	// StopTimeout is the grace period the engine gives a container on stop before SIGKILL
	// (recorded on the container; removeContainer kills at once).
	StopTimeout time.Duration `yaml:"stop_timeout"`
	// CargoQuota bounds cargo volumes by their size (quota.go): auto, loop, off.
	CargoQuota CargoQuotaMode `yaml:"cargo_quota"`
	// CargoDir holds the files and mount points of bounded cargos.
	CargoDir string `yaml:"cargo_dir"`
	// ImageCache serves an image's hot read-only paths from engine volumes (see imagecache.go):
	// auto (on for slow storage drivers), on, off.
	ImageCache ImageCacheMode `yaml:"image_cache"`
	// NamesDir holds the resolv.conf and hosts files of instances under runsc (names.go),
	// created 0755 when first needed. It must be a path of the engine's host: the engine binds
	// the files from there.
	NamesDir string `yaml:"names_dir"`
}

// DefaultConfig returns the reference defaults.
func DefaultConfig() Config {
	return Config{
		Socket:           DefaultSocket,
		ConnectMode:      ConnectAuto,
		HostAddress:      DefaultHostAddress,
		PublishPorts:     true,
		DefaultPidsLimit: DefaultPidsLimit,
		DefaultTmpBytes:  DefaultTmpBytes,
		StopTimeout:      DefaultStopTimeout,
		ImageCache:       ImageCacheAuto,
		CargoQuota:       CargoQuotaAuto,
		CargoDir:         DefaultCargoDir,
		NamesDir:         DefaultNamesDir,
	}
}

// withDefaults fills the zero fields whose zero value is not meaningful.
func (c Config) withDefaults() Config {
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if strings.HasPrefix(c.Socket, "/") {
		c.Socket = "unix://" + c.Socket
	}
	if c.ConnectMode == "" {
		c.ConnectMode = ConnectAuto
	}
	if c.HostAddress == "" {
		c.HostAddress = DefaultHostAddress
	}
	if c.DefaultPidsLimit == 0 {
		c.DefaultPidsLimit = DefaultPidsLimit
	}
	if c.DefaultTmpBytes == 0 {
		c.DefaultTmpBytes = DefaultTmpBytes
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.ImageCache == "" {
		c.ImageCache = ImageCacheAuto
	}
	if c.CargoQuota == "" {
		c.CargoQuota = CargoQuotaAuto
	}
	if c.CargoDir == "" {
		c.CargoDir = DefaultCargoDir
	}
	if c.NamesDir == "" {
		c.NamesDir = DefaultNamesDir
	}
	return c
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	switch {
	case strings.HasPrefix(c.Socket, "unix:///"), strings.HasPrefix(c.Socket, "tcp://"):
	default:
		errs = append(errs, fmt.Errorf("socket must be unix:///path, /path or tcp://host:port, got %q", c.Socket))
	}
	switch c.ConnectMode {
	case ConnectContainerNetwork, ConnectAuto:
	case ConnectHostPort:
		if !c.PublishPorts {
			errs = append(errs, errors.New("connect_mode host_port needs publish_ports: true"))
		}
	default:
		errs = append(errs, fmt.Errorf("connect_mode must be container_network, host_port or auto, got %q", c.ConnectMode))
	}
	if _, err := c.publishIP(); err != nil {
		errs = append(errs, err)
	}
	if c.HostPort < 0 || c.HostPort > 65535 {
		errs = append(errs, fmt.Errorf("host_port must be 0 (random) or 1..65535, got %d", c.HostPort))
	}
	if c.DefaultPidsLimit < 0 {
		errs = append(errs, fmt.Errorf("default_pids_limit must be positive, got %d", c.DefaultPidsLimit))
	}
	switch c.CargoQuota {
	case CargoQuotaAuto, CargoQuotaLoop, CargoQuotaOff:
	default:
		errs = append(errs, fmt.Errorf("cargo_quota must be auto, loop or off, got %q", c.CargoQuota))
	}
	if !filepath.IsAbs(c.CargoDir) {
		errs = append(errs, fmt.Errorf("cargo_dir must be an absolute path, got %q", c.CargoDir))
	}
	if !filepath.IsAbs(c.NamesDir) || filepath.Clean(c.NamesDir) == "/" {
		errs = append(errs, fmt.Errorf("names_dir must be an absolute path other than /, got %q", c.NamesDir))
	}
	switch c.ImageCache {
	case ImageCacheAuto, ImageCacheOn, ImageCacheOff:
	default:
		errs = append(errs, fmt.Errorf("image_cache must be auto, on or off, got %q", c.ImageCache))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("stop_timeout must be positive, got %v", c.StopTimeout))
	}
	if c.Network == "host" || c.Network == "none" || strings.HasPrefix(c.Network, "container:") {
		errs = append(errs, fmt.Errorf("network %q is not allowed (runtimes need their own bridge network)", c.Network))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("docker driver config: %w", err)
	}
	return nil
}

// publishIP is the loopback address ports are published on: HostAddress itself, or 127.0.0.1
// for "localhost".
func (c Config) publishIP() (netip.Addr, error) {
	if c.HostAddress == "localhost" {
		return netip.MustParseAddr("127.0.0.1"), nil
	}
	ip, err := netip.ParseAddr(c.HostAddress)
	if err != nil || !ip.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("host_address must be a loopback address (runtime ports are published on loopback only), got %q", c.HostAddress)
	}
	return ip, nil
}

// Driver is the Docker bay.Driver. It is safe for concurrent use.
type Driver struct {
	cfg       Config
	publishIP netip.Addr
	cli       *client.Client
	log       *slog.Logger

	netMu      sync.Mutex   // serialises createNetwork in this process (the engine allows duplicate names)
	sandboxNet string       // SandboxNetwork (tests use their own)
	guard      NetworkGuard // nil: no host firewall (SetNetworkGuard)
	egress     Egress       // nil: modes none and allowlist refused (SetEgress)
	cache      *imageCache

	quotaOnce sync.Once // decides quotaOK once (quota.go)
	quotaOK   bool
	quotaWhy  string
	spares    *spares // pre-formatted cargo files (spares.go)

	rtMu     sync.Mutex
	runtimes map[string]bool // container runtimes the engine listed (runtimes.go)

	resolvFiles    []string  // where the host's resolvers are read from (names.go)
	noResolverOnce sync.Once // warns once that the host has no resolver a sandbox reaches

	lateMu sync.Mutex
	lates  map[string]*lateRun // late starts under way, by instance name (instance.go)
}

var _ bay.Driver = (*Driver)(nil)

// New returns a driver for the engine at cfg.Socket. Zero fields of cfg take their defaults
// (except PublishPorts: start from DefaultConfig). It does not contact the engine; call Ping.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ip, _ := cfg.publishIP()
	cli, err := client.New(client.WithHost(cfg.Socket), client.WithUserAgent("shipyard-bay"))
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", cfg.Socket, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{
		cfg:       cfg,
		publishIP: ip,
		cli:       cli,
		log:       log.With("component", "docker", "socket", cfg.Socket),
	}
	d.cache = &imageCache{d: d, entries: map[string]*cacheEntry{}}
	d.spares = newSpares(d)
	d.sandboxNet = SandboxNetwork
	d.resolvFiles = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}
	return d, nil
}

// Config returns the effective configuration (defaults applied).
func (d *Driver) Config() Config { return d.cfg }

// APIVersion returns the API version the client uses (the negotiated one after Ping).
func (d *Driver) APIVersion() string { return d.cli.ClientVersion() }

// Close stops the refill of spare cargo files, removes the spares it made, and releases the
// client's idle connections.
func (d *Driver) Close() error {
	d.spares.close()
	return d.cli.Close()
}

// Ping checks that the engine answers and negotiates the API version. An unreachable engine
// wraps an error of code unavailable.
func (d *Driver) Ping(ctx context.Context) error {
	res, err := d.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return fmt.Errorf("ping docker engine at %s: %w", d.cfg.Socket, classify(err))
	}
	d.log.DebugContext(ctx, "engine reachable", "api_version", res.APIVersion, "client_version", d.cli.ClientVersion())
	return nil
}

// ---------------------------------------------------------------------------------------------
// error classification
// ---------------------------------------------------------------------------------------------

// errUnavailable classifies "cannot connect to the engine".
var errUnavailable = &bay.Error{Code: bay.CodeUnavailable, Message: "container engine unreachable"}

// classify maps an engine error onto bay.ErrNotFound / bay.ErrConflict / unavailable; other
// errors (and context errors) are returned as they are.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case cerrdefs.IsNotFound(err):
		return bay.Classified(bay.ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return bay.Classified(bay.ErrConflict, err)
	case client.IsErrConnectionFailed(err):
		return bay.Classified(errUnavailable, err)
	}
	return err
}

// hostPort joins a host and port for a URL (brackets IPv6).
func hostPort(host string, port string) string { return net.JoinHostPort(host, port) }
