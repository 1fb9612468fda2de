package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// RunSkills runs the conformance cases of bay.SkillStore. newStore must return an empty,
// migrated store (which also is a bay.Store on the same database) for the calling (sub)test.
func RunSkills(t *testing.T, newStore func(t *testing.T) bay.SkillStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s bay.SkillStore)
	}{
		{"BlobRoundTripAndOwner", testBlobRoundTrip},
		{"CandidateRoundTrip", testCandidateRoundTrip},
		{"CandidateListFilters", testCandidateList},
		{"ReleaseConstraints", testReleaseConstraints},
		{"ReleaseQueries", testReleaseQueries},
		{"ExecutionSamples", testExecutionSamples},
		{"SkillTxRollback", testSkillTxRollback},
		{"LearningQueue", testLearningQueue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func skillTx(t *testing.T, s bay.SkillStore, fn func(tx bay.SkillTx) error) {
	t.Helper()
	if err := s.SkillTx(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func testBlobRoundTrip(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	payload := []byte(`{"commands":["open http://x/","click @e1"],"ü":"\u0000"}`)
	b := &bay.Blob{ID: "blob-000000000001", Owner: "alice", Kind: "candidate_payload", Payload: payload, CreatedAt: now}
	if err := s.PutBlob(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetBlob(ctx, "alice", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != string(payload) || got.Kind != b.Kind || !got.CreatedAt.Equal(now) || got.Owner != "alice" {
		t.Fatalf("round trip: got %+v", got)
	}
	if _, err := s.GetBlob(ctx, "bob", b.ID); !bay.IsNotFound(err) {
		t.Fatalf("another owner's blob: err = %v, want not found", err)
	}
	if err := s.PutBlob(ctx, b); !errors.Is(err, bay.ErrConflict) {
		t.Fatalf("duplicate id: err = %v, want ErrConflict", err)
	}
}

func sampleCandidate(id, owner, key string, created time.Time) *bay.SkillCandidate {
	return &bay.SkillCandidate{ID: id, Owner: owner, SkillKey: key, SkillType: bay.SkillTypeCode, Status: bay.CandidateDraft,
		SourceExecutionIDs: []string{"exec-1"}, CreatedAt: created, UpdatedAt: created}
}

func testCandidateRoundTrip(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	full := &bay.SkillCandidate{
		ID: "sc-000000000001", Owner: "alice", SkillKey: "login", ScenarioKey: ptr("s"), PayloadRef: ptr("blob:blob-1"),
		SkillType: bay.SkillTypeBrowser, AutoReleaseEligible: true, AutoReleaseReason: ptr("r"), Summary: ptr("sum"),
		UsageNotes: ptr("use"), Preconditions: []byte(`{"a":1}`), Postconditions: []byte(`{"b":[1,2]}`),
		SourceExecutionIDs: []string{"exec-a", "exec-b"}, Status: bay.CandidatePromotedCanary, CreatedBy: ptr("system:auto"),
		CreatedAt: now, UpdatedAt: now.Add(time.Second), LatestScore: ptr(0.875), LatestPass: ptr(false),
		LastEvaluatedAt: ptr(now.Add(2 * time.Second)), PromotionReleaseID: ptr("sr-1"),
		Deletion: bay.Deletion{IsDeleted: true, DeletedAt: ptr(now.Add(3 * time.Second)), DeletedBy: ptr("alice"), Reason: ptr("old")},
	}
	bare := sampleCandidate("sc-000000000002", "alice", "login", now)
	skillTx(t, s, func(tx bay.SkillTx) error {
		if err := tx.InsertCandidate(ctx, full); err != nil {
			return err
		}
		return tx.InsertCandidate(ctx, bare)
	})
	for _, want := range []*bay.SkillCandidate{full, bare} {
		got, err := s.SkillReads().GetCandidate(ctx, "alice", want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", dump(got)) != fmt.Sprintf("%+v", dump(want)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", dump(got), dump(want))
		}
	}
	if _, err := s.SkillReads().GetCandidate(ctx, "bob", full.ID); !bay.IsNotFound(err) {
		t.Fatalf("another owner's candidate: err = %v", err)
	}
	bare.Status, bare.LatestPass = bay.CandidateEvaluating, ptr(true)
	skillTx(t, s, func(tx bay.SkillTx) error { return tx.UpdateCandidate(ctx, bare) })
	got, _ := s.SkillReads().GetCandidate(ctx, "alice", bare.ID)
	if got.Status != bay.CandidateEvaluating || got.LatestPass == nil || !*got.LatestPass {
		t.Fatalf("update: got %+v", got)
	}
	err := s.SkillTx(ctx, func(tx bay.SkillTx) error {
		return tx.UpdateCandidate(ctx, sampleCandidate("sc-missing", "alice", "k", now))
	})
	if !bay.IsNotFound(err) {
		t.Fatalf("update missing: err = %v", err)
	}
}

// dump renders pointers by value so that two records compare by content.
func dump(v any) string {
	switch x := v.(type) {
	case *bay.SkillCandidate:
		return fmt.Sprintf("%s %s %s %s %s %s %v %s %s %s %s %s %v %s %s %s %s %s %s %s %s %v %s %s %s", x.ID, x.Owner, x.SkillKey,
			str(x.ScenarioKey), str(x.PayloadRef), x.SkillType, x.AutoReleaseEligible, str(x.AutoReleaseReason), str(x.Summary),
			str(x.UsageNotes), x.Preconditions, x.Postconditions, x.SourceExecutionIDs, x.Status, str(x.CreatedBy),
			x.CreatedAt.Format(time.RFC3339Nano), x.UpdatedAt.Format(time.RFC3339Nano), str(x.LatestScore), str(x.LatestPass),
			tm(x.LastEvaluatedAt), str(x.PromotionReleaseID), x.IsDeleted, tm(x.DeletedAt), str(x.DeletedBy), str(x.Reason))
	case *bay.SkillRelease:
		return fmt.Sprintf("%s %s %s %s %d %s %v %s %s %s %s %s %s %s %s %s %v %s %s %s", x.ID, x.Owner, x.SkillKey, x.CandidateID,
			x.Version, x.Stage, x.IsActive, x.ReleaseMode, str(x.PromotedBy), x.PromotedAt.Format(time.RFC3339Nano),
			str(x.RollbackOf), str(x.AutoPromotedFrom), tm(x.HealthWindowEndAt), str(x.UpgradeOfReleaseID),
			str(x.UpgradeReason), str(x.ChangeSummary), x.IsDeleted, tm(x.DeletedAt), str(x.DeletedBy), str(x.Reason))
	}
	return fmt.Sprint(v)
}

func str[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

func tm(p *time.Time) string {
	if p == nil {
		return "<nil>"
	}
	return p.Format(time.RFC3339Nano)
}

func testCandidateList(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Microsecond)
	skillTx(t, s, func(tx bay.SkillTx) error {
		for i := range 7 {
			c := sampleCandidate(fmt.Sprintf("sc-%012d", i), "alice", []string{"a", "b"}[i%2], base.Add(time.Duration(i)*time.Second))
			if i == 6 {
				c.IsDeleted = true
			}
			if i == 0 {
				c.Status = bay.CandidateRejected
			}
			if err := tx.InsertCandidate(ctx, c); err != nil {
				return err
			}
		}
		return tx.InsertCandidate(ctx, sampleCandidate("sc-bob", "bob", "a", base))
	})
	r := s.SkillReads()
	cases := []struct {
		q     bay.CandidateQuery
		ids   []string
		total int
	}{
		{bay.CandidateQuery{Owner: "alice", Limit: 100}, []string{"sc-000000000005", "sc-000000000004", "sc-000000000003", "sc-000000000002", "sc-000000000001", "sc-000000000000"}, 6},
		{bay.CandidateQuery{Owner: "alice", Limit: 2, Offset: 1}, []string{"sc-000000000004", "sc-000000000003"}, 6},
		{bay.CandidateQuery{Owner: "alice", SkillKey: "a", Limit: 100}, []string{"sc-000000000004", "sc-000000000002", "sc-000000000000"}, 3},
		{bay.CandidateQuery{Owner: "alice", Status: bay.CandidateRejected, Limit: 100}, []string{"sc-000000000000"}, 1},
		{bay.CandidateQuery{Owner: "carol", Limit: 100}, nil, 0},
	}
	for _, c := range cases {
		got, total, err := r.ListCandidates(ctx, c.q)
		checkPage(t, c.q, got, total, err, c.ids, c.total, func(x *bay.SkillCandidate) string { return x.ID })
	}
}

func sampleRelease(id, owner, key, candidate string, version int, active bool, at time.Time) *bay.SkillRelease {
	return &bay.SkillRelease{ID: id, Owner: owner, SkillKey: key, CandidateID: candidate, Version: version, Stage: bay.StageCanary,
		IsActive: active, ReleaseMode: bay.ReleaseModeManual, PromotedBy: ptr(owner), PromotedAt: at}
}

func testReleaseConstraints(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	skillTx(t, s, func(tx bay.SkillTx) error {
		if err := tx.InsertCandidate(ctx, sampleCandidate("sc-1", "alice", "k", now)); err != nil {
			return err
		}
		if err := tx.InsertCandidate(ctx, sampleCandidate("sc-2", "bob", "k", now)); err != nil {
			return err
		}
		return tx.InsertRelease(ctx, sampleRelease("sr-1", "alice", "k", "sc-1", 1, true, now))
	})
	insert := func(v *bay.SkillRelease) error {
		return s.SkillTx(ctx, func(tx bay.SkillTx) error { return tx.InsertRelease(ctx, v) })
	}
	if err := insert(sampleRelease("sr-2", "alice", "k", "sc-1", 1, false, now)); !errors.Is(err, bay.ErrConflict) {
		t.Fatalf("taken version: err = %v, want ErrConflict", err)
	}
	if err := insert(sampleRelease("sr-3", "alice", "k", "sc-1", 2, true, now)); !errors.Is(err, bay.ErrConflict) {
		t.Fatalf("second active release: err = %v, want ErrConflict", err)
	}
	// Other owners and other skills have their own versions and active slots.
	if err := insert(sampleRelease("sr-4", "bob", "k", "sc-2", 1, true, now)); err != nil {
		t.Fatal(err)
	}
	if err := insert(sampleRelease("sr-5", "alice", "other", "sc-1", 1, true, now)); err != nil {
		t.Fatal(err)
	}
	skillTx(t, s, func(tx bay.SkillTx) error {
		if err := tx.DeactivateReleases(ctx, "alice", "k"); err != nil {
			return err
		}
		return tx.InsertRelease(ctx, sampleRelease("sr-6", "alice", "k", "sc-1", 2, true, now))
	})
	full := sampleRelease("sr-7", "alice", "full", "sc-1", 1, true, now)
	full.RollbackOf, full.AutoPromotedFrom, full.HealthWindowEndAt = ptr("sr-0"), ptr("sr-x"), ptr(now.Add(time.Hour))
	full.UpgradeOfReleaseID, full.UpgradeReason, full.ChangeSummary, full.ReleaseMode = ptr("sr-u"), ptr("why"), ptr("what"), bay.ReleaseModeAuto
	full.Deletion = bay.Deletion{IsDeleted: true, DeletedAt: ptr(now), DeletedBy: ptr("alice"), Reason: ptr("r")}
	if err := insert(full); err != nil {
		t.Fatal(err)
	}
	got, err := s.SkillReads().GetRelease(ctx, "alice", "sr-7")
	if err != nil {
		t.Fatal(err)
	}
	if dump(got) != dump(full) {
		t.Fatalf("round trip:\n got %s\nwant %s", dump(got), dump(full))
	}
	if _, err := s.SkillReads().GetRelease(ctx, "bob", "sr-7"); !bay.IsNotFound(err) {
		t.Fatalf("another owner's release: err = %v", err)
	}
}

func testReleaseQueries(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Microsecond)
	skillTx(t, s, func(tx bay.SkillTx) error {
		for _, id := range []string{"sc-1", "sc-2"} {
			if err := tx.InsertCandidate(ctx, sampleCandidate(id, "alice", "k", base)); err != nil {
				return err
			}
		}
		for v := 1; v <= 4; v++ {
			r := sampleRelease(fmt.Sprintf("sr-%d", v), "alice", "k", []string{"sc-1", "sc-2"}[v%2], v, v == 4, base.Add(time.Duration(v)*time.Minute))
			r.IsDeleted = v == 3
			if v == 2 {
				r.Stage = bay.StageStable
			}
			if err := tx.InsertRelease(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	r := s.SkillReads()
	if n, err := r.MaxReleaseVersion(ctx, "alice", "k"); err != nil || n != 4 {
		t.Fatalf("max version = %d, %v; want 4", n, err)
	}
	if n, err := r.MaxReleaseVersion(ctx, "alice", "none"); err != nil || n != 0 {
		t.Fatalf("max version of no releases = %d, %v; want 0", n, err)
	}
	if p, err := r.PreviousRelease(ctx, "alice", "k", 4, false); err != nil || p.ID != "sr-2" {
		t.Fatalf("previous live release of v4 = %v, %v; want sr-2", p, err)
	}
	if p, err := r.PreviousRelease(ctx, "alice", "k", 4, true); err != nil || p.ID != "sr-3" {
		t.Fatalf("previous release of v4 (deleted included) = %v, %v; want sr-3", p, err)
	}
	if _, err := r.PreviousRelease(ctx, "alice", "k", 1, true); !bay.IsNotFound(err) {
		t.Fatalf("previous of v1: err = %v", err)
	}
	if a, err := r.ActiveRelease(ctx, "alice", "k"); err != nil || a.ID != "sr-4" {
		t.Fatalf("active = %v, %v", a, err)
	}
	if live, err := r.CandidateInActiveRelease(ctx, "alice", "sc-2"); err != nil || live {
		t.Fatalf("sc-2 in active release = %v, %v; want false", live, err)
	}
	if live, err := r.CandidateInActiveRelease(ctx, "alice", "sc-1"); err != nil || !live {
		t.Fatalf("sc-1 in active release = %v, %v; want true", live, err)
	}
	cases := []struct {
		q     bay.ReleaseQuery
		ids   []string
		total int
	}{
		{bay.ReleaseQuery{Owner: "alice", Limit: 100}, []string{"sr-4", "sr-2", "sr-1"}, 3},
		{bay.ReleaseQuery{Owner: "alice", ActiveOnly: true, Limit: 100}, []string{"sr-4"}, 1},
		{bay.ReleaseQuery{Owner: "alice", Stage: bay.StageStable, Limit: 100}, []string{"sr-2"}, 1},
		{bay.ReleaseQuery{Owner: "alice", SkillKey: "k", Limit: 1, Offset: 2}, []string{"sr-1"}, 3},
		{bay.ReleaseQuery{Owner: "bob", Limit: 100}, nil, 0},
	}
	for _, c := range cases {
		got, total, err := r.ListReleases(ctx, c.q)
		checkPage(t, c.q, got, total, err, c.ids, c.total, func(x *bay.SkillRelease) string { return x.ID })
	}
	skillTx(t, s, func(tx bay.SkillTx) error {
		c, err := tx.GetCandidate(ctx, "alice", "sc-1")
		if err != nil {
			return err
		}
		c.PromotionReleaseID = ptr("sr-1")
		if err := tx.UpdateCandidate(ctx, c); err != nil {
			return err
		}
		return tx.ClearPromotionRelease(ctx, "alice", "sr-1")
	})
	if c, _ := r.GetCandidate(ctx, "alice", "sc-1"); c.PromotionReleaseID != nil {
		t.Fatalf("promotion release not cleared: %v", *c.PromotionReleaseID)
	}
}

func testExecutionSamples(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	st := s.(bay.Store)
	base := time.Now().UTC().Truncate(time.Microsecond)
	rows := []struct {
		owner, tags string
		at          time.Duration
		ok          bool
		ms          int64
	}{
		{"alice", "release:sr-1,skill:k", 0, true, 10},
		{"alice", "RELEASE:SR-1", time.Minute, false, 30},
		{"alice", "release:sr-12", 2 * time.Minute, true, 20}, // substring match, as the reference
		{"alice", "release:sr-1", 2 * time.Hour, true, 99},    // outside the window
		{"alice", "release:sr-2", time.Minute, true, 5},
		{"bob", "release:sr-1", time.Minute, true, 5},
	}
	if err := st.Tx(ctx, func(tx bay.Tx) error {
		for i, r := range rows {
			tags := r.tags
			if err := tx.InsertExecution(ctx, &bay.Execution{ID: fmt.Sprintf("exec-%d", i), Owner: r.owner, SandboxID: "sandbox-1",
				ExecType: bay.ExecBrowserBatch, Success: r.ok, ExecutionTimeMS: r.ms, Tags: &tags, CreatedAt: base.Add(r.at)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SkillReads().ExecutionSamples(ctx, "alice", "release:sr-1", base, base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var ms []int64
	for _, x := range got {
		ms = append(ms, x.DurationMS)
	}
	slices.Sort(ms)
	if !slices.Equal(ms, []int64{10, 20, 30}) {
		t.Fatalf("samples = %+v, want durations 10, 20, 30", got)
	}
	if ok, err := s.SkillReads().OwnsExecution(ctx, "alice", "exec-0"); err != nil || !ok {
		t.Fatalf("alice owns exec-0: %v, %v", ok, err)
	}
	if ok, err := s.SkillReads().OwnsExecution(ctx, "bob", "exec-0"); err != nil || ok {
		t.Fatalf("bob owns exec-0: %v, %v", ok, err)
	}
}

func testSkillTxRollback(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.SkillTx(ctx, func(tx bay.SkillTx) error {
		if err := tx.InsertCandidate(ctx, sampleCandidate("sc-1", "alice", "k", time.Now().UTC())); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if _, err := s.SkillReads().GetCandidate(ctx, "alice", "sc-1"); !bay.IsNotFound(err) {
		t.Fatalf("rolled back insert is visible: err = %v", err)
	}
}

// checkPage compares a list answer's ids and total.
func checkPage[T any](t *testing.T, q any, got []*T, total int, err error, ids []string, wantTotal int, id func(*T) string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, x := range got {
		gotIDs = append(gotIDs, id(x))
	}
	if !slices.Equal(gotIDs, ids) || total != wantTotal {
		t.Errorf("%+v: got %v (total %d), want %v (total %d)", q, gotIDs, total, ids, wantTotal)
	}
}

func testLearningQueue(t *testing.T, s bay.SkillStore) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Microsecond)
	status := func(v string) *string { return &v }
	rows := []struct {
		id     string
		typ    string
		learn  bool
		status *string
		at     time.Duration
	}{
		{"exec-late", bay.ExecBrowser, true, status("pending"), 3 * time.Second},
		{"exec-early", bay.ExecBrowserBatch, true, nil, time.Second},
		{"exec-middle", bay.ExecBrowser, true, status("pending"), 2 * time.Second},
		{"exec-done", bay.ExecBrowser, true, status("processed"), 0},
		{"exec-busy", bay.ExecBrowser, true, status("processing"), 0},
		{"exec-nolearn", bay.ExecBrowser, false, status("skipped"), 0},
		{"exec-python", bay.ExecPython, true, status("pending"), 0},
	}
	if err := s.(bay.Store).Tx(ctx, func(tx bay.Tx) error {
		for _, r := range rows {
			if err := tx.InsertExecution(ctx, &bay.Execution{ID: r.id, Owner: "alice", SandboxID: "sandbox-1", ExecType: r.typ,
				LearnEnabled: r.learn, LearnStatus: r.status, CreatedAt: base.Add(r.at)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SkillReads().LearningQueue(ctx, 10)
	if err != nil || !slices.Equal(got, []string{"exec-busy", "exec-early", "exec-middle", "exec-late"}) {
		t.Fatalf("queue = %v, %v", got, err)
	}
	if got, _ := s.SkillReads().LearningQueue(ctx, 2); !slices.Equal(got, []string{"exec-busy", "exec-early"}) {
		t.Fatalf("queue of 2 = %v", got)
	}
}
