package storetest

import (
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func testReuseKeys(t *testing.T, s bay.Store) {
	ctx := t.Context()
	_, err := s.GetReuseKey(ctx, "alice", "k")
	wantCode(t, err, bay.ErrNotFound)
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertReuseKey(ctx, "alice", "k", "sb-1") })
	// The same key of another owner is another row; a second insert for (owner, key) conflicts
	// and leaves the first.
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertReuseKey(ctx, "bob", "k", "sb-2") })
	wantCode(t, s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertReuseKey(ctx, "alice", "k", "sb-3") }), bay.ErrConflict)
	for owner, want := range map[string]string{"alice": "sb-1", "bob": "sb-2"} {
		if got, err := s.GetReuseKey(ctx, owner, "k"); err != nil || got != want {
			t.Fatalf("%s: %q %v, want %q", owner, got, err, want)
		}
	}
	// A delete naming another sandbox leaves the row; naming it removes it.
	mustTx(t, s, func(tx bay.Tx) error { return tx.DeleteReuseKey(ctx, "alice", "k", "sb-9") })
	if got, _ := s.GetReuseKey(ctx, "alice", "k"); got != "sb-1" {
		t.Fatalf("after a stale delete: %q", got)
	}
	mustTx(t, s, func(tx bay.Tx) error { return tx.DeleteReuseKey(ctx, "alice", "k", "sb-1") })
	_, err = s.GetReuseKey(ctx, "alice", "k")
	wantCode(t, err, bay.ErrNotFound)
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertReuseKey(ctx, "alice", "k", "sb-4") })
}
