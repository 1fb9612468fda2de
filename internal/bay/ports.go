package bay

import (
	"context"
	"time"
)

// ---------------------------------------------------------------------------------------------
// Store: durable state (SQLite by default, PostgreSQL later).
// ---------------------------------------------------------------------------------------------

// SandboxQuery selects sandboxes. Zero fields do not filter. Results are ordered by id.
type SandboxQuery struct {
	Owner             string
	AfterID           string // id > AfterID (cursor paging)
	Limit             int    // 0 = no limit
	IncludeDeleted    bool   // false: deleted_at IS NULL
	Warm              *bool  // nil = any; false = not warm-pool; true = warm-pool only
	WarmState         *string
	ProfileID         string
	IdleExpiredBefore *time.Time // idle_expires_at IS NOT NULL AND idle_expires_at < t
	ExpiredBefore     *time.Time // expires_at IS NOT NULL AND expires_at < t
	HasSession        *bool      // current_session_id IS (NOT) NULL
	CargoID           string
}

// SessionQuery selects sessions. Results are ordered by created_at, id.
type SessionQuery struct {
	SandboxID     string
	ObservedState SessionState
}

// CargoQuery selects cargos. Results are ordered by id.
type CargoQuery struct {
	Owner              string
	Managed            *bool
	ManagedBySandboxID string
	AfterID            string
	Limit              int
}

// ExecutionQuery selects execution history, newest first (created_at DESC, id DESC).
type ExecutionQuery struct {
	Owner          string
	SandboxID      string
	ExecType       string
	SuccessOnly    bool
	Tags           []string // normalised tags; a row matches if ANY occurs as a case-insensitive substring
	HasNotes       *bool
	HasDescription *bool
	Limit          int
	Offset         int
}

// WarmClaim is the atomic claim of an available warm sandbox by a caller.
type WarmClaim struct {
	ProfileID     string
	Owner         string
	Now           time.Time
	ExpiresAt     *time.Time // the caller's TTL
	IdleExpiresAt *time.Time // a fresh idle deadline from the claim time
}

// Reader is the read side of the store, usable inside and outside transactions.
// Getters return an error wrapping ErrNotFound when the row is missing.
type Reader interface {
	GetSandbox(ctx context.Context, id string) (*Sandbox, error) // deleted rows included
	ListSandboxes(ctx context.Context, q SandboxQuery) ([]*Sandbox, error)
	CountSandboxes(ctx context.Context, q SandboxQuery) (int, error)
	GetSession(ctx context.Context, id string) (*Session, error)
	ListSessions(ctx context.Context, q SessionQuery) ([]*Session, error)
	GetCargo(ctx context.Context, id string) (*Cargo, error)
	ListCargos(ctx context.Context, q CargoQuery) ([]*Cargo, error)
	GetExecution(ctx context.Context, id string) (*Execution, error)
	// ListExecutions returns one page and the total count of matches.
	ListExecutions(ctx context.Context, q ExecutionQuery) ([]*Execution, int, error)
	GetIdempotency(ctx context.Context, owner, key string) (*IdempotencyRecord, error)
	ListAPIKeys(ctx context.Context) ([]*APIKey, error) // active keys only
	// ListAllAPIKeys returns every stored key, revoked ones included, by created_at, id.
	ListAllAPIKeys(ctx context.Context) ([]*APIKey, error)

	// The skill library (internal/bay/skills). GetSkill returns the current version of a
	// name, ListSkills every current version by name, GetSkillVersion any stored version.
	GetSkill(ctx context.Context, name string) (*Skill, error)
	ListSkills(ctx context.Context) ([]*Skill, error)
	GetSkillVersion(ctx context.Context, name, version string) (*Skill, error)
	// ListSandboxSkills returns the skills a sandbox's create request named (request order).
	ListSandboxSkills(ctx context.Context, sandboxID string) ([]string, error)
	GetExecRecord(ctx context.Context, id string) (*ExecRecord, error)
	// ListExecRecords returns one page and the total count of matches.
	ListExecRecords(ctx context.Context, q ExecQuery) ([]*ExecRecord, int, error)
	JobReader
	ReuseReader
	InstanceReader
	SkillArchiveReader
}

// Tx is a write transaction. Writes are atomic with the reads made through the same Tx.
type Tx interface {
	Reader

	InsertSandbox(ctx context.Context, s *Sandbox) error
	// UpdateSandbox writes every field of s where the stored version equals s.Version, then sets
	// s.Version to the new version. A version mismatch wraps ErrConflict; a missing row ErrNotFound.
	UpdateSandbox(ctx context.Context, s *Sandbox) error

	InsertSession(ctx context.Context, s *Session) error
	UpdateSession(ctx context.Context, s *Session) error
	DeleteSession(ctx context.Context, id string) error // missing is success

	InsertCargo(ctx context.Context, c *Cargo) error
	UpdateCargo(ctx context.Context, c *Cargo) error
	DeleteCargo(ctx context.Context, id string) error // missing is success

	InsertExecution(ctx context.Context, e *Execution) error
	UpdateExecution(ctx context.Context, e *Execution) error

	// PutIdempotency inserts a record; an existing unexpired record for (owner, key) wraps
	// ErrConflict (an expired one is replaced).
	PutIdempotency(ctx context.Context, r *IdempotencyRecord) error
	DeleteIdempotency(ctx context.Context, owner, key string) error
	// DeleteExpiredIdempotency removes records with expires_at < now and returns how many.
	DeleteExpiredIdempotency(ctx context.Context, now time.Time) (int, error)

	InsertAPIKey(ctx context.Context, k *APIKey) error
	// RevokeAPIKey deactivates a key and sets its RevokedAt to at (a key already revoked
	// keeps its first time); a missing id wraps ErrNotFound.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
	// TouchAPIKey moves a key's LastUsedAt forward to at (never back); a missing id is no error.
	TouchAPIKey(ctx context.Context, id string, at time.Time) error

	// PutSkill stores the version s (kept when already stored) and makes it the current one
	// of s.Name at now; false when it already was current. A current skill whose name
	// differs only in case wraps ErrConflict.
	PutSkill(ctx context.Context, s *Skill, now time.Time) (bool, error)
	// DeleteSkill removes a name from the library (its versions stay for running sessions);
	// missing wraps ErrNotFound.
	DeleteSkill(ctx context.Context, name string) error
	// SetSandboxSkills replaces the skills stored for a sandbox (at most 64).
	SetSandboxSkills(ctx context.Context, sandboxID string, names []string) error
	// InsertExecRecord inserts an audit record (an existing id wraps ErrConflict);
	// UpdateExecRecord writes every field (a missing row wraps ErrNotFound).
	InsertExecRecord(ctx context.Context, e *ExecRecord) error
	UpdateExecRecord(ctx context.Context, e *ExecRecord) error

	// ClaimWarmSandbox atomically picks the oldest (warm_ready_at) available, non-deleted
	// warm sandbox of c.ProfileID and hands it to c.Owner: is_warm=false, warm_claimed_at,
	// owner, expires_at, idle_expires_at, last_active_at set, version bumped; its cargo's owner
	// is changed too. None available wraps ErrNotFound.
	ClaimWarmSandbox(ctx context.Context, c WarmClaim) (*Sandbox, error)

	// AcquireLease takes or renews the named lease for holder until now+ttl. It returns false
	// when another holder has an unexpired lease. Used so that several bays sharing one
	// database never run the same GC task or warm-up at once.
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error

	JobWriter
	ReuseWriter
	InstanceWriter
	SkillArchiveWriter
}

// Store is the durable state. Implementations: internal/bay/sqlite (and postgres later); both
// pass internal/bay/storetest.
type Store interface {
	Reader
	// Tx runs fn in one write transaction: committed if fn returns nil, rolled back otherwise
	// (the error is returned as is). Transactions are serialised (SQLite: BEGIN IMMEDIATE), so a
	// read-check-write inside fn is atomic. fn must not call Tx again.
	Tx(ctx context.Context, fn func(tx Tx) error) error
	Close() error
}
