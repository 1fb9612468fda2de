package bay

import "context"

// ReuseReader reads the reuse keys of sandboxes (POST /v1/sandboxes with reuse): one row per
// (owner, key) naming the sandbox the key stands for.
type ReuseReader interface {
	// GetReuseKey returns the sandbox id of (owner, key), or an error wrapping ErrNotFound.
	GetReuseKey(ctx context.Context, owner, key string) (string, error)
}

// ReuseWriter writes reuse keys.
type ReuseWriter interface {
	// InsertReuseKey maps (owner, key) to sandboxID; an existing row for (owner, key) wraps
	// ErrConflict. It is what makes reuse by key atomic across callers and bays.
	InsertReuseKey(ctx context.Context, owner, key, sandboxID string) error
	// DeleteReuseKey removes the row of (owner, key) if it still names sandboxID (missing or
	// naming another sandbox is success: someone replaced it first).
	DeleteReuseKey(ctx context.Context, owner, key, sandboxID string) error
}
