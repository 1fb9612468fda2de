package skillrel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/postgres"
	"github.com/shipyard-dev/shipyard/internal/bay/skillrel"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// store is both ports of one database.
type store interface {
	bay.Store
	bay.SkillStore
}

// backends open a fresh database of each store; pair opens two stores on one database, as two
// bays sharing it.
var backends = []struct {
	name string
	pair func(t *testing.T) (store, store)
}{
	{"sqlite", func(t *testing.T) (store, store) {
		path := filepath.Join(t.TempDir(), "bay.db")
		return openSQLite(t, path), openSQLite(t, path)
	}},
	{"postgres", func(t *testing.T) (store, store) {
		url := pgtest.NewDatabase(t)
		return openPG(t, url), openPG(t, url)
	}},
}

func openSQLite(t *testing.T, path string) store {
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openPG(t *testing.T, url string) store {
	s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// each runs fn once per backend with a fresh store and a service over it.
func each(t *testing.T, fn func(t *testing.T, st store, svc *skillrel.Service)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st, _ := b.pair(t)
			fn(t, st, skillrel.New(st, skillrel.Options{MaxBlobBytes: 256}))
		})
	}
}

func code(err error) string {
	if err == nil {
		return "ok"
	}
	return bay.ErrorCode(err)
}

func message(err error) string {
	var e *bay.Error
	if err == nil || !asError(err, &e) {
		return ""
	}
	return e.Message
}

func asError(err error, e **bay.Error) bool {
	for err != nil {
		if x, ok := err.(*bay.Error); ok {
			*e = x
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

var quiet = slog.New(slog.DiscardHandler)

func ptr[T any](v T) *T { return &v }

// addExecution records an execution of owner with tags, created at.
func addExecution(t *testing.T, st store, owner, tags string, ok bool, ms int64, at time.Time) string {
	t.Helper()
	id := bay.NewID(bay.PrefixExecution)
	err := st.Tx(context.Background(), func(tx bay.Tx) error {
		return tx.InsertExecution(context.Background(), &bay.Execution{ID: id, Owner: owner, SandboxID: "sandbox-000000000001",
			ExecType: bay.ExecBrowserBatch, Success: ok, ExecutionTimeMS: ms, Tags: &tags, CreatedAt: at.UTC().Truncate(time.Microsecond)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestPayloads(t *testing.T) {
	each(t, func(t *testing.T, st store, svc *skillrel.Service) {
		ctx := context.Background()
		b, err := svc.PutBlob(ctx, "alice", "candidate_payload", json.RawMessage(`{"commands": ["open http://a/"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.ID, "blob-") || len(b.ID) != 17 || b.Kind != "candidate_payload" {
			t.Fatalf("blob = %+v", b)
		}
		got, err := svc.GetBlob(ctx, "alice", skillrel.Ref(b.ID))
		if err != nil || string(got.Payload) != `{"commands":["open http://a/"]}` {
			t.Fatalf("get = %+v, %v", got, err)
		}
		if d, err := svc.PutBlob(ctx, "alice", "", json.RawMessage(`[1,2]`)); err != nil || d.Kind != bay.BlobKindGeneric {
			t.Fatalf("default kind: %+v, %v", d, err)
		}
		cases := []struct {
			name, owner, kind, payload, ref string
			code, msg                       string
		}{
			{name: "scalar payload", payload: `"x"`, code: bay.CodeValidation, msg: "Payload must be a JSON object or array"},
			{name: "too large", payload: `{"a":"` + strings.Repeat("x", 300) + `"}`, code: bay.CodePayloadTooLarge, msg: "Payload exceeds 256 bytes"},
			{name: "not a blob ref", ref: "file:x", code: bay.CodeValidation, msg: "Unsupported payload_ref: file:x"},
			{name: "empty id", ref: "blob:", code: bay.CodeValidation, msg: "Invalid payload_ref: blob:"},
			{name: "missing", ref: "blob:blob-000000000000", code: bay.CodeNotFound, msg: "Artifact blob not found: blob-000000000000"},
			{name: "another owner's", owner: "bob", ref: skillrel.Ref(b.ID), code: bay.CodeNotFound, msg: "Artifact blob not found: " + b.ID},
		}
		for _, c := range cases {
			owner := c.owner
			if owner == "" {
				owner = "alice"
			}
			var err error
			if c.ref != "" {
				_, err = svc.GetBlob(ctx, owner, c.ref)
			} else {
				_, err = svc.PutBlob(ctx, owner, c.kind, json.RawMessage(c.payload))
			}
			if code(err) != c.code || message(err) != c.msg {
				t.Errorf("%s: got %s %q, want %s %q", c.name, code(err), message(err), c.code, c.msg)
			}
		}
	})
}

func TestCreateCandidateRules(t *testing.T) {
	each(t, func(t *testing.T, st store, svc *skillrel.Service) {
		ctx := context.Background()
		e1 := addExecution(t, st, "alice", "", true, 1, time.Now())
		e2 := addExecution(t, st, "bob", "", true, 1, time.Now())
		blob, err := svc.PutBlob(ctx, "alice", "", json.RawMessage(`{"commands":["open x"]}`))
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			p    skillrel.CandidateParams
			code string
			msg  string
		}{
			{"blank key", skillrel.CandidateParams{SkillKey: "  ", SourceExecutionIDs: []string{e1}}, bay.CodeValidation, "skill_key must not be empty"},
			{"no sources", skillrel.CandidateParams{SkillKey: "k"}, bay.CodeValidation, "source_execution_ids must not be empty"},
			{"unknown source", skillrel.CandidateParams{SkillKey: "k", SourceExecutionIDs: []string{e1, "exec-000000000000"}}, bay.CodeValidation, "Execution ID not found or not owned: exec-000000000000"},
			{"another owner's source", skillrel.CandidateParams{SkillKey: "k", SourceExecutionIDs: []string{e2}}, bay.CodeValidation, "Execution ID not found or not owned: " + e2},
			{"missing payload", skillrel.CandidateParams{SkillKey: "k", SourceExecutionIDs: []string{e1}, PayloadRef: ptr("blob:blob-000000000000")}, bay.CodeValidation, "Payload not found or not owned: blob:blob-000000000000"},
			{"bad payload ref", skillrel.CandidateParams{SkillKey: "k", SourceExecutionIDs: []string{e1}, PayloadRef: ptr("s3:x")}, bay.CodeValidation, "Unsupported payload_ref: s3:x"},
			{"preconditions not an object", skillrel.CandidateParams{SkillKey: "k", SourceExecutionIDs: []string{e1}, Preconditions: json.RawMessage(`[1]`)}, bay.CodeValidation, "preconditions must be a JSON object"},
			{"ok", skillrel.CandidateParams{SkillKey: " csv-clean ", SourceExecutionIDs: []string{e1}, PayloadRef: ptr(skillrel.Ref(blob.ID)),
				Summary: ptr("Clean CSV"), Preconditions: json.RawMessage(`{"file": "data.csv"}`)}, "ok", ""},
		}
		for _, c := range cases {
			got, err := svc.CreateCandidate(ctx, "alice", c.p)
			if code(err) != c.code || message(err) != c.msg {
				t.Errorf("%s: got %s %q, want %s %q", c.name, code(err), message(err), c.code, c.msg)
				continue
			}
			if err == nil {
				if got.SkillKey != "csv-clean" || got.Status != bay.CandidateDraft || got.SkillType != bay.SkillTypeCode ||
					*got.CreatedBy != "alice" || string(got.Preconditions) != `{"file":"data.csv"}` || !slices.Equal(got.SourceExecutionIDs, []string{e1}) {
					t.Errorf("created %+v", got)
				}
				if _, err := svc.GetCandidate(ctx, "bob", got.ID); code(err) != bay.CodeNotFound {
					t.Errorf("bob reads alice's candidate: %v", err)
				}
			}
		}
		if _, err := svc.ListCandidates(ctx, bay.CandidateQuery{Owner: "alice", Status: "bogus", Limit: 10}); message(err) != "Invalid candidate status: bogus" {
			t.Errorf("invalid status filter: %v", err)
		}
		if _, err := svc.ListReleases(ctx, bay.ReleaseQuery{Owner: "alice", Stage: "beta", Limit: 10}); message(err) != "Invalid release stage: beta" {
			t.Errorf("invalid stage filter: %v", err)
		}
	})
}

// newCandidate creates a candidate of owner for key from a fresh execution.
func newCandidate(t *testing.T, st store, svc *skillrel.Service, owner, key string) *bay.SkillCandidate {
	t.Helper()
	c, err := svc.CreateCandidate(context.Background(), owner, skillrel.CandidateParams{SkillKey: key,
		SourceExecutionIDs: []string{addExecution(t, st, owner, "", true, 1, time.Now())}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func passing(t *testing.T, svc *skillrel.Service, owner, id string) {
	t.Helper()
	if _, err := svc.Evaluate(context.Background(), owner, id, skillrel.EvaluationParams{Passed: true, Score: ptr(0.9)}); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	each(t, func(t *testing.T, st store, svc *skillrel.Service) {
		ctx := context.Background()
		c1 := newCandidate(t, st, svc, "alice", "csv")
		// No evaluation, then a failing one: promotion is blocked and the candidate rejected.
		if _, err := svc.Promote(ctx, "alice", c1.ID, skillrel.PromoteParams{}); message(err) != "Candidate has no passing evaluation; promotion is blocked" {
			t.Fatalf("promote unevaluated: %v", err)
		}
		ev, err := svc.Evaluate(ctx, "alice", c1.ID, skillrel.EvaluationParams{Passed: false, Score: ptr(0.2), BenchmarkID: ptr("b1")})
		if err != nil || ev.Passed || *ev.EvaluatedBy != "alice" || !strings.HasPrefix(ev.ID, "se-") {
			t.Fatalf("evaluate: %+v, %v", ev, err)
		}
		if got, _ := svc.GetCandidate(ctx, "alice", c1.ID); got.Status != bay.CandidateRejected || *got.LatestPass || *got.LatestScore != 0.2 {
			t.Fatalf("after failing evaluation: %+v", got)
		}
		_, err = svc.Promote(ctx, "alice", c1.ID, skillrel.PromoteParams{})
		var be *bay.Error
		if code(err) != bay.CodeConflict || !asError(err, &be) || be.Details["candidate_id"] != c1.ID {
			t.Fatalf("promote rejected: %v", err)
		}
		if _, err := svc.Promote(ctx, "alice", c1.ID, skillrel.PromoteParams{Stage: "beta"}); message(err) != "Invalid release stage: beta" {
			t.Fatalf("bad stage: %v", err)
		}
		passing(t, svc, "alice", c1.ID)
		if got, _ := svc.GetCandidate(ctx, "alice", c1.ID); got.Status != bay.CandidateEvaluating {
			t.Fatalf("after passing evaluation: %s", got.Status)
		}
		r1, err := svc.Promote(ctx, "alice", c1.ID, skillrel.PromoteParams{ChangeSummary: ptr("first")})
		if err != nil || r1.Version != 1 || r1.Stage != bay.StageCanary || !r1.IsActive || r1.ReleaseMode != bay.ReleaseModeManual || *r1.PromotedBy != "alice" {
			t.Fatalf("promote: %+v, %v", r1, err)
		}
		if got, _ := svc.GetCandidate(ctx, "alice", c1.ID); got.Status != bay.CandidatePromoted || *got.PromotionReleaseID != r1.ID {
			t.Fatalf("promoted candidate: %+v", got)
		}
		// A failing re-evaluation of a live release's candidate keeps its status.
		if _, err := svc.Evaluate(ctx, "alice", c1.ID, skillrel.EvaluationParams{Passed: false}); err != nil {
			t.Fatal(err)
		}
		if got, _ := svc.GetCandidate(ctx, "alice", c1.ID); got.Status != bay.CandidatePromoted || *got.LatestPass {
			t.Fatalf("re-evaluated live candidate: %+v", got)
		}
		passing(t, svc, "alice", c1.ID)
		if _, err := svc.DeleteCandidate(ctx, "alice", c1.ID, nil); message(err) != "Candidate referenced by active release cannot be deleted" {
			t.Fatalf("delete live candidate: %v", err)
		}
		c2 := newCandidate(t, st, svc, "alice", "csv")
		passing(t, svc, "alice", c2.ID)
		r2, err := svc.Promote(ctx, "alice", c2.ID, skillrel.PromoteParams{Stage: bay.StageStable})
		if err != nil || r2.Version != 2 {
			t.Fatalf("second promote: %+v, %v", r2, err)
		}
		if v, _ := st.SkillReads().GetRelease(ctx, "alice", r1.ID); v.IsActive {
			t.Fatal("v1 still active after v2")
		}
		// Deleting the active v2 keeps its version taken: the next one is 3.
		del, err := svc.DeleteRelease(ctx, "alice", r2.ID, ptr("superseded"))
		if err != nil || *del.Reason != "superseded" || *del.DeletedBy != "alice" || del.DeletedAt == nil {
			t.Fatalf("delete release: %+v, %v", del, err)
		}
		if _, err := svc.DeleteRelease(ctx, "alice", r2.ID, nil); message(err) != "Skill release not found: "+r2.ID {
			t.Fatalf("delete twice: %v", err)
		}
		if got, _ := svc.GetCandidate(ctx, "alice", c2.ID); got.PromotionReleaseID != nil {
			t.Fatal("promotion_release_id of a deleted release kept")
		}
		// Rollback of v1: no earlier release.
		_, err = svc.Rollback(ctx, "alice", r1.ID, false)
		if message(err) != "Rollback is unavailable: no previous release exists" || !asError(err, &be) || be.Details["release_id"] != r1.ID {
			t.Fatalf("rollback without previous: %v", err)
		}
		r3, err := svc.Promote(ctx, "alice", c2.ID, skillrel.PromoteParams{})
		if err != nil || r3.Version != 3 {
			t.Fatalf("promote after delete: %+v, %v", r3, err)
		}
		// Rolling back v3 makes v4 from v1 (v2 is deleted), active, and marks v3's candidate.
		r4, err := svc.Rollback(ctx, "alice", r3.ID, false)
		if err != nil || r4.Version != 4 || r4.CandidateID != c1.ID || r4.Stage != bay.StageCanary || *r4.RollbackOf != r3.ID || !r4.IsActive {
			t.Fatalf("rollback: %+v, %v", r4, err)
		}
		if got, _ := svc.GetCandidate(ctx, "alice", c2.ID); got.Status != bay.CandidateRolledBack {
			t.Fatalf("rolled back candidate: %s", got.Status)
		}
		page, err := svc.ListReleases(ctx, bay.ReleaseQuery{Owner: "alice", SkillKey: "csv", ActiveOnly: true, Limit: 10})
		if err != nil || page.Total != 1 || page.Items[0].ID != r4.ID {
			t.Fatalf("active releases: %+v, %v", page, err)
		}
		// Now c2 is no longer live: it can be deleted, and then it is gone.
		if _, err := svc.DeleteCandidate(ctx, "alice", c2.ID, ptr("old")); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.GetCandidate(ctx, "alice", c2.ID); message(err) != "Skill candidate not found: "+c2.ID {
			t.Fatalf("deleted candidate: %v", err)
		}
		// Another owner sees none of it.
		if _, err := svc.Rollback(ctx, "bob", r4.ID, false); code(err) != bay.CodeNotFound {
			t.Fatalf("bob rolls back alice's release: %v", err)
		}
		if p, _ := svc.ListReleases(ctx, bay.ReleaseQuery{Owner: "bob", Limit: 10}); p.Total != 0 {
			t.Fatalf("bob lists %d releases", p.Total)
		}
	})
}

// TestConcurrentReleases races promotes and rollbacks of one skill from two stores sharing a
// database (two bays): versions stay unique and consecutive and one release stays active.
func TestConcurrentReleases(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			a, bb := b.pair(t)
			svcs := []*skillrel.Service{skillrel.New(a, skillrel.Options{}), skillrel.New(bb, skillrel.Options{})}
			ctx := context.Background()
			var cands []*bay.SkillCandidate
			for range 4 {
				c := newCandidate(t, a, svcs[0], "alice", "race")
				passing(t, svcs[0], "alice", c.ID)
				cands = append(cands, c)
			}
			if _, err := svcs[0].Promote(ctx, "alice", cands[0].ID, skillrel.PromoteParams{}); err != nil {
				t.Fatal(err)
			}
			second, err := svcs[0].Promote(ctx, "alice", cands[1].ID, skillrel.PromoteParams{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 24
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					svc := svcs[i%2]
					var err error
					if i%3 == 2 {
						_, err = svc.Rollback(ctx, "alice", second.ID, false)
					} else {
						_, err = svc.Promote(ctx, "alice", cands[i%4].ID, skillrel.PromoteParams{})
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("concurrent release: %v", err)
				}
			}
			rels, total, err := a.SkillReads().ListReleases(ctx, bay.ReleaseQuery{Owner: "alice", SkillKey: "race", Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			var versions []int
			active := 0
			for _, r := range rels {
				versions = append(versions, r.Version)
				if r.IsActive {
					active++
				}
			}
			slices.Sort(versions)
			for i, v := range versions {
				if v != i+1 {
					t.Fatalf("versions %v are not 1..%d", versions, total)
				}
			}
			if active != 1 || total != n+2 {
				t.Fatalf("%d active of %d releases (want 1 of %d)", active, total, n+2)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	var now time.Time
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st, _ := b.pair(t)
			now = time.Now().UTC().Truncate(time.Microsecond)
			clock := func() time.Time { return now }
			svc := skillrel.New(st, skillrel.Options{Now: clock})
			ctx := context.Background()
			c1 := newCandidate(t, st, svc, "alice", "flow")
			if _, err := svc.Evaluate(ctx, "alice", c1.ID, skillrel.EvaluationParams{Passed: true,
				Report: ptr(`{"replay_success": 0.9, "samples": 40, "p95_duration": 1200}`)}); err != nil {
				t.Fatal(err)
			}
			r1, err := svc.Promote(ctx, "alice", c1.ID, skillrel.PromoteParams{})
			if err != nil {
				t.Fatal(err)
			}
			// v1 alone: no samples → not healthy, no rollback; baseline perfect.
			h, err := svc.Health(ctx, "alice", r1.ID)
			if err != nil || h.Observed.Samples != 0 || h.Healthy || h.ShouldRollback || h.Baseline.SuccessRate != 1 || h.ErrorRateMultiplier != 1 {
				t.Fatalf("empty health: %+v, %v", h, err)
			}
			if !h.WindowEnd.Equal(r1.PromotedAt.Add(24*time.Hour)) || h.WindowComplete {
				t.Fatalf("window %v..%v complete=%v", h.WindowStart, h.WindowEnd, h.WindowComplete)
			}
			now = now.Add(time.Minute)
			c2 := newCandidate(t, st, svc, "alice", "flow")
			passing(t, svc, "alice", c2.ID)
			r2, err := svc.Promote(ctx, "alice", c2.ID, skillrel.PromoteParams{})
			if err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				name     string
				samples  []bool // outcome of each tagged execution of v2
				healthy  bool
				rollback bool
				reasons  []string
				success  float64
			}{
				// Baseline from v1's evaluation report (v1 has no samples): success 0.9, error 0.1.
				{"no samples", nil, false, false, []string{}, 0},
				{"all good", []bool{true, true, true, true}, true, false, []string{}, 1},
				{"a drop", []bool{true, true, false, false}, false, true, []string{skillrel.ReasonSuccessRateDrop, skillrel.ReasonErrorRateRegression}, 0.5},
			}
			for i, c := range cases {
				for j, ok := range c.samples {
					addExecution(t, st, "alice", fmt.Sprintf("replay,release:%s,stage:canary", r2.ID), ok, int64(100*(j+1)), now.Add(time.Duration(i*10+j+1)*time.Second))
				}
				now = now.Add(time.Duration(i*10+10) * time.Second)
				h, err := svc.Health(ctx, "alice", r2.ID)
				if err != nil {
					t.Fatal(err)
				}
				if c.name == "a drop" {
					// Both runs' samples count: 4 good + 2 good + 2 failed.
					c.success = 6.0 / 8
				}
				if h.Healthy != c.healthy || h.ShouldRollback != c.rollback || !slices.Equal(h.Reasons, c.reasons) || h.Observed.SuccessRate != c.success {
					t.Errorf("%s: %+v", c.name, h)
				}
				if h.Baseline.SuccessRate != 0.9 || h.Baseline.Samples != 40 || h.Baseline.P95Duration != 1200 {
					t.Errorf("%s: baseline %+v", c.name, h.Baseline)
				}
			}
			h, _ = svc.Health(ctx, "alice", r2.ID)
			if h.Observed.Samples != 8 || h.Observed.P95Duration != 400 {
				t.Fatalf("observed %+v", h.Observed)
			}
			// Executions of another owner with the same tag do not count; neither after the window.
			addExecution(t, st, "bob", "release:"+r2.ID, false, 1, now)
			now = r2.PromotedAt.Add(30 * time.Hour)
			addExecution(t, st, "alice", "release:"+r2.ID, false, 1, r2.PromotedAt.Add(25*time.Hour))
			h, _ = svc.Health(ctx, "alice", r2.ID)
			if h.Observed.Samples != 8 || !h.WindowComplete {
				t.Fatalf("after the window: %+v", h)
			}
			// v3's baseline is v2 measured over [v2, v3].
			c3 := newCandidate(t, st, svc, "alice", "flow")
			passing(t, svc, "alice", c3.ID)
			r3, err := svc.Promote(ctx, "alice", c3.ID, skillrel.PromoteParams{})
			if err != nil {
				t.Fatal(err)
			}
			addExecution(t, st, "alice", "release:"+r3.ID, true, 50, now)
			h, _ = svc.Health(ctx, "alice", r3.ID)
			if h.Baseline.Samples != 9 || !h.Healthy || h.Observed.Samples != 1 {
				t.Fatalf("v3 health: baseline %+v observed %+v healthy %v", h.Baseline, h.Observed, h.Healthy)
			}
		})
	}
}
