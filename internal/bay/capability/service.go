// Package capability is bay's capability service: python, shell, files, the terminal and the
// browser, each called on the runtime of the sandbox's session that serves it, through the
// runtime clients by type. It asks the lifecycle service (internal/bay/sandbox) for a running
// session and tells it about runtimes found dead, heals runtime faults within a call
// (faults.go), and records an execution-history row for every python, shell and browser call.
// It answers domain values; the HTTP layer renders them.
//
// Every error returned is a classified *bay.Error (or wraps one); messages are safe for
// clients and causes are logged.
package capability

import (
	"log/slog"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/gullclient"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// Config holds the service's settings; zero values take the defaults noted.
type Config struct {
	// WatchdogDelay and WatchdogEvery pace the health checks that end a call whose runtime
	// froze (faults.go; defaults 2 s and 2 s).
	WatchdogDelay time.Duration
	WatchdogEvery time.Duration
	// Limits bound exec output and the files written, uploaded, read and downloaded (zero:
	// bay.DefaultCallLimits). The exec timeouts are checked where requests are decoded.
	Limits bay.CallLimits
}

// Service runs capability calls. Create it with New.
type Service struct {
	lc *sandbox.Service
	// ship serves the code capabilities (python, shell, files, terminal); gull the browser
	// (nil: no browser calls, see SetGull). Readiness, descriptions and health go through the
	// lifecycle's runtime clients by type.
	ship *shipclient.Client
	gull *gullclient.Client
	// skills keep browser traces and resolve skill runs (nil: none, see SetSkills).
	skills Skills
	log    *slog.Logger
	cfg    Config
}

// Limits are the limits the service applies.
func (s *Service) Limits() bay.CallLimits { return s.cfg.Limits }

// New returns a service over the lifecycle service lc. ship nil = a default client; log nil =
// discard.
func New(lc *sandbox.Service, ship *shipclient.Client, log *slog.Logger, cfg Config) *Service {
	if cfg.WatchdogDelay <= 0 {
		cfg.WatchdogDelay = 2 * time.Second
	}
	if cfg.WatchdogEvery <= 0 {
		cfg.WatchdogEvery = 2 * time.Second
	}
	if cfg.Limits == (bay.CallLimits{}) {
		cfg.Limits = bay.DefaultCallLimits()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ship == nil {
		ship = shipclient.New(nil, log)
	}
	return &Service{lc: lc, ship: ship, log: log.With("component", "capability"), cfg: cfg}
}
