package capability_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/history"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
)

var code = sandboxtest.Code

func TestFilesystemAndHistory(t *testing.T) {
	e := sandboxtest.New(t, sandboxtest.Options{})
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	if err := e.Caps.WriteFile(ctx, "alice", r.ID, "a.txt", "hi"); err != nil {
		t.Fatal(err)
	}
	if c, err := e.Caps.ReadFile(ctx, "alice", r.ID, "a.txt"); err != nil || c != "hi" {
		t.Fatalf("read: %q %v", c, err)
	}
	for _, f := range []func() error{
		func() error { _, err := e.Caps.ReadFile(ctx, "alice", r.ID, "missing"); return err },
		func() error { return e.Caps.DeleteFile(ctx, "alice", r.ID, "missing") },
		func() error { _, _, err := e.Caps.Download(ctx, "alice", r.ID, "missing"); return err },
	} {
		if err := f(); code(err) != bay.CodeFileNotFound {
			t.Fatalf("missing file: %v", err)
		}
	}
	if err := e.Caps.DeleteFile(ctx, "alice", r.ID, "."); code(err) != bay.CodeInvalidPath {
		t.Fatalf("delete root: %v", err)
	}
	tags := " b, a ,a"
	desc := "d"
	py, err := e.Caps.ExecPython(ctx, "alice", r.ID, capability.PythonParams{Code: "print(1)", Timeout: 30, Tags: &tags, Description: &desc, IncludeCode: true})
	if err != nil || py.ExecutionID == "" || py.Code == nil {
		t.Fatalf("python: %+v %v", py, err)
	}
	e.Clock.Advance(time.Second)
	sh, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30})
	if err != nil || sh.Output != "ls" || sh.Error == nil || *sh.Error != "warn" || !sh.Success {
		t.Fatalf("shell: %+v %v", sh, err)
	}
	h, err := e.Hist.List(ctx, "alice", r.ID, history.Params{Limit: 10})
	if err != nil || h.Total != 2 || h.Entries[0].ID != sh.ExecutionID {
		t.Fatalf("history: %+v %v", h, err)
	}
	got, err := e.Hist.Get(ctx, "alice", r.ID, py.ExecutionID)
	if err != nil || got.Tags == nil || *got.Tags != "a,b" {
		t.Fatalf("entry: %+v %v", got, err)
	}
	if _, err := e.Hist.Get(ctx, "bob", r.ID, py.ExecutionID); code(err) != bay.CodeNotFound {
		t.Fatalf("bob: %v", err)
	}
	notes := "works"
	empty := ""
	a, err := e.Hist.Annotate(ctx, "alice", r.ID, py.ExecutionID, nil, &empty, &notes)
	if err != nil || a.Tags != nil || a.Notes == nil || *a.Notes != "works" || a.Description == nil {
		t.Fatalf("annotate: %+v %v", a, err)
	}
	last, err := e.Hist.Last(ctx, "alice", r.ID, "python")
	if err != nil || last.ID != py.ExecutionID {
		t.Fatalf("last: %v %v", last, err)
	}
	// A capability the profile lacks.
	so := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "shell-only"})
	if _, err := e.Caps.ExecPython(ctx, "alice", so.ID, capability.PythonParams{Code: "1", Timeout: 1}); code(err) != bay.CodeCapabilityNotSupported {
		t.Fatalf("capability: %v", err)
	}
}
