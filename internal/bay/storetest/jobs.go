package storetest

import (
	"fmt"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func fmtJob(j *bay.Job) string {
	code := "nil"
	if j.ExitCode != nil {
		code = fmt.Sprint(*j.ExitCode)
	}
	return fmt.Sprintf("artifacts=%+v note=%q %s owner=%s sb=%s sess=%s kind=%s cmd=%q cwd=%v timeout=%d desc=%v tags=%v status=%s code=%s reason=%q out=%d/%v err=%d/%v created=%s started=%s ended=%s",
		j.Artifacts, j.ArtifactsNote, j.ID, j.Owner, j.SandboxID, j.SessionID, j.Kind, j.Command, str(j.Cwd), j.TimeoutSeconds, str(j.Description), str(j.Tags),
		j.Status, code, j.Reason, j.StdoutBytes, j.StdoutTruncated, j.StderrBytes, j.StderrTruncated,
		j.CreatedAt.UTC().Format("15:04:05.000000"), fmtTime(j.StartedAt), fmtTime(j.EndedAt))
}

func testJobs(t *testing.T, s bay.Store) {
	full := &bay.Job{ID: "job-1", Owner: "alice", SandboxID: "sb-1", SessionID: "sess-1", Kind: "python",
		Command: "print('héllo')\n", Cwd: ptr("sub/dir"), TimeoutSeconds: 86400, Description: ptr("d"), Tags: ptr("a,b"),
		Status: bay.JobStarting, CreatedAt: at(1)}
	mustTx(t, s, func(tx bay.Tx) error { return tx.InsertJob(t.Context(), full) })
	got, err := s.GetJob(t.Context(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "inserted job", fmtJob(got), fmtJob(full))
	wantCode(t, s.Tx(t.Context(), func(tx bay.Tx) error { return tx.InsertJob(t.Context(), full) }), bay.ErrConflict)

	// Every field is written by an update, a final one included.
	full.Status, full.ExitCode, full.Reason = bay.JobCancelled, ptr(-15), "cancelled on request"
	full.StdoutBytes, full.StderrBytes, full.StdoutTruncated, full.StderrTruncated = 1<<40, 7, true, false
	full.StartedAt, full.EndedAt, full.SessionID = ptr(at(2)), ptr(at(3)), "sess-2"
	full.Artifacts = []bay.Artifact{{Path: "out/r.csv", Size: 10, SHA256: "ab", Change: "created"}, {Path: "ü.txt", Change: "modified"}}
	full.ArtifactsNote = "note"
	mustTx(t, s, func(tx bay.Tx) error { return tx.UpdateJob(t.Context(), full) })
	got, _ = s.GetJob(t.Context(), "job-1")
	equal(t, "updated job", fmtJob(got), fmtJob(full))
	wantCode(t, s.Tx(t.Context(), func(tx bay.Tx) error { return tx.UpdateJob(t.Context(), &bay.Job{ID: "nope", CreatedAt: at(1)}) }), bay.ErrNotFound)
	_, err = s.GetJob(t.Context(), "nope")
	wantCode(t, err, bay.ErrNotFound)

	// Lists: newest first, filtered by owner, sandbox and statuses, paged with a total.
	for i, st := range []string{bay.JobRunning, bay.JobSucceeded, bay.JobRunning, bay.JobLost} {
		j := &bay.Job{ID: fmt.Sprintf("job-%d", i+2), Owner: "alice", SandboxID: "sb-2", Kind: "shell", Command: "true",
			Status: st, CreatedAt: at(10 + i)}
		mustTx(t, s, func(tx bay.Tx) error { return tx.InsertJob(t.Context(), j) })
	}
	mustTx(t, s, func(tx bay.Tx) error {
		return tx.InsertJob(t.Context(), &bay.Job{ID: "job-bob", Owner: "bob", SandboxID: "sb-2", Kind: "shell", Command: "x", Status: bay.JobRunning, CreatedAt: at(20)})
	})
	ids := func(js []*bay.Job) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for name, c := range map[string]struct {
		q     bay.JobQuery
		want  []string
		total int
	}{
		"sandbox":          {bay.JobQuery{Owner: "alice", SandboxID: "sb-2"}, []string{"job-5", "job-4", "job-3", "job-2"}, 4},
		"running":          {bay.JobQuery{Owner: "alice", Statuses: []string{bay.JobRunning}}, []string{"job-4", "job-2"}, 2},
		"two statuses":     {bay.JobQuery{SandboxID: "sb-2", Statuses: []string{bay.JobRunning, bay.JobLost}}, []string{"job-bob", "job-5", "job-4", "job-2"}, 4},
		"page":             {bay.JobQuery{Owner: "alice", SandboxID: "sb-2", Limit: 2, Offset: 1}, []string{"job-4", "job-3"}, 4},
		"other owner":      {bay.JobQuery{Owner: "bob"}, []string{"job-bob"}, 1},
		"nothing matching": {bay.JobQuery{Owner: "carol"}, nil, 0},
	} {
		js, total, err := s.ListJobs(t.Context(), c.q)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs(t, name, ids(js), c.want)
		if total != c.total {
			t.Errorf("%s: total %d, want %d", name, total, c.total)
		}
	}
}
