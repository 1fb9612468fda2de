package storetest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func fullExecRecord(id, owner, project, task string, status bay.ExecStatus, created int) *bay.ExecRecord {
	code := 3
	return &bay.ExecRecord{
		ID: id, Owner: owner, ProjectID: project, TaskID: task, ConversationID: "conv-1", SkillID: "shell.run",
		Image: "ship:base", Kind: "shell", Cmd: "bash", Args: []string{"-lc", "echo 'hé' \x01"}, Cwd: "/workspace/work",
		EnvKeys: []string{"A", "B"}, Policy: bay.DefaultExecPolicy(), Status: status, ExitCode: &code,
		ErrorReason: "exit code 3", ArtifactsPath: "projects/" + owner + "/" + project + "/artifacts/" + id,
		StdoutTruncated: true, Instance: bay.ExecInstancePrefix + id, BayInstance: "bay-1",
		CreatedAt: at(created), StartedAt: ptr(at(created + 1)), EndedAt: ptr(at(created + 2)), DurationMS: 1000,
	}
}

// testExecRecordRoundTrip: every field of a record comes back as written; an existing id
// conflicts; an update of a missing record and a get of one are not_found.
func testExecRecordRoundTrip(t *testing.T, s bay.Store) {
	ctx := t.Context()
	e := fullExecRecord("sbx-exec-1", "alice", "p1", "t1", bay.ExecRunning, 0)
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertExecRecord(ctx, e) })
	got, err := s.GetExecRecord(ctx, e.ID)
	if err != nil {
		t.Fatalf("GetExecRecord: %v", err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
	}
	wantCode(t, s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertExecRecord(ctx, e) }), bay.ErrConflict)

	e.Status, e.ExitCode, e.ErrorReason = bay.ExecSucceeded, ptr(0), ""
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateExecRecord(ctx, e) })
	if got, _ := s.GetExecRecord(ctx, e.ID); got.Status != bay.ExecSucceeded || *got.ExitCode != 0 || got.ErrorReason != "" {
		t.Fatalf("after update: %+v", got)
	}
	list, _, err := s.ListExecRecords(ctx, bay.ExecQuery{Statuses: []bay.ExecStatus{bay.ExecSucceeded}})
	if err != nil || len(list) != 1 {
		t.Fatalf("the status column follows the update: %v, %v", list, err)
	}
	missing := fullExecRecord("sbx-exec-missing", "alice", "p1", "", bay.ExecRunning, 0)
	wantCode(t, s.Tx(ctx, func(tx bay.Tx) error { return tx.UpdateExecRecord(ctx, missing) }), bay.ErrNotFound)
	_, err = s.GetExecRecord(ctx, missing.ID)
	wantCode(t, err, bay.ErrNotFound)
}

// testExecRecordListFilters: owner, project, task and statuses filter; newest first; the total
// counts every match whatever the page.
func testExecRecordListFilters(t *testing.T, s bay.Store) {
	ctx := t.Context()
	recs := []*bay.ExecRecord{
		fullExecRecord("e1", "alice", "p1", "t1", bay.ExecSucceeded, 1),
		fullExecRecord("e2", "alice", "p1", "t2", bay.ExecRunning, 2),
		fullExecRecord("e3", "alice", "p2", "t1", bay.ExecQueued, 3),
		fullExecRecord("e4", "bob", "p1", "t1", bay.ExecRunning, 4),
	}
	mustTx(t, s, func(tx bay.Tx) error {
		for _, r := range recs {
			if err := tx.InsertExecRecord(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	cases := []struct {
		name  string
		q     bay.ExecQuery
		want  []string
		total int
	}{
		{"all", bay.ExecQuery{}, []string{"e4", "e3", "e2", "e1"}, 4},
		{"owner", bay.ExecQuery{Owner: "alice"}, []string{"e3", "e2", "e1"}, 3},
		{"owner and project", bay.ExecQuery{Owner: "alice", ProjectID: "p1"}, []string{"e2", "e1"}, 2},
		{"task", bay.ExecQuery{TaskID: "t1"}, []string{"e4", "e3", "e1"}, 3},
		{"statuses", bay.ExecQuery{Statuses: []bay.ExecStatus{bay.ExecQueued, bay.ExecRunning}}, []string{"e4", "e3", "e2"}, 3},
		{"page", bay.ExecQuery{Owner: "alice", Limit: 1, Offset: 1}, []string{"e2"}, 3},
		{"past the end", bay.ExecQuery{Owner: "alice", Limit: 5, Offset: 10}, nil, 3},
	}
	for _, c := range cases {
		list, total, err := s.ListExecRecords(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var ids []string
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		if !reflect.DeepEqual(ids, c.want) || total != c.total {
			t.Errorf("%s: got %v (total %d), want %v (total %d)", c.name, ids, total, c.want, c.total)
		}
	}
}

// errClaimed: the record no longer names the bay instance a claimer adopts from.
var errClaimed = fmt.Errorf("exec adopted by another bay: %w", bay.ErrConflict)

// testParallelExecRecordClaims: many bays adopt one open exec of a gone bay instance at once,
// each by reading the record in a Tx and writing its own instance id only while the record
// still names the gone one (internal/bay/execs adopt.go): exactly one claims it, and the record
// carries the winner's id.
func testParallelExecRecordClaims(t *testing.T, stores []bay.Store) {
	ctx := t.Context()
	e := fullExecRecord("sbx-exec-claim", "alice", "p1", "", bay.ExecRunning, 0)
	e.BayInstance = "bay-gone"
	mustTx(t, stores[0], func(tx bay.Tx) error { return tx.InsertExecRecord(ctx, e) })
	holder := func(i int) string { return fmt.Sprint("bay-", i) }
	w := race(t, stores, 16, func(i int, tx bay.Tx) error {
		rec, err := tx.GetExecRecord(ctx, e.ID)
		if err != nil {
			return err
		}
		if rec.BayInstance != "bay-gone" {
			return errClaimed
		}
		rec.BayInstance = holder(i)
		return tx.UpdateExecRecord(ctx, rec)
	})
	for _, st := range stores {
		if got, err := st.GetExecRecord(ctx, e.ID); err != nil || got.BayInstance != holder(w) {
			t.Fatalf("claimed record names %v (%v), want the winner %s", got.BayInstance, err, holder(w))
		}
	}
}
