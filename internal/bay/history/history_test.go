package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/history"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
)

var code = sandboxtest.Code

// History is the owner's, per sandbox, newest first, filtered as asked; annotations normalise
// tags and leave absent fields alone.
func TestListFiltersAndAnnotate(t *testing.T) {
	e := sandboxtest.New(t, sandboxtest.Options{})
	ctx := context.Background()
	h := history.New(e.Store)
	sb := e.Create(t, "alice", sandbox.CreateParams{})
	other := e.Create(t, "alice", sandbox.CreateParams{})
	if _, err := h.Last(ctx, "alice", sb.ID, ""); code(err) != bay.CodeNotFound {
		t.Fatalf("last of none: %v", err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tags := "a,b"
	rows := []*bay.Execution{
		{ExecType: bay.ExecPython, Success: true, Tags: &tags},
		{ExecType: bay.ExecShell, Success: false},
		{ExecType: bay.ExecPython, Success: false},
	}
	for i, x := range rows {
		x.ID, x.Owner, x.SandboxID, x.Code, x.CreatedAt = bay.NewID(bay.PrefixExecution), "alice", sb.ID, "c", at.Add(time.Duration(i)*time.Second)
	}
	stray := &bay.Execution{ID: bay.NewID(bay.PrefixExecution), Owner: "alice", SandboxID: other.ID, ExecType: bay.ExecPython, CreatedAt: at}
	err := e.Store.Tx(ctx, func(tx bay.Tx) error {
		for _, x := range append(rows, stray) {
			if err := tx.InsertExecution(ctx, x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := h.List(ctx, "alice", sb.ID, history.Params{Limit: 10})
	if err != nil || all.Total != 3 || all.Entries[0].ID != rows[2].ID {
		t.Fatalf("all: %+v %v", all, err)
	}
	py, err := h.List(ctx, "alice", sb.ID, history.Params{ExecType: bay.ExecPython, SuccessOnly: true, Limit: 10})
	if err != nil || py.Total != 1 || py.Entries[0].ID != rows[0].ID {
		t.Fatalf("successful python: %+v %v", py, err)
	}
	q := " b ,b"
	tagged, err := h.List(ctx, "alice", sb.ID, history.Params{Tags: &q, Limit: 10})
	if err != nil || tagged.Total != 1 || tagged.Entries[0].ID != rows[0].ID {
		t.Fatalf("tagged: %+v %v", tagged, err)
	}
	if last, err := h.Last(ctx, "alice", sb.ID, bay.ExecShell); err != nil || last.ID != rows[1].ID {
		t.Fatalf("last shell: %+v %v", last, err)
	}
	if _, err := h.List(ctx, "bob", sb.ID, history.Params{Limit: 10}); code(err) != bay.CodeNotFound {
		t.Fatalf("bob lists: %v", err)
	}
	if _, err := h.Get(ctx, "alice", sb.ID, stray.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("another sandbox's entry: %v", err)
	}
	notes, messy := "n", " z, y ,z"
	a, err := h.Annotate(ctx, "alice", sb.ID, rows[1].ID, nil, &messy, &notes)
	if err != nil || a.Tags == nil || *a.Tags != "y,z" || a.Notes == nil || *a.Notes != "n" || a.Description != nil {
		t.Fatalf("annotate: %+v %v", a, err)
	}
	withNotes := true
	if n, err := h.List(ctx, "alice", sb.ID, history.Params{HasNotes: &withNotes, Limit: 10}); err != nil || n.Total != 1 {
		t.Fatalf("has notes: %+v %v", n, err)
	}
}
