// Package bay is the domain of the control plane: sandboxes, sessions, cargos, profiles, the
// computed sandbox status, the session state machine as data, domain errors with stable codes,
// and the ports (Driver, Store, Clock) that adapters implement. It depends on the standard
// library only; everything else in internal/bay depends on it, never the other way round.
package bay

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"time"
)

// ID prefixes: ids are "<prefix>-<12 lowercase hex>", as clients of the reference expect.
const (
	PrefixSandbox   = "sandbox"
	PrefixSession   = "sess"
	PrefixCargo     = "ws"
	PrefixExecution = "exec"
)

// NewID returns "<prefix>-<12 random lowercase hex chars>".
func NewID(prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

// VolumeName is the Docker volume / PVC name of a cargo: "bay-cargo-<cargo_id>".
func VolumeName(cargoID string) string { return "bay-cargo-" + cargoID }

// InstanceName is the driver instance of a session: "bay-session-<session_id>". It is derived
// from the session id alone, so that a stop can destroy an instance whose creation is still
// under way.
func InstanceName(sessionID string) string { return InstancePrefix + sessionID }

// InstancePrefix starts the name of every session instance.
const InstancePrefix = "bay-session-"

// SessionOfInstance returns the session id of an instance name, if it is one.
func SessionOfInstance(name string) (string, bool) { return strings.CutPrefix(name, InstancePrefix) }

// Labels written on every object bay creates on the container platform; the reference's
// tools read the same names.
const (
	LabelOwner       = "bay.owner"
	LabelSandboxID   = "bay.sandbox_id"
	LabelSessionID   = "bay.session_id"
	LabelCargoID     = "bay.cargo_id"
	LabelProfileID   = "bay.profile_id"
	LabelRuntimePort = "bay.runtime_port"
	LabelInstanceID  = "bay.instance_id"
	LabelManaged     = "bay.managed"
	LabelCreatedAt   = "bay.created_at" // ours: RFC 3339, for orphan GC's grace period
	// Written by drivers on the objects of an instance.
	LabelInstance      = "bay.instance"       // the instance name
	LabelContainerName = "bay.container_name" // the container's name in its instance
	LabelRuntimeType   = "bay.runtime_type"
	LabelContainerSlot = "bay.container_slot" // the container's index in the instance spec
)

// OwnerWarmPool is the reserved owner of warm-pool sandboxes.
const OwnerWarmPool = "warm-pool"

// OwnerDefault is the owner of anonymous requests without X-Owner and of legacy keys.
const OwnerDefault = "default"

// Warm states of a warm-pool sandbox (Sandbox.WarmState).
const (
	WarmPending   = ""          // being warmed up
	WarmAvailable = "available" // ready to be claimed
	WarmRetiring  = "retiring"  // rotated out, to be deleted
)

// Sandbox is the only externally visible compute resource. Rows are soft-deleted.
type Sandbox struct {
	ID               string
	Owner            string
	ProfileID        string
	CargoID          string
	CurrentSessionID string // "" = no compute
	ExpiresAt        *time.Time
	IdleExpiresAt    *time.Time
	DeletedAt        *time.Time
	CreatedAt        time.Time
	LastActiveAt     time.Time
	// Version is incremented on every update; Store.UpdateSandbox fails with ErrConflict (code
	// conflict) when the stored version differs from the one read (optimistic concurrency).
	Version int64

	// Warm pool bookkeeping. IsWarm sandboxes are invisible to list and to idle/expiry GC.
	IsWarm            bool
	WarmState         string
	WarmReadyAt       *time.Time
	WarmRotateAt      *time.Time
	WarmClaimedAt     *time.Time
	WarmAttempts      int        // failed warm-ups so far (for backoff)
	WarmNextAttemptAt *time.Time // not before this time (backoff)
	WarmInstanceID    string     // bay instance that owns this warm sandbox

	// Network is the sandbox's own network policy, tightened from its profile's by the create
	// request or a PATCH; nil = the profile's.
	Network *NetworkPolicy
}

// SessionState is the observed (and desired) state of a session.
type SessionState string

const (
	SessionPending  SessionState = "pending"
	SessionStarting SessionState = "starting"
	SessionRunning  SessionState = "running"
	SessionStopping SessionState = "stopping"
	SessionStopped  SessionState = "stopped"
	SessionFailed   SessionState = "failed"
)

// Session is the compute of a sandbox: one driver instance (InstanceName(ID)). Internal: never
// exposed by id. A session row is created "starting", becomes "running" once every runtime
// answers, or "failed" with no containers; stop and the reclaims delete the row.
type Session struct {
	ID        string
	SandboxID string
	ProfileID string
	// Containers are the instance's containers, the primary first; nil until the instance
	// exists.
	Containers     []SessionContainer
	DesiredState   SessionState
	ObservedState  SessionState
	InstanceID     string // the bay boot that started it (for stale-start detection)
	CreatedAt      time.Time
	StartedAt      *time.Time // when it entered "starting"
	LastObservedAt *time.Time
	// RuntimeToken is the secret the runtimes require on every call but /health ("" for
	// sessions started without one). Never logged, never on the wire of bay's API.
	RuntimeToken string
}

// Primary returns the primary container, or nil when the session has none.
func (s *Session) Primary() *SessionContainer {
	if s == nil || len(s.Containers) == 0 {
		return nil
	}
	return &s.Containers[0]
}

// Container returns the session's container named name, or nil.
func (s *Session) Container(name string) *SessionContainer {
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}

// RuntimeUserName is the user name of the credentials in an authorized runtime URL.
const RuntimeUserName = "bay"

// AuthorizedURL returns endpoint (a runtime base URL) with the session's token as the
// password of its user info: Go's HTTP client turns that into an Authorization header on every
// request (and strips it from error messages), so callers pass it on like any endpoint. It is
// never to be logged; without a token it is endpoint itself.
func (s *Session) AuthorizedURL(endpoint string) string {
	if s == nil || s.RuntimeToken == "" || endpoint == "" {
		return endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	u.User = url.UserPassword(RuntimeUserName, s.RuntimeToken)
	return u.String()
}

// SessionContainer is one container of a session's instance.
type SessionContainer struct {
	Name         string   `json:"name"`
	ContainerID  string   `json:"container_id"`
	Endpoint     string   `json:"endpoint"`
	Status       string   `json:"status"`
	RuntimeType  string   `json:"runtime_type"`
	Capabilities []string `json:"capabilities"`
}

// Ready reports whether the session can serve calls: running, with a reachable primary.
func (s *Session) Ready() bool {
	p := s.Primary()
	return s.ObservedState == SessionRunning && p != nil && p.Endpoint != ""
}

// Cargo backends.
const BackendDockerVolume = "docker_volume"

// Cargo is a persistent workspace volume, mounted at /workspace.
type Cargo struct {
	ID                 string
	Owner              string
	Backend            string // always BackendDockerVolume on the wire
	DriverRef          string // volume name (or host path in bind mode)
	Managed            bool   // true: created for one sandbox and deleted with it
	ManagedBySandboxID string // "" for external cargos
	SizeLimitMB        int
	CreatedAt          time.Time
	LastAccessedAt     time.Time
	// Usage is read from the driver for a single cargo (never stored); nil when unknown (no
	// volume yet, or a list).
	Usage *CargoUsage
}

// CargoUsage is what a cargo's volume holds against its limit.
type CargoUsage struct {
	Enforced  bool  // the driver bounds the volume by SizeLimitMB
	UsedBytes int64 // -1 when the driver cannot tell
}

// Execution is one row of execution history.
type Execution struct {
	ID              string
	Owner           string
	SandboxID       string
	SessionID       string // may be ""
	ExecType        string // python | shell | browser | browser_batch
	Code            string
	Success         bool
	ExecutionTimeMS int64
	Output          *string
	Error           *string
	PayloadRef      *string
	// Images are the rich outputs of a Python call, each one MIME type -> base64 data
	// ({"image/png": "..."}), as the runtime returned them (it bounds their size); nil for none.
	Images           []map[string]string
	Description      *string
	Tags             *string // normalised: split on ',', trimmed, deduped, sorted, joined; "" -> nil
	Notes            *string
	LearnEnabled     bool
	LearnStatus      *string
	LearnError       *string
	LearnProcessedAt *time.Time
	CreatedAt        time.Time
}

// IdempotencyRecord stores the response of a request made with an Idempotency-Key.
// The primary key is (Owner, Key).
type IdempotencyRecord struct {
	Owner       string
	Key         string
	Fingerprint string // sha256 hex of METHOD:path:canonical body
	StatusCode  int
	Response    []byte // JSON body as sent
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// APIKey is a stored API key: only its SHA-256 hash is kept.
type APIKey struct {
	ID        string
	KeyHash   string // sha256 hex of the plaintext
	KeyPrefix string // first 12 chars of the plaintext, for operators
	Owner     string
	Active    bool
	CreatedAt time.Time
	// Name is what the admin called the key when it was created through the API ("" for keys
	// from the configuration and the generated first-boot key).
	Name string
	// LastUsedAt is when a bay last accepted the key (nil: never since it was stored); bays
	// write it at most about once a minute per key.
	LastUsedAt *time.Time
	// RevokedAt is when the key was revoked (then Active is false).
	RevokedAt *time.Time
}

// Clock is the time source; tests inject a fake or run inside testing/synctest.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock (UTC).
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now().UTC() }
