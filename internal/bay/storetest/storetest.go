// Package storetest is the conformance suite of bay.Store: every implementation (SQLite,
// PostgreSQL) runs Run against a real database and must pass it unchanged.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Run runs the suite. newStore must return an empty, migrated store for the calling (sub)test
// and close it with t.Cleanup. Every subtest gets its own store.
func Run(t *testing.T, newStore func(t *testing.T) bay.Store) {
	for _, tc := range concurrencyTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, []bay.Store{newStore(t)}) })
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s bay.Store)
	}{
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"SandboxNotFound", testSandboxNotFound},
		{"SandboxInsertConflict", testSandboxInsertConflict},
		{"SandboxUpdateVersion", testSandboxUpdateVersion},
		{"SandboxListFilters", testSandboxListFilters},
		{"SandboxCursorPaging", testSandboxCursorPaging},
		{"SessionRoundTrip", testSessionRoundTrip},
		{"SessionUpdateDeleteList", testSessionUpdateDeleteList},
		{"CargoCRUD", testCargoCRUD},
		{"CargoListFilters", testCargoListFilters},
		{"ExecutionRoundTrip", testExecutionRoundTrip},
		{"ExecutionListFilters", testExecutionListFilters},
		{"ExecutionPagingAndTotal", testExecutionPagingAndTotal},
		{"Idempotency", testIdempotency},
		{"APIKeys", testAPIKeys},
		{"ClaimWarmSandbox", testClaimWarmSandbox},
		{"Leases", testLeases},
		{"TxRollbackOnError", testTxRollbackOnError},
		{"TxRollbackOnPanic", testTxRollbackOnPanic},
		{"TxSeesOwnWrites", testTxSeesOwnWrites},
		{"FailedStatementKeepsTxUsable", testFailedStatementKeepsTxUsable},
		{"ExecutionArbitraryBytes", testExecutionArbitraryBytes},
		{"TxCancelledContext", testTxCancelledContext},
		{"Jobs", testJobs},
		{"ReuseKeys", testReuseKeys},
		{"TimePrecision", testTimePrecision},
		{"ExecRecordRoundTrip", testExecRecordRoundTrip},
		{"ExecRecordListFilters", testExecRecordListFilters},
	}
	tests = append(tests, skillTests...)
	tests = append(tests, instanceTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// RunShared runs the concurrency cases against two stores opened on ONE database, as two bays
// sharing it would (two processes, or two pools): goroutines alternate between them, and the
// guarantees (one claimer per warm sandbox, serialised read-modify-write, one lease holder, one
// idempotency record) must hold across both. newPair returns two stores on the same empty,
// migrated database, closed with t.Cleanup.
func RunShared(t *testing.T, newPair func(t *testing.T) (bay.Store, bay.Store)) {
	for _, tc := range concurrencyTests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t)
			tc.fn(t, []bay.Store{a, b})
		})
	}
}

// concurrencyTests run goroutine i on stores[i%len(stores)]; stores share one database.
var concurrencyTests = []struct {
	name string
	fn   func(t *testing.T, stores []bay.Store)
}{
	{"ClaimWarmSandboxRace", testClaimWarmSandboxRace},
	{"TxSerialisesReadModifyWrite", testTxSerialised},
	{"ParallelStaleUpdates", testParallelStaleUpdates},
	{"ParallelLeaseAcquire", testParallelLeaseAcquire},
	{"ParallelIdempotencyPuts", testParallelIdempotencyPuts},
	{"ParallelExecRecordClaims", testParallelExecRecordClaims},
}

// base is a fixed instant with microsecond digits, so round trips are exact.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

func at(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }

func ptr[T any](v T) *T { return &v }

func mustTx(t *testing.T, s bay.Store, fn func(tx bay.Tx) error) {
	t.Helper()
	if err := s.Tx(t.Context(), fn); err != nil {
		t.Fatalf("Tx: %v", err)
	}
}

func wantCode(t *testing.T, err error, sentinel *bay.Error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", sentinel.Code)
	}
	if !errors.Is(err, sentinel) || bay.ErrorCode(err) != sentinel.Code {
		t.Fatalf("got %v (code %s), want %s", err, bay.ErrorCode(err), sentinel.Code)
	}
}

func fullSandbox(id string) *bay.Sandbox {
	return &bay.Sandbox{
		ID: id, Owner: "alice", ProfileID: "python-default", CargoID: "ws-" + id,
		CurrentSessionID: "sess-" + id,
		ExpiresAt:        ptr(at(3600)), IdleExpiresAt: ptr(at(1800)), DeletedAt: nil,
		CreatedAt: at(0), LastActiveAt: at(10), Version: 1,
		IsWarm: true, WarmState: bay.WarmAvailable, WarmReadyAt: ptr(at(5)), WarmRotateAt: ptr(at(900)),
		WarmClaimedAt: ptr(at(6)), WarmAttempts: 3, WarmNextAttemptAt: ptr(at(7)), WarmInstanceID: "bay-1",
		Network: &bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"*.example.com:443"}, Deny: []string{"x.example.com"}},
	}
}

func plainSandbox(id, owner string) *bay.Sandbox {
	return &bay.Sandbox{ID: id, Owner: owner, ProfileID: "python-default", CargoID: "ws-" + id,
		CreatedAt: at(0), LastActiveAt: at(0)}
}

func insertSandboxes(t *testing.T, s bay.Store, sbs ...*bay.Sandbox) {
	t.Helper()
	mustTx(t, s, func(tx bay.Tx) error {
		for _, sb := range sbs {
			if err := tx.InsertSandbox(t.Context(), sb); err != nil {
				return err
			}
		}
		return nil
	})
}

func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if g, w := fmt.Sprintf("%+v", deref(got)), fmt.Sprintf("%+v", deref(want)); g != w {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// deref prints pointers to times and strings by value so that %+v compares contents.
func deref(v any) any {
	switch x := v.(type) {
	case *bay.Sandbox:
		return *x
	case *bay.Session:
		return *x
	case *bay.Cargo:
		return *x
	case *bay.Execution:
		return *x
	case *bay.IdempotencyRecord:
		return *x
	case *bay.APIKey:
		return *x
	}
	return v
}

func sandboxIDs(sbs []*bay.Sandbox) []string {
	ids := make([]string, len(sbs))
	for i, s := range sbs {
		ids[i] = s.ID
	}
	return ids
}

func wantIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// ---- sandboxes ------------------------------------------------------------------------------

func testSandboxRoundTrip(t *testing.T, s bay.Store) {
	ctx := t.Context()
	full := fullSandbox("sandbox-000000000001")
	plain := plainSandbox("sandbox-000000000002", "bob")
	plain.CargoID = ""
	insertSandboxes(t, s, full, plain)
	for _, want := range []*bay.Sandbox{full, plain} {
		got, err := s.GetSandbox(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want.Version == 0 {
			want.Version = got.Version
		}
		assertSandbox(t, got, want)
		// The same through a transaction's reader.
		mustTx(t, s, func(tx bay.Tx) error {
			got, err := tx.GetSandbox(ctx, want.ID)
			if err != nil {
				return err
			}
			assertSandbox(t, got, want)
			return nil
		})
	}
	// InsertSandbox stores a zero version as 1 and reports it.
	z := plainSandbox("sandbox-000000000003", "bob")
	insertSandboxes(t, s, z)
	if z.Version != 1 {
		t.Fatalf("version after insert = %d, want 1", z.Version)
	}
}

func assertSandbox(t *testing.T, got, want *bay.Sandbox) {
	t.Helper()
	equal(t, "sandbox", fmtSandbox(got), fmtSandbox(want))
}

func fmtTime(p *time.Time) string {
	if p == nil {
		return "<nil>"
	}
	return p.UTC().Format(time.RFC3339Nano)
}

func fmtSandbox(s *bay.Sandbox) string {
	return fmt.Sprintf("%s|%s|%s|%s|%s|exp=%s|idle=%s|del=%s|c=%s|a=%s|v=%d|warm=%t|%q|ready=%s|rot=%s|cl=%s|att=%d|next=%s|%s|net=%s",
		s.ID, s.Owner, s.ProfileID, s.CargoID, s.CurrentSessionID, fmtTime(s.ExpiresAt), fmtTime(s.IdleExpiresAt),
		fmtTime(s.DeletedAt), fmtTime(&s.CreatedAt), fmtTime(&s.LastActiveAt), s.Version, s.IsWarm, s.WarmState,
		fmtTime(s.WarmReadyAt), fmtTime(s.WarmRotateAt), fmtTime(s.WarmClaimedAt), s.WarmAttempts,
		fmtTime(s.WarmNextAttemptAt), s.WarmInstanceID, fmtNetwork(s.Network))
}

func fmtNetwork(p *bay.NetworkPolicy) string {
	if p == nil {
		return "profile"
	}
	return fmt.Sprintf("%s%q%q", p.Mode, p.Allow, p.Deny)
}

func testSandboxNotFound(t *testing.T, s bay.Store) {
	_, err := s.GetSandbox(t.Context(), "sandbox-missing")
	wantCode(t, err, bay.ErrNotFound)
	err = s.Tx(t.Context(), func(tx bay.Tx) error {
		_, err := tx.GetSandbox(t.Context(), "sandbox-missing")
		return err
	})
	wantCode(t, err, bay.ErrNotFound)
}

func testSandboxInsertConflict(t *testing.T, s bay.Store) {
	insertSandboxes(t, s, plainSandbox("sandbox-dup", "alice"))
	err := s.Tx(t.Context(), func(tx bay.Tx) error {
		return tx.InsertSandbox(t.Context(), plainSandbox("sandbox-dup", "bob"))
	})
	wantCode(t, err, bay.ErrConflict)
	got, err := s.GetSandbox(t.Context(), "sandbox-dup")
	if err != nil || got.Owner != "alice" {
		t.Fatalf("after conflicting insert: %+v, %v", got, err)
	}
}

func testSandboxUpdateVersion(t *testing.T, s bay.Store) {
	ctx := t.Context()
	insertSandboxes(t, s, plainSandbox("sandbox-u", "alice"))
	a, _ := s.GetSandbox(ctx, "sandbox-u")
	b, _ := s.GetSandbox(ctx, "sandbox-u")

	a.CurrentSessionID = "sess-1"
	a.IdleExpiresAt = ptr(at(60))
	a.DeletedAt = ptr(at(61))
	a.Network = &bay.NetworkPolicy{Mode: bay.NetworkNone}
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateSandbox(ctx, a) })
	if a.Version != b.Version+1 {
		t.Fatalf("version after update = %d, want %d", a.Version, b.Version+1)
	}
	got, _ := s.GetSandbox(ctx, "sandbox-u")
	assertSandbox(t, got, a)

	// b is stale: conflict, and the row is unchanged.
	b.Owner = "mallory"
	err := s.Tx(ctx, func(tx bay.Tx) error { return tx.UpdateSandbox(ctx, b) })
	wantCode(t, err, bay.ErrConflict)
	got, _ = s.GetSandbox(ctx, "sandbox-u")
	assertSandbox(t, got, a)

	// Clearing optional fields writes NULLs.
	a.CurrentSessionID, a.IdleExpiresAt, a.DeletedAt, a.Network = "", nil, nil, nil
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateSandbox(ctx, a) })
	got, _ = s.GetSandbox(ctx, "sandbox-u")
	assertSandbox(t, got, a)

	missing := plainSandbox("sandbox-nope", "x")
	missing.Version = 1
	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.UpdateSandbox(ctx, missing) })
	wantCode(t, err, bay.ErrNotFound)
}

func testSandboxListFilters(t *testing.T, s bay.Store) {
	ctx := t.Context()
	mk := func(id, owner string, mut func(*bay.Sandbox)) *bay.Sandbox {
		sb := plainSandbox(id, owner)
		mut(sb)
		return sb
	}
	insertSandboxes(t, s,
		mk("sandbox-a", "alice", func(sb *bay.Sandbox) { sb.CurrentSessionID = "sess-a"; sb.IdleExpiresAt = ptr(at(10)) }),
		mk("sandbox-b", "alice", func(sb *bay.Sandbox) { sb.ExpiresAt = ptr(at(20)); sb.ProfileID = "data" }),
		mk("sandbox-c", "alice", func(sb *bay.Sandbox) { sb.DeletedAt = ptr(at(1)); sb.IdleExpiresAt = ptr(at(5)) }),
		mk("sandbox-d", "bob", func(sb *bay.Sandbox) { sb.IdleExpiresAt = ptr(at(30)); sb.ExpiresAt = ptr(at(40)) }),
		mk("sandbox-w1", bay.OwnerWarmPool, func(sb *bay.Sandbox) {
			sb.IsWarm, sb.WarmState, sb.WarmReadyAt = true, bay.WarmAvailable, ptr(at(1))
		}),
		mk("sandbox-w2", bay.OwnerWarmPool, func(sb *bay.Sandbox) { sb.IsWarm, sb.WarmState = true, bay.WarmPending }),
	)
	cases := []struct {
		name string
		q    bay.SandboxQuery
		want []string
	}{
		{"all live", bay.SandboxQuery{}, []string{"sandbox-a", "sandbox-b", "sandbox-d", "sandbox-w1", "sandbox-w2"}},
		{"include deleted", bay.SandboxQuery{IncludeDeleted: true}, []string{"sandbox-a", "sandbox-b", "sandbox-c", "sandbox-d", "sandbox-w1", "sandbox-w2"}},
		{"owner", bay.SandboxQuery{Owner: "alice"}, []string{"sandbox-a", "sandbox-b"}},
		{"owner deleted", bay.SandboxQuery{Owner: "alice", IncludeDeleted: true}, []string{"sandbox-a", "sandbox-b", "sandbox-c"}},
		{"not warm", bay.SandboxQuery{Warm: ptr(false)}, []string{"sandbox-a", "sandbox-b", "sandbox-d"}},
		{"warm", bay.SandboxQuery{Warm: ptr(true)}, []string{"sandbox-w1", "sandbox-w2"}},
		{"warm available", bay.SandboxQuery{Warm: ptr(true), WarmState: ptr(bay.WarmAvailable)}, []string{"sandbox-w1"}},
		{"warm pending", bay.SandboxQuery{Warm: ptr(true), WarmState: ptr(bay.WarmPending)}, []string{"sandbox-w2"}},
		{"profile", bay.SandboxQuery{ProfileID: "data"}, []string{"sandbox-b"}},
		{"idle expired", bay.SandboxQuery{IdleExpiredBefore: ptr(at(30))}, []string{"sandbox-a"}},
		{"idle expired incl deleted", bay.SandboxQuery{IdleExpiredBefore: ptr(at(31)), IncludeDeleted: true}, []string{"sandbox-a", "sandbox-c", "sandbox-d"}},
		{"expired", bay.SandboxQuery{ExpiredBefore: ptr(at(41))}, []string{"sandbox-b", "sandbox-d"}},
		{"expired strict", bay.SandboxQuery{ExpiredBefore: ptr(at(20))}, nil},
		{"has session", bay.SandboxQuery{HasSession: ptr(true)}, []string{"sandbox-a"}},
		{"no session", bay.SandboxQuery{HasSession: ptr(false), Warm: ptr(false)}, []string{"sandbox-b", "sandbox-d"}},
		{"cargo", bay.SandboxQuery{CargoID: "ws-sandbox-d"}, []string{"sandbox-d"}},
		{"cargo of deleted", bay.SandboxQuery{CargoID: "ws-sandbox-c"}, nil},
		{"after id", bay.SandboxQuery{AfterID: "sandbox-b"}, []string{"sandbox-d", "sandbox-w1", "sandbox-w2"}},
		{"limit", bay.SandboxQuery{Limit: 2}, []string{"sandbox-a", "sandbox-b"}},
	}
	for _, c := range cases {
		got, err := s.ListSandboxes(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wantIDs(t, c.name, sandboxIDs(got), c.want)
		n, err := s.CountSandboxes(ctx, bay.SandboxQuery{
			Owner: c.q.Owner, AfterID: c.q.AfterID, IncludeDeleted: c.q.IncludeDeleted, Warm: c.q.Warm,
			WarmState: c.q.WarmState, ProfileID: c.q.ProfileID, IdleExpiredBefore: c.q.IdleExpiredBefore,
			ExpiredBefore: c.q.ExpiredBefore, HasSession: c.q.HasSession, CargoID: c.q.CargoID,
		})
		if err != nil {
			t.Fatalf("%s: count: %v", c.name, err)
		}
		if c.q.Limit == 0 && n != len(c.want) {
			t.Fatalf("%s: count = %d, want %d", c.name, n, len(c.want))
		}
	}
	// Count ignores Limit.
	if n, _ := s.CountSandboxes(ctx, bay.SandboxQuery{Limit: 1}); n != 5 {
		t.Fatalf("count with limit = %d, want 5", n)
	}
	// The same through a transaction.
	mustTx(t, s, func(tx bay.Tx) error {
		got, err := tx.ListSandboxes(ctx, bay.SandboxQuery{Owner: "bob"})
		wantIDs(t, "tx list", sandboxIDs(got), []string{"sandbox-d"})
		return err
	})
}

func testSandboxCursorPaging(t *testing.T, s bay.Store) {
	ctx := t.Context()
	var want []string
	var sbs []*bay.Sandbox
	for i := 20; i > 0; i-- { // inserted in reverse order: paging must sort by id
		id := fmt.Sprintf("sandbox-%012d", i)
		sb := plainSandbox(id, "alice")
		if i%5 == 0 {
			sb.DeletedAt = ptr(at(1))
		} else {
			want = append(want, id)
		}
		sbs = append(sbs, sb)
	}
	insertSandboxes(t, s, sbs...)
	slices.Sort(want)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page, err := s.ListSandboxes(ctx, bay.SandboxQuery{Owner: "alice", AfterID: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 {
			t.Fatalf("page of %d > limit 3", len(page))
		}
		got = append(got, sandboxIDs(page)...)
		after = page[len(page)-1].ID
	}
	wantIDs(t, "paged ids", got, want)
}

// ---- sessions -------------------------------------------------------------------------------

func testSessionRoundTrip(t *testing.T, s bay.Store) {
	ctx := t.Context()
	insertSandboxes(t, s, plainSandbox("sandbox-s", "alice"))
	single := &bay.Session{ID: "sess-1", SandboxID: "sandbox-s", ProfileID: "python-default",
		Containers:    []bay.SessionContainer{{Name: "ship", ContainerID: "c1", Endpoint: "http://172.18.0.5:8123", Status: "running", RuntimeType: "ship", Capabilities: []string{"python"}}},
		DesiredState:  bay.SessionRunning,
		ObservedState: bay.SessionStarting, InstanceID: "bay-1", CreatedAt: at(0), StartedAt: ptr(at(1)),
		LastObservedAt: ptr(at(2)), RuntimeToken: "0123abcd"}
	multi := &bay.Session{ID: "sess-2", SandboxID: "sandbox-s", ProfileID: "browser",
		Containers: []bay.SessionContainer{
			{Name: "ship", ContainerID: "c2", Endpoint: "http://a:8123", Status: "running", RuntimeType: "ship", Capabilities: []string{"python", "shell"}},
			{Name: "gull", ContainerID: "c3", Endpoint: "http://b:8115", Status: "running", RuntimeType: "gull", Capabilities: []string{"browser"}},
		},
		DesiredState: bay.SessionPending, ObservedState: bay.SessionPending, CreatedAt: at(1)}
	empty := &bay.Session{ID: "sess-3", SandboxID: "sandbox-s", ProfileID: "p", Containers: []bay.SessionContainer{},
		DesiredState: bay.SessionStopped, ObservedState: bay.SessionStopped, CreatedAt: at(2)}
	mustTx(t, s, func(tx bay.Tx) error {
		for _, ss := range []*bay.Session{single, multi, empty} {
			if err := tx.InsertSession(ctx, ss); err != nil {
				return err
			}
		}
		return nil
	})
	for _, want := range []*bay.Session{single, multi, empty} {
		got, err := s.GetSession(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "session", fmtSession(got), fmtSession(want))
	}
	noInstance := &bay.Session{ID: "sess-4", SandboxID: "sandbox-s", ProfileID: "p",
		DesiredState: bay.SessionRunning, ObservedState: bay.SessionStarting, CreatedAt: at(3)}
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertSession(ctx, noInstance) })
	got, _ := s.GetSession(ctx, "sess-4")
	if got.Containers != nil || got.Primary() != nil {
		t.Fatalf("a session without an instance has containers %v, want nil", got.Containers)
	}
	_, err := s.GetSession(ctx, "sess-missing")
	wantCode(t, err, bay.ErrNotFound)
	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertSession(ctx, single) })
	wantCode(t, err, bay.ErrConflict)
	// A session of an unknown sandbox is refused.
	err = s.Tx(ctx, func(tx bay.Tx) error {
		return tx.InsertSession(ctx, &bay.Session{ID: "sess-x", SandboxID: "sandbox-unknown", ProfileID: "p",
			DesiredState: bay.SessionPending, ObservedState: bay.SessionPending, CreatedAt: at(0)})
	})
	if err == nil {
		t.Fatal("insert session of unknown sandbox succeeded")
	}
}

func fmtSession(s *bay.Session) string {
	return fmt.Sprintf("%s|%s|%s|%#v|%s|%s|%s|%s|%s|%s|%s", s.ID, s.SandboxID, s.ProfileID, s.Containers, s.DesiredState, s.ObservedState, s.InstanceID, fmtTime(&s.CreatedAt),
		fmtTime(s.StartedAt), fmtTime(s.LastObservedAt), s.RuntimeToken)
}

func testSessionUpdateDeleteList(t *testing.T, s bay.Store) {
	ctx := t.Context()
	insertSandboxes(t, s, plainSandbox("sandbox-1", "alice"), plainSandbox("sandbox-2", "alice"))
	mk := func(id, sb string, created int, st bay.SessionState) *bay.Session {
		return &bay.Session{ID: id, SandboxID: sb, ProfileID: "p", DesiredState: bay.SessionRunning, ObservedState: st, CreatedAt: at(created)}
	}
	sessions := []*bay.Session{
		mk("sess-c", "sandbox-1", 5, bay.SessionRunning),
		mk("sess-b", "sandbox-1", 1, bay.SessionPending),
		mk("sess-a", "sandbox-1", 5, bay.SessionRunning), // same created_at as sess-c: id breaks the tie
		mk("sess-d", "sandbox-2", 0, bay.SessionRunning),
	}
	mustTx(t, s, func(tx bay.Tx) error {
		for _, ss := range sessions {
			if err := tx.InsertSession(ctx, ss); err != nil {
				return err
			}
		}
		return nil
	})
	ids := func(q bay.SessionQuery) []string {
		got, err := s.ListSessions(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ss := range got {
			out = append(out, ss.ID)
		}
		return out
	}
	wantIDs(t, "all", ids(bay.SessionQuery{}), []string{"sess-d", "sess-b", "sess-a", "sess-c"})
	wantIDs(t, "sandbox-1", ids(bay.SessionQuery{SandboxID: "sandbox-1"}), []string{"sess-b", "sess-a", "sess-c"})
	wantIDs(t, "running of 1", ids(bay.SessionQuery{SandboxID: "sandbox-1", ObservedState: bay.SessionRunning}), []string{"sess-a", "sess-c"})

	upd := sessions[1]
	upd.ObservedState = bay.SessionRunning
	upd.StartedAt, upd.LastObservedAt = ptr(at(2)), ptr(at(3))
	upd.Containers = []bay.SessionContainer{{Name: "ship", ContainerID: "cid", Endpoint: "http://x:8123", Capabilities: []string{}}}
	upd.RuntimeToken = "feedface"
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateSession(ctx, upd) })
	got, _ := s.GetSession(ctx, upd.ID)
	equal(t, "updated session", fmtSession(got), fmtSession(upd))

	err := s.Tx(ctx, func(tx bay.Tx) error {
		return tx.UpdateSession(ctx, mk("sess-zzz", "sandbox-1", 0, bay.SessionPending))
	})
	wantCode(t, err, bay.ErrNotFound)

	mustTx(t, s, func(tx bay.Tx) error {
		if err := tx.DeleteSession(ctx, "sess-b"); err != nil {
			return err
		}
		return tx.DeleteSession(ctx, "sess-b") // missing is success
	})
	_, err = s.GetSession(ctx, "sess-b")
	wantCode(t, err, bay.ErrNotFound)
}

// ---- cargos ---------------------------------------------------------------------------------

func cargo(id, owner string, managed bool, by string) *bay.Cargo {
	return &bay.Cargo{ID: id, Owner: owner, Backend: bay.BackendDockerVolume, DriverRef: bay.VolumeName(id),
		Managed: managed, ManagedBySandboxID: by, SizeLimitMB: 1024, CreatedAt: at(0), LastAccessedAt: at(1)}
}

func fmtCargo(c *bay.Cargo) string {
	return fmt.Sprintf("%s|%s|%s|%s|%t|%s|%d|%s|%s", c.ID, c.Owner, c.Backend, c.DriverRef, c.Managed,
		c.ManagedBySandboxID, c.SizeLimitMB, fmtTime(&c.CreatedAt), fmtTime(&c.LastAccessedAt))
}

func testCargoCRUD(t *testing.T, s bay.Store) {
	ctx := t.Context()
	m := cargo("ws-1", "alice", true, "sandbox-1")
	e := cargo("ws-2", "alice", false, "")
	mustTx(t, s, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, m); err != nil {
			return err
		}
		return tx.InsertCargo(ctx, e)
	})
	for _, want := range []*bay.Cargo{m, e} {
		got, err := s.GetCargo(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "cargo", fmtCargo(got), fmtCargo(want))
	}
	err := s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertCargo(ctx, cargo("ws-1", "bob", false, "")) })
	wantCode(t, err, bay.ErrConflict)

	m.Owner, m.SizeLimitMB, m.LastAccessedAt, m.ManagedBySandboxID = "bob", 2048, at(99), ""
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateCargo(ctx, m) })
	got, _ := s.GetCargo(ctx, "ws-1")
	equal(t, "updated cargo", fmtCargo(got), fmtCargo(m))

	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.UpdateCargo(ctx, cargo("ws-none", "x", false, "")) })
	wantCode(t, err, bay.ErrNotFound)

	mustTx(t, s, func(tx bay.Tx) error {
		if err := tx.DeleteCargo(ctx, "ws-1"); err != nil {
			return err
		}
		return tx.DeleteCargo(ctx, "ws-1")
	})
	_, err = s.GetCargo(ctx, "ws-1")
	wantCode(t, err, bay.ErrNotFound)
}

func testCargoListFilters(t *testing.T, s bay.Store) {
	ctx := t.Context()
	mustTx(t, s, func(tx bay.Tx) error {
		for _, c := range []*bay.Cargo{
			cargo("ws-e", "alice", true, "sandbox-1"),
			cargo("ws-d", "alice", false, ""),
			cargo("ws-c", "bob", true, "sandbox-2"),
			cargo("ws-b", "alice", false, ""),
			cargo("ws-a", "alice", true, "sandbox-3"),
		} {
			if err := tx.InsertCargo(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	list := func(q bay.CargoQuery) []string {
		got, err := s.ListCargos(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		return ids
	}
	wantIDs(t, "all", list(bay.CargoQuery{}), []string{"ws-a", "ws-b", "ws-c", "ws-d", "ws-e"})
	wantIDs(t, "alice", list(bay.CargoQuery{Owner: "alice"}), []string{"ws-a", "ws-b", "ws-d", "ws-e"})
	wantIDs(t, "alice external", list(bay.CargoQuery{Owner: "alice", Managed: ptr(false)}), []string{"ws-b", "ws-d"})
	wantIDs(t, "managed", list(bay.CargoQuery{Managed: ptr(true)}), []string{"ws-a", "ws-c", "ws-e"})
	wantIDs(t, "by sandbox", list(bay.CargoQuery{ManagedBySandboxID: "sandbox-2"}), []string{"ws-c"})
	wantIDs(t, "page 1", list(bay.CargoQuery{Owner: "alice", Limit: 2}), []string{"ws-a", "ws-b"})
	wantIDs(t, "page 2", list(bay.CargoQuery{Owner: "alice", Limit: 2, AfterID: "ws-b"}), []string{"ws-d", "ws-e"})
	wantIDs(t, "page 3", list(bay.CargoQuery{Owner: "alice", Limit: 2, AfterID: "ws-e"}), nil)
}

// ---- execution history ----------------------------------------------------------------------

func fmtExecution(e *bay.Execution) string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("%s|%s|%s|%s|%s|%q|%t|%d|%s|%s|%s|%s|%s|%s|%t|%s|%s|%s|%s|%v", e.ID, e.Owner, e.SandboxID,
		e.SessionID, e.ExecType, e.Code, e.Success, e.ExecutionTimeMS, s(e.Output), s(e.Error), s(e.PayloadRef),
		s(e.Description), s(e.Tags), s(e.Notes), e.LearnEnabled, s(e.LearnStatus), s(e.LearnError),
		fmtTime(e.LearnProcessedAt), fmtTime(&e.CreatedAt), e.Images)
}

func testExecutionRoundTrip(t *testing.T, s bay.Store) {
	ctx := t.Context()
	full := &bay.Execution{ID: "exec-1", Owner: "alice", SandboxID: "sandbox-1", SessionID: "sess-1", ExecType: "python",
		Code: "print('héllo')\n", Success: true, ExecutionTimeMS: 142, Output: ptr("héllo\n"), Error: ptr(""),
		PayloadRef: ptr("blob:blob-1"), Description: ptr("d"), Tags: ptr("a,b"), Notes: ptr("n"), LearnEnabled: true,
		LearnStatus: ptr("processed"), LearnError: ptr("none"), LearnProcessedAt: ptr(at(5)), CreatedAt: at(1),
		Images: []map[string]string{{"image/png": "iVBORw0KGgo="}, {"image/jpeg": "/9j/4AAQ", "text/plain": "<Figure>"}}}
	bare := &bay.Execution{ID: "exec-2", Owner: "alice", SandboxID: "sandbox-1", ExecType: "shell", CreatedAt: at(2)}
	mustTx(t, s, func(tx bay.Tx) error {
		if err := tx.InsertExecution(ctx, full); err != nil {
			return err
		}
		return tx.InsertExecution(ctx, bare)
	})
	for _, want := range []*bay.Execution{full, bare} {
		got, err := s.GetExecution(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "execution", fmtExecution(got), fmtExecution(want))
	}
	_, err := s.GetExecution(ctx, "exec-missing")
	wantCode(t, err, bay.ErrNotFound)
	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertExecution(ctx, bare) })
	wantCode(t, err, bay.ErrConflict)

	bare.Notes, bare.Tags, bare.Description = ptr("works"), ptr("a,b"), ptr("")
	bare.Images = []map[string]string{{"image/png": "AAAA"}}
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateExecution(ctx, bare) })
	got, _ := s.GetExecution(ctx, bare.ID)
	equal(t, "updated execution", fmtExecution(got), fmtExecution(bare))
	err = s.Tx(ctx, func(tx bay.Tx) error {
		return tx.UpdateExecution(ctx, &bay.Execution{ID: "exec-none", Owner: "a", SandboxID: "s", ExecType: "python"})
	})
	wantCode(t, err, bay.ErrNotFound)
}

func testExecutionListFilters(t *testing.T, s bay.Store) {
	ctx := t.Context()
	type row struct {
		id, owner, sb, typ string
		ok                 bool
		tags, notes, desc  *string
	}
	rows := []row{
		{"exec-01", "alice", "sandbox-1", "python", true, ptr("demo,python"), nil, nil},
		{"exec-02", "alice", "sandbox-1", "shell", false, ptr("Build,CI"), ptr(""), ptr("d")},
		{"exec-03", "alice", "sandbox-1", "python", false, ptr("a_b"), ptr("n"), ptr("")},
		{"exec-04", "alice", "sandbox-1", "python", true, ptr("axb,100%"), ptr("n"), nil},
		{"exec-05", "alice", "sandbox-2", "python", true, ptr("demo"), nil, nil},
		{"exec-06", "bob", "sandbox-1", "python", true, ptr("demo"), nil, nil},
		{"exec-07", "alice", "sandbox-1", "browser", true, nil, nil, ptr("x")},
		{"exec-08", "alice", "sandbox-1", "python", true, ptr("ÉTÉ"), nil, nil},
		{"exec-09", "alice", "sandbox-1", "python", true, ptr(`back\slash`), nil, nil},
	}
	mustTx(t, s, func(tx bay.Tx) error {
		for i, r := range rows {
			if err := tx.InsertExecution(ctx, &bay.Execution{ID: r.id, Owner: r.owner, SandboxID: r.sb, ExecType: r.typ,
				Success: r.ok, Tags: r.tags, Notes: r.notes, Description: r.desc, CreatedAt: at(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	check := func(name string, q bay.ExecutionQuery, want ...string) {
		t.Helper()
		got, total, err := s.ListExecutions(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ids []string
		for _, e := range got {
			ids = append(ids, e.ID)
		}
		wantIDs(t, name, ids, want)
		if total != len(want) {
			t.Fatalf("%s: total = %d, want %d", name, total, len(want))
		}
	}
	sb1 := func(q bay.ExecutionQuery) bay.ExecutionQuery { q.Owner, q.SandboxID = "alice", "sandbox-1"; return q }
	check("all of sandbox", sb1(bay.ExecutionQuery{}), "exec-09", "exec-08", "exec-07", "exec-04", "exec-03", "exec-02", "exec-01")
	check("owner only", bay.ExecutionQuery{Owner: "bob"}, "exec-06")
	check("exec type", sb1(bay.ExecutionQuery{ExecType: "shell"}), "exec-02")
	check("success only", sb1(bay.ExecutionQuery{SuccessOnly: true, ExecType: "python"}), "exec-09", "exec-08", "exec-04", "exec-01")
	check("tag substring", sb1(bay.ExecutionQuery{Tags: []string{"py"}}), "exec-01")
	check("tag case-insensitive", sb1(bay.ExecutionQuery{Tags: []string{"build"}}), "exec-02")
	check("tag unicode case-insensitive", sb1(bay.ExecutionQuery{Tags: []string{"été"}}), "exec-08")
	check("tags any", sb1(bay.ExecutionQuery{Tags: []string{"ci", "demo"}}), "exec-02", "exec-01")
	check("tag underscore literal", sb1(bay.ExecutionQuery{Tags: []string{"a_b"}}), "exec-03")
	check("tag percent literal", sb1(bay.ExecutionQuery{Tags: []string{"%"}}), "exec-04")
	check("tag backslash literal", sb1(bay.ExecutionQuery{Tags: []string{`k\s`}}), "exec-09")
	check("tag no match", sb1(bay.ExecutionQuery{Tags: []string{"nothing"}}))
	check("has notes", sb1(bay.ExecutionQuery{HasNotes: ptr(true)}), "exec-04", "exec-03")
	check("no notes", sb1(bay.ExecutionQuery{HasNotes: ptr(false)}), "exec-09", "exec-08", "exec-07", "exec-02", "exec-01")
	check("has description", sb1(bay.ExecutionQuery{HasDescription: ptr(true)}), "exec-07", "exec-02")
	check("no description", sb1(bay.ExecutionQuery{HasDescription: ptr(false), ExecType: "python"}), "exec-09", "exec-08", "exec-04", "exec-03", "exec-01")
	check("combined", sb1(bay.ExecutionQuery{Tags: []string{"demo", "a_b", "axb"}, SuccessOnly: true, HasNotes: ptr(true)}), "exec-04")
}

func testExecutionPagingAndTotal(t *testing.T, s bay.Store) {
	ctx := t.Context()
	var all []string
	mustTx(t, s, func(tx bay.Tx) error {
		for i := range 12 {
			id := fmt.Sprintf("exec-%02d", i)
			// Pairs share created_at: the order is created_at DESC, id DESC.
			if err := tx.InsertExecution(ctx, &bay.Execution{ID: id, Owner: "alice", SandboxID: "sandbox-1",
				ExecType: "python", CreatedAt: at(i / 2)}); err != nil {
				return err
			}
			all = append(all, id)
		}
		return nil
	})
	slices.Reverse(all)
	for _, c := range []struct{ limit, offset int }{{5, 0}, {5, 5}, {5, 10}, {5, 12}, {0, 0}, {0, 3}, {100, 0}} {
		got, total, err := s.ListExecutions(ctx, bay.ExecutionQuery{Owner: "alice", SandboxID: "sandbox-1", Limit: c.limit, Offset: c.offset})
		if err != nil {
			t.Fatal(err)
		}
		if total != 12 {
			t.Fatalf("limit %d offset %d: total = %d, want 12", c.limit, c.offset, total)
		}
		end := len(all)
		if c.limit > 0 {
			end = min(c.offset+c.limit, len(all))
		}
		want := all[min(c.offset, len(all)):end]
		var ids []string
		for _, e := range got {
			ids = append(ids, e.ID)
		}
		wantIDs(t, fmt.Sprintf("limit %d offset %d", c.limit, c.offset), ids, want)
	}
	// Inside a transaction too.
	mustTx(t, s, func(tx bay.Tx) error {
		got, total, err := tx.ListExecutions(ctx, bay.ExecutionQuery{SandboxID: "sandbox-1", Limit: 1})
		if err != nil {
			return err
		}
		if total != 12 || len(got) != 1 || got[0].ID != all[0] {
			t.Fatalf("tx list: %d rows, total %d", len(got), total)
		}
		return nil
	})
}

// ---- idempotency ----------------------------------------------------------------------------

func testIdempotency(t *testing.T, s bay.Store) {
	ctx := t.Context()
	rec := &bay.IdempotencyRecord{Owner: "alice", Key: "k1", Fingerprint: "fp1", StatusCode: 201,
		Response: []byte(`{"id":"sandbox-1"}`), CreatedAt: at(0), ExpiresAt: at(3600)}
	put := func(r *bay.IdempotencyRecord) error {
		return s.Tx(ctx, func(tx bay.Tx) error { return tx.PutIdempotency(ctx, r) })
	}
	if err := put(rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetIdempotency(ctx, "alice", "k1")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "record", fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s", got.Owner, got.Key, got.Fingerprint, got.StatusCode, got.Response,
		fmtTime(&got.CreatedAt), fmtTime(&got.ExpiresAt)),
		fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s", rec.Owner, rec.Key, rec.Fingerprint, rec.StatusCode, rec.Response,
			fmtTime(&rec.CreatedAt), fmtTime(&rec.ExpiresAt)))

	_, err = s.GetIdempotency(ctx, "bob", "k1") // keys are per owner
	wantCode(t, err, bay.ErrNotFound)
	other := *rec
	other.Owner = "bob"
	if err := put(&other); err != nil {
		t.Fatalf("same key, other owner: %v", err)
	}

	// Unexpired (even at the last instant): conflict, record unchanged.
	for _, now := range []time.Time{at(1), at(3600)} {
		again := &bay.IdempotencyRecord{Owner: "alice", Key: "k1", Fingerprint: "fp2", StatusCode: 200,
			Response: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		wantCode(t, put(again), bay.ErrConflict)
	}
	got, _ = s.GetIdempotency(ctx, "alice", "k1")
	if got.Fingerprint != "fp1" {
		t.Fatalf("conflicting put changed the record: %+v", got)
	}
	// Expired: replaced.
	repl := &bay.IdempotencyRecord{Owner: "alice", Key: "k1", Fingerprint: "fp3", StatusCode: 200,
		Response: []byte(`{"x":1}`), CreatedAt: at(3601), ExpiresAt: at(7200)}
	if err := put(repl); err != nil {
		t.Fatalf("put over expired record: %v", err)
	}
	got, _ = s.GetIdempotency(ctx, "alice", "k1")
	if got.Fingerprint != "fp3" || string(got.Response) != `{"x":1}` || !got.ExpiresAt.Equal(at(7200)) {
		t.Fatalf("expired record not replaced: %+v", got)
	}

	// Delete and DeleteExpired.
	mustTx(t, s, func(tx bay.Tx) error {
		for i := range 3 {
			if err := tx.PutIdempotency(ctx, &bay.IdempotencyRecord{Owner: "carol", Key: fmt.Sprint("e", i),
				Fingerprint: "f", StatusCode: 200, Response: []byte(`{}`), CreatedAt: at(0), ExpiresAt: at(10 + i)}); err != nil {
				return err
			}
		}
		if err := tx.DeleteIdempotency(ctx, "bob", "k1"); err != nil {
			return err
		}
		return tx.DeleteIdempotency(ctx, "bob", "k1") // missing is success
	})
	_, err = s.GetIdempotency(ctx, "bob", "k1")
	wantCode(t, err, bay.ErrNotFound)
	var n int
	mustTx(t, s, func(tx bay.Tx) (err error) { n, err = tx.DeleteExpiredIdempotency(ctx, at(11)); return err })
	if n != 1 { // e0 (expires at 10); e1 expires exactly at 11: not < now
		t.Fatalf("deleted %d expired records, want 1", n)
	}
	if _, err := s.GetIdempotency(ctx, "carol", "e1"); err != nil {
		t.Fatalf("e1 deleted too early: %v", err)
	}
	mustTx(t, s, func(tx bay.Tx) (err error) { n, err = tx.DeleteExpiredIdempotency(ctx, at(100)); return err })
	if n != 2 {
		t.Fatalf("deleted %d expired records, want 2", n)
	}
	if _, err := s.GetIdempotency(ctx, "alice", "k1"); err != nil {
		t.Fatalf("unexpired record deleted: %v", err)
	}
}

// ---- API keys -------------------------------------------------------------------------------

func testAPIKeys(t *testing.T, s bay.Store) {
	ctx := t.Context()
	keys := []*bay.APIKey{
		{ID: "k2", KeyHash: "h2", KeyPrefix: "sk-bay-22222", Owner: bay.OwnerDefault, Active: true, CreatedAt: at(2)},
		{ID: "k1", KeyHash: "h1", KeyPrefix: "sk-bay-11111", Owner: bay.OwnerDefault, Active: true, CreatedAt: at(1)},
		{ID: "k3", KeyHash: "h3", KeyPrefix: "sk-bay-33333", Owner: bay.OwnerDefault, Active: false, CreatedAt: at(3)},
	}
	mustTx(t, s, func(tx bay.Tx) error {
		for _, k := range keys {
			if err := tx.InsertAPIKey(ctx, k); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.ListAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("active keys: %d, want 2", len(got))
	}
	byID := map[string]*bay.APIKey{}
	for _, k := range got {
		byID[k.ID] = k
	}
	for _, want := range keys[:2] {
		k := byID[want.ID]
		if k == nil || k.KeyHash != want.KeyHash || k.KeyPrefix != want.KeyPrefix || k.Owner != want.Owner || !k.Active || !k.CreatedAt.Equal(want.CreatedAt) {
			t.Fatalf("key %s: got %+v, want %+v", want.ID, k, want)
		}
	}
	err = s.Tx(ctx, func(tx bay.Tx) error {
		return tx.InsertAPIKey(ctx, &bay.APIKey{ID: "k4", KeyHash: "h1", KeyPrefix: "x", Owner: "default", Active: true, CreatedAt: at(4)})
	})
	wantCode(t, err, bay.ErrConflict)

	// A key created through the admin API: its name round-trips; revocation keeps the row,
	// takes it out of the active list and keeps the first revocation time.
	named := &bay.APIKey{ID: "k5", KeyHash: "h5", KeyPrefix: "sk-bay-55555", Owner: "alice", Active: true, CreatedAt: at(5), Name: "ci runner"}
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertAPIKey(ctx, named) })
	mustTx(t, s, func(tx bay.Tx) error {
		if err := tx.TouchAPIKey(ctx, "k5", at(7)); err != nil {
			return err
		}
		if err := tx.TouchAPIKey(ctx, "k5", at(6)); err != nil { // never moves back
			return err
		}
		return tx.TouchAPIKey(ctx, "missing", at(6))
	})
	all, err := s.ListAllAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := apiKeyIDs(all); ids != "k1,k2,k3,k5" {
		t.Fatalf("all keys: %s, want k1,k2,k3,k5", ids)
	}
	k5 := all[3]
	if k5.Name != "ci runner" || k5.Owner != "alice" || k5.LastUsedAt == nil || !k5.LastUsedAt.Equal(at(7)) || k5.RevokedAt != nil || !k5.Active {
		t.Fatalf("k5 after touches: %+v", k5)
	}
	if all[0].LastUsedAt != nil || all[0].Name != "" {
		t.Fatalf("untouched key k1: %+v", all[0])
	}
	mustTx(t, s, func(tx bay.Tx) error { return tx.RevokeAPIKey(ctx, "k5", at(8)) })
	mustTx(t, s, func(tx bay.Tx) error { return tx.RevokeAPIKey(ctx, "k5", at(9)) }) // revoking again is no error
	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.RevokeAPIKey(ctx, "missing", at(8)) })
	wantCode(t, err, bay.ErrNotFound)
	if active, err := s.ListAPIKeys(ctx); err != nil || apiKeyIDs(active) != "k1,k2" {
		t.Fatalf("active keys after revocation: %s, %v", apiKeyIDs(active), err)
	}
	all, err = s.ListAllAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if k := all[3]; k.Active || k.RevokedAt == nil || !k.RevokedAt.Equal(at(8)) || k.Name != "ci runner" {
		t.Fatalf("k5 after revocation: %+v", k)
	}
	// The hash of a revoked key can never be stored again.
	err = s.Tx(ctx, func(tx bay.Tx) error {
		return tx.InsertAPIKey(ctx, &bay.APIKey{ID: "k6", KeyHash: "h5", KeyPrefix: "x", Owner: "bob", Active: true, CreatedAt: at(9)})
	})
	wantCode(t, err, bay.ErrConflict)
}

func apiKeyIDs(keys []*bay.APIKey) string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return strings.Join(ids, ",")
}

// ---- warm pool ------------------------------------------------------------------------------

func warmSandbox(id, profile, state string, ready int) *bay.Sandbox {
	sb := plainSandbox(id, bay.OwnerWarmPool)
	sb.ProfileID, sb.IsWarm, sb.WarmState, sb.WarmReadyAt = profile, true, state, ptr(at(ready))
	sb.IdleExpiresAt = ptr(at(ready + 10))
	return sb
}

func insertWarm(t *testing.T, s bay.Store, sbs ...*bay.Sandbox) {
	t.Helper()
	mustTx(t, s, func(tx bay.Tx) error {
		for _, sb := range sbs {
			if err := tx.InsertCargo(t.Context(), cargo(sb.CargoID, sb.Owner, true, sb.ID)); err != nil {
				return err
			}
			if err := tx.InsertSandbox(t.Context(), sb); err != nil {
				return err
			}
		}
		return nil
	})
}

func testClaimWarmSandbox(t *testing.T, s bay.Store) {
	ctx := t.Context()
	deleted := warmSandbox("sandbox-w0", "py", bay.WarmAvailable, 0)
	deleted.DeletedAt = ptr(at(1))
	insertWarm(t, s,
		deleted,
		warmSandbox("sandbox-w1", "py", bay.WarmAvailable, 20),
		warmSandbox("sandbox-w2", "py", bay.WarmAvailable, 10), // oldest ready: claimed first
		warmSandbox("sandbox-w3", "py", bay.WarmPending, 1),
		warmSandbox("sandbox-w4", "py", bay.WarmRetiring, 1),
		warmSandbox("sandbox-w5", "other", bay.WarmAvailable, 1),
	)
	claim := bay.WarmClaim{ProfileID: "py", Owner: "alice", Now: at(100), ExpiresAt: ptr(at(200)), IdleExpiresAt: ptr(at(130))}
	var got *bay.Sandbox
	mustTx(t, s, func(tx bay.Tx) (err error) { got, err = tx.ClaimWarmSandbox(ctx, claim); return err })
	if got.ID != "sandbox-w2" {
		t.Fatalf("claimed %s, want the oldest ready sandbox-w2", got.ID)
	}
	stored, _ := s.GetSandbox(ctx, "sandbox-w2")
	assertSandbox(t, got, stored)
	if stored.IsWarm || stored.Owner != "alice" || stored.Version != 2 ||
		!stored.WarmClaimedAt.Equal(at(100)) || !stored.LastActiveAt.Equal(at(100)) ||
		!stored.ExpiresAt.Equal(at(200)) || !stored.IdleExpiresAt.Equal(at(130)) {
		t.Fatalf("claimed sandbox not handed over: %s", fmtSandbox(stored))
	}
	c, err := s.GetCargo(ctx, stored.CargoID)
	if err != nil || c.Owner != "alice" {
		t.Fatalf("cargo owner not transferred: %+v, %v", c, err)
	}
	// An infinite TTL claim.
	mustTx(t, s, func(tx bay.Tx) (err error) {
		got, err = tx.ClaimWarmSandbox(ctx, bay.WarmClaim{ProfileID: "py", Owner: "bob", Now: at(101), IdleExpiresAt: ptr(at(131))})
		return err
	})
	if got.ID != "sandbox-w1" || got.ExpiresAt != nil || got.Owner != "bob" {
		t.Fatalf("second claim: %s", fmtSandbox(got))
	}
	// None left for py (pending, retiring, deleted, other profile are not claimable).
	err = s.Tx(ctx, func(tx bay.Tx) error {
		_, err := tx.ClaimWarmSandbox(ctx, bay.WarmClaim{ProfileID: "py", Owner: "carol", Now: at(102)})
		return err
	})
	wantCode(t, err, bay.ErrNotFound)
	// A claim rolled back leaves the sandbox in the pool.
	sentinel := errors.New("changed my mind")
	err = s.Tx(ctx, func(tx bay.Tx) error {
		if _, err := tx.ClaimWarmSandbox(ctx, bay.WarmClaim{ProfileID: "other", Owner: "carol", Now: at(103)}); err != nil {
			return err
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatalf("got %v", err)
	}
	w5, _ := s.GetSandbox(ctx, "sandbox-w5")
	c5, _ := s.GetCargo(ctx, w5.CargoID)
	if !w5.IsWarm || w5.Owner != bay.OwnerWarmPool || c5.Owner != bay.OwnerWarmPool {
		t.Fatalf("rolled-back claim left changes: %s, cargo owner %s", fmtSandbox(w5), c5.Owner)
	}
}

func testClaimWarmSandboxRace(t *testing.T, stores []bay.Store) {
	ctx := t.Context()
	s := stores[0]
	const available, claimers = 5, 16
	var sbs []*bay.Sandbox
	for i := range available {
		sbs = append(sbs, warmSandbox(fmt.Sprintf("sandbox-w%02d", i), "py", bay.WarmAvailable, i))
	}
	insertWarm(t, s, sbs...)
	var (
		mu       sync.Mutex
		claimed  = map[string]string{}
		notFound int
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for i := range claimers {
		owner := fmt.Sprintf("owner-%d", i)
		st := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			err := st.Tx(ctx, func(tx bay.Tx) error {
				sb, err := tx.ClaimWarmSandbox(ctx, bay.WarmClaim{ProfileID: "py", Owner: owner, Now: at(100)})
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := claimed[sb.ID]; dup {
					t.Errorf("%s claimed by %s and %s", sb.ID, prev, owner)
				}
				claimed[sb.ID] = owner
				return nil
			})
			switch {
			case bay.IsNotFound(err):
				mu.Lock()
				notFound++
				mu.Unlock()
			case err != nil:
				t.Errorf("claim: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(claimed) != available || notFound != claimers-available {
		t.Fatalf("%d claimed, %d not found; want %d and %d", len(claimed), notFound, available, claimers-available)
	}
	for id, owner := range claimed {
		sb, _ := s.GetSandbox(ctx, id)
		c, _ := s.GetCargo(ctx, sb.CargoID)
		if sb.Owner != owner || c.Owner != owner || sb.IsWarm {
			t.Fatalf("%s: sandbox owner %s, cargo owner %s, want %s", id, sb.Owner, c.Owner, owner)
		}
	}
}

// ---- leases ---------------------------------------------------------------------------------

func testLeases(t *testing.T, s bay.Store) {
	ctx := t.Context()
	acquire := func(name, holder string, now time.Time, ttl time.Duration) bool {
		t.Helper()
		var ok bool
		mustTx(t, s, func(tx bay.Tx) (err error) { ok, err = tx.AcquireLease(ctx, name, holder, now, ttl); return err })
		return ok
	}
	release := func(name, holder string) {
		t.Helper()
		mustTx(t, s, func(tx bay.Tx) error { return tx.ReleaseLease(ctx, name, holder) })
	}
	ttl := 30 * time.Second
	if !acquire("gc", "A", at(0), ttl) {
		t.Fatal("A could not take a free lease")
	}
	if acquire("gc", "B", at(10), ttl) {
		t.Fatal("B took A's unexpired lease")
	}
	if !acquire("warmup", "B", at(10), ttl) {
		t.Fatal("leases are not independent by name")
	}
	if !acquire("gc", "A", at(20), ttl) { // renew: now valid until 50
		t.Fatal("A could not renew its lease")
	}
	if acquire("gc", "B", at(45), ttl) {
		t.Fatal("B took A's renewed lease before it expired")
	}
	if !acquire("gc", "B", at(50), ttl) { // expired exactly now: taken over
		t.Fatal("B could not take over an expired lease")
	}
	if acquire("gc", "A", at(51), ttl) {
		t.Fatal("A took back B's unexpired lease")
	}
	release("gc", "A") // not the holder: no effect
	if acquire("gc", "C", at(52), ttl) {
		t.Fatal("release by a non-holder freed the lease")
	}
	release("gc", "B")
	if !acquire("gc", "C", at(52), ttl) {
		t.Fatal("C could not take a released lease")
	}
	release("nothing", "C") // missing is fine
	err := s.Tx(ctx, func(tx bay.Tx) error { _, err := tx.AcquireLease(ctx, "gc", "C", at(53), 0); return err })
	if err == nil {
		t.Fatal("a zero ttl was accepted")
	}
}

// ---- transactions ---------------------------------------------------------------------------

func testTxRollbackOnError(t *testing.T, s bay.Store) {
	ctx := t.Context()
	sentinel := errors.New("boom")
	err := s.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, cargo("ws-r", "alice", false, "")); err != nil {
			return err
		}
		if err := tx.InsertSandbox(ctx, plainSandbox("sandbox-r", "alice")); err != nil {
			return err
		}
		return sentinel
	})
	if err != sentinel { //nolint:errorlint // the error must be returned unchanged
		t.Fatalf("Tx returned %v, want the fn's error unchanged", err)
	}
	_, err = s.GetSandbox(ctx, "sandbox-r")
	wantCode(t, err, bay.ErrNotFound)
	_, err = s.GetCargo(ctx, "ws-r")
	wantCode(t, err, bay.ErrNotFound)
	// A classified error keeps its class.
	err = s.Tx(ctx, func(tx bay.Tx) error { _, err := tx.GetCargo(ctx, "ws-r"); return err })
	wantCode(t, err, bay.ErrNotFound)
	// The store is usable afterwards.
	insertSandboxes(t, s, plainSandbox("sandbox-r", "alice"))
}

func testTxRollbackOnPanic(t *testing.T, s bay.Store) {
	ctx := t.Context()
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the fn's panic", r)
			}
		}()
		_ = s.Tx(ctx, func(tx bay.Tx) error {
			if err := tx.InsertSandbox(ctx, plainSandbox("sandbox-p", "alice")); err != nil {
				return err
			}
			panic("kaboom")
		})
		t.Fatal("Tx swallowed the panic")
	}()
	_, err := s.GetSandbox(ctx, "sandbox-p")
	wantCode(t, err, bay.ErrNotFound)
	insertSandboxes(t, s, plainSandbox("sandbox-p", "alice")) // the write path is free again
}

func testTxSeesOwnWrites(t *testing.T, s bay.Store) {
	ctx := t.Context()
	mustTx(t, s, func(tx bay.Tx) error {
		if err := tx.InsertSandbox(ctx, plainSandbox("sandbox-o", "alice")); err != nil {
			return err
		}
		got, err := tx.GetSandbox(ctx, "sandbox-o")
		if err != nil {
			return err
		}
		if got.Owner != "alice" {
			t.Fatalf("tx read %+v", got)
		}
		n, err := tx.CountSandboxes(ctx, bay.SandboxQuery{Owner: "alice"})
		if err != nil || n != 1 {
			t.Fatalf("tx count = %d, %v", n, err)
		}
		return nil
	})
}

func testTxSerialised(t *testing.T, stores []bay.Store) {
	ctx := t.Context()
	s := stores[0]
	insertSandboxes(t, s, plainSandbox("sandbox-rmw", "alice"))
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		st := stores[i%len(stores)]
		wg.Go(func() {
			err := st.Tx(ctx, func(tx bay.Tx) error {
				sb, err := tx.GetSandbox(ctx, "sandbox-rmw")
				if err != nil {
					return err
				}
				sb.WarmAttempts++ // a counter: lost updates would show
				return tx.UpdateSandbox(ctx, sb)
			})
			if err != nil {
				t.Errorf("read-modify-write: %v", err)
			}
		})
	}
	wg.Wait()
	sb, _ := s.GetSandbox(ctx, "sandbox-rmw")
	if sb.WarmAttempts != n || sb.Version != 1+n {
		t.Fatalf("after %d serialised increments: attempts %d, version %d", n, sb.WarmAttempts, sb.Version)
	}
}

func testTxCancelledContext(t *testing.T, s bay.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := s.Tx(ctx, func(tx bay.Tx) error {
		called = true
		return tx.InsertSandbox(ctx, plainSandbox("sandbox-ctx", "alice"))
	})
	if err == nil {
		t.Fatalf("Tx with a cancelled context succeeded (fn called: %t)", called)
	}
	if _, err := s.GetSandbox(t.Context(), "sandbox-ctx"); !bay.IsNotFound(err) {
		t.Fatalf("write under a cancelled context persisted: %v", err)
	}
	if _, err := s.GetSandbox(ctx, "sandbox-ctx"); err == nil {
		t.Fatal("read with a cancelled context succeeded")
	}
}

func testTimePrecision(t *testing.T, s bay.Store) {
	ctx := t.Context()
	loc := time.FixedZone("UTC+8", 8*3600)
	fine := time.Date(2025, 1, 2, 3, 4, 5, 123456789, loc) // nanoseconds and a zone
	sb := plainSandbox("sandbox-t", "alice")
	sb.CreatedAt, sb.ExpiresAt = fine, ptr(fine)
	insertSandboxes(t, s, sb)
	got, err := s.GetSandbox(ctx, "sandbox-t")
	if err != nil {
		t.Fatal(err)
	}
	want := fine.Truncate(time.Microsecond)
	for _, g := range []time.Time{got.CreatedAt, *got.ExpiresAt} {
		if !g.Equal(want) || g.Location() != time.UTC {
			t.Fatalf("time read back as %v, want %v in UTC", g, want.UTC())
		}
	}
	// Zero times round-trip as zero.
	if sb2 := plainSandbox("sandbox-z", "alice"); true {
		sb2.CreatedAt, sb2.LastActiveAt = time.Time{}, time.Time{}
		insertSandboxes(t, s, sb2)
		got, _ := s.GetSandbox(ctx, "sandbox-z")
		if !got.CreatedAt.IsZero() || !got.LastActiveAt.IsZero() {
			t.Fatalf("zero time read back as %v", got.CreatedAt)
		}
	}
}

// race runs one Tx per writer at once, writer i on stores[i%len(stores)], and returns the
// index of the one that succeeded; it fails t unless exactly one did and every other one's
// error wraps ErrConflict.
func race(t *testing.T, stores []bay.Store, writers int, fn func(i int, tx bay.Tx) error) int {
	t.Helper()
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		st := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			errs[i] = st.Tx(t.Context(), func(tx bay.Tx) error { return fn(i, tx) })
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !bay.IsConflict(err):
			t.Fatalf("writer %d: %v, want success or a conflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d writers succeeded", writers)
	}
	return winner
}

// testParallelStaleUpdates: many writers hold the same version of one sandbox; exactly one
// update wins, the others wrap ErrConflict, and the row carries the winner's write.
func testParallelStaleUpdates(t *testing.T, stores []bay.Store) {
	ctx := t.Context()
	insertSandboxes(t, stores[0], plainSandbox("sandbox-v", "alice"))
	sbs := make([]*bay.Sandbox, 16)
	for i := range sbs {
		sb, err := stores[i%len(stores)].GetSandbox(ctx, "sandbox-v")
		if err != nil {
			t.Fatal(err)
		}
		sb.WarmInstanceID = fmt.Sprint("writer-", i)
		sbs[i] = sb
	}
	w := race(t, stores, len(sbs), func(i int, tx bay.Tx) error { return tx.UpdateSandbox(ctx, sbs[i]) })
	got, _ := stores[0].GetSandbox(ctx, "sandbox-v")
	if sbs[w].Version != 2 || got.Version != 2 || got.WarmInstanceID != sbs[w].WarmInstanceID {
		t.Fatalf("stored version %d by %q, winner's version %d; want 2 by %q", got.Version, got.WarmInstanceID,
			sbs[w].Version, sbs[w].WarmInstanceID)
	}
}

// errLeaseTaken makes a losing lease acquisition a conflict, so that race can count winners.
var errLeaseTaken = fmt.Errorf("lease held by another: %w", bay.ErrConflict)

// testParallelLeaseAcquire: many holders race for one free lease; exactly one gets it.
func testParallelLeaseAcquire(t *testing.T, stores []bay.Store) {
	ctx := t.Context()
	holder := func(i int) string { return fmt.Sprint("bay-", i) }
	w := race(t, stores, 16, func(i int, tx bay.Tx) error {
		ok, err := tx.AcquireLease(ctx, "gc", holder(i), at(0), time.Minute)
		if err == nil && !ok {
			err = errLeaseTaken
		}
		return err
	})
	// The holder renews; nobody else can take it before it expires.
	for i, st := range stores {
		var ok bool
		mustTx(t, st, func(tx bay.Tx) (err error) {
			ok, err = tx.AcquireLease(ctx, "gc", holder(w), at(30+i), time.Minute)
			return err
		})
		if !ok {
			t.Fatalf("holder %s could not renew", holder(w))
		}
		mustTx(t, st, func(tx bay.Tx) (err error) {
			ok, err = tx.AcquireLease(ctx, "gc", "intruder", at(31+i), time.Minute)
			return err
		})
		if ok {
			t.Fatalf("another holder took %s's unexpired lease", holder(w))
		}
	}
}

// testParallelIdempotencyPuts: many requests put a record under one key at once; exactly one
// is stored, the others wrap ErrConflict.
func testParallelIdempotencyPuts(t *testing.T, stores []bay.Store) {
	ctx := t.Context()
	fp := func(i int) string { return fmt.Sprint("fp-", i) }
	w := race(t, stores, 16, func(i int, tx bay.Tx) error {
		return tx.PutIdempotency(ctx, &bay.IdempotencyRecord{Owner: "alice", Key: "k", Fingerprint: fp(i),
			StatusCode: 201, Response: []byte(fp(i)), CreatedAt: at(0), ExpiresAt: at(3600)})
	})
	got, err := stores[len(stores)-1].GetIdempotency(ctx, "alice", "k")
	if err != nil || got.Fingerprint != fp(w) || string(got.Response) != fp(w) {
		t.Fatalf("stored record %+v (%v), want the winner's %s", got, err, fp(w))
	}
}

// testFailedStatementKeepsTxUsable: a write refused with ErrConflict or ErrNotFound inside a Tx
// leaves the transaction usable; fn may handle the error and carry on, and its other writes
// commit.
func testFailedStatementKeepsTxUsable(t *testing.T, s bay.Store) {
	ctx := t.Context()
	insertSandboxes(t, s, plainSandbox("sandbox-1", "alice"))
	mustTx(t, s, func(tx bay.Tx) error {
		wantCode(t, tx.InsertSandbox(ctx, plainSandbox("sandbox-1", "bob")), bay.ErrConflict)
		wantCode(t, tx.InsertSession(ctx, &bay.Session{ID: "sess-x", SandboxID: "sandbox-unknown", ProfileID: "p",
			DesiredState: bay.SessionPending, ObservedState: bay.SessionPending, CreatedAt: at(0)}), bay.ErrNotFound)
		if err := tx.InsertCargo(ctx, cargo("ws-1", "alice", false, "")); err != nil {
			return err
		}
		wantCode(t, tx.InsertCargo(ctx, cargo("ws-1", "alice", false, "")), bay.ErrConflict)
		stale := plainSandbox("sandbox-1", "carol")
		stale.Version = 7
		wantCode(t, tx.UpdateSandbox(ctx, stale), bay.ErrConflict)
		if err := tx.InsertSession(ctx, &bay.Session{ID: "sess-1", SandboxID: "sandbox-1", ProfileID: "p",
			DesiredState: bay.SessionPending, ObservedState: bay.SessionPending, CreatedAt: at(0)}); err != nil {
			return err
		}
		wantCode(t, tx.InsertSession(ctx, &bay.Session{ID: "sess-1", SandboxID: "sandbox-1", ProfileID: "p",
			DesiredState: bay.SessionPending, ObservedState: bay.SessionPending, CreatedAt: at(0)}), bay.ErrConflict)
		return tx.InsertSandbox(ctx, plainSandbox("sandbox-2", "alice"))
	})
	for _, id := range []string{"sandbox-1", "sandbox-2"} {
		if sb, err := s.GetSandbox(ctx, id); err != nil || sb.Owner != "alice" {
			t.Fatalf("%s after the transaction: %+v, %v", id, sb, err)
		}
	}
	if _, err := s.GetCargo(ctx, "ws-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSession(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
}

// testExecutionArbitraryBytes: a program's code, output and error may hold NUL bytes and
// invalid UTF-8; they round-trip unchanged.
func testExecutionArbitraryBytes(t *testing.T, s bay.Store) {
	ctx := t.Context()
	e := &bay.Execution{ID: "exec-b", Owner: "alice", SandboxID: "sandbox-1", ExecType: "shell",
		Code: "printf 'a\\0b'\x00", Output: ptr("a\x00b\xff\xfe end"), Error: ptr("\x00"), CreatedAt: at(0)}
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertExecution(ctx, e) })
	got, err := s.GetExecution(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "execution", fmtExecution(got), fmtExecution(e))
}
