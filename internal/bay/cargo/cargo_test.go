package cargo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
)

var code = sandboxtest.Code

// An external cargo gets its labelled volume at once; a failed insert removes it again, and
// another owner never sees it.
func TestCreateMakesTheVolumeAndUndoesIt(t *testing.T) {
	e := sandboxtest.New(t, sandboxtest.Options{})
	cargos := e.Svc.Cargos()
	ctx := context.Background()
	size := int64(64)
	c, err := cargos.Create(ctx, "alice", &size, nil)
	if err != nil || c.SizeLimitMB != 64 || c.Managed || c.DriverRef == "" {
		t.Fatalf("create: %+v %v", c, err)
	}
	vols := e.Drv.Volumes()
	if len(vols) != 1 || vols[0].Labels[bay.LabelOwner] != "alice" || vols[0].Labels[bay.LabelManaged] != "false" {
		t.Fatalf("volumes %+v", vols)
	}
	if d, _ := cargos.Create(ctx, "alice", nil, nil); d.SizeLimitMB != cargos.DefaultSizeMB() {
		t.Fatalf("default size %d", d.SizeLimitMB)
	}
	if _, err := cargos.Get(ctx, "bob", c.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("bob: %v", err)
	}
	if err := cargos.Delete(ctx, "bob", c.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("bob deletes: %v", err)
	}

	boom := errors.New("boom")
	if _, err := cargos.Create(ctx, "alice", nil, func(context.Context, bay.Tx, *bay.Cargo) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("hook failure: %v", err)
	}
	if n := len(e.Drv.Volumes()); n != 2 {
		t.Fatalf("%d volumes after a failed create, want the 2 of the cargos that exist", n)
	}
}

// Pages are full until the last, which has no cursor; managed and external cargos are listed
// apart.
func TestListPagesAndSeparatesManagedCargos(t *testing.T) {
	e := sandboxtest.New(t, sandboxtest.Options{})
	cargos := e.Svc.Cargos()
	ctx := context.Background()
	var ids []string
	for range 3 {
		c, err := cargos.Create(ctx, "alice", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	slices.Sort(ids) // the list is in id order
	sb := e.Create(t, "alice", sandbox.CreateParams{})
	first, err := cargos.List(ctx, "alice", false, 2, "")
	if err != nil || len(first.Items) != 2 || first.NextCursor != first.Items[1].ID {
		t.Fatalf("first page: %+v %v", first, err)
	}
	rest, err := cargos.List(ctx, "alice", false, 2, first.NextCursor)
	if err != nil || len(rest.Items) != 1 || rest.NextCursor != "" {
		t.Fatalf("last page: %+v %v", rest, err)
	}
	got := fmt.Sprint(first.Items[0].ID, first.Items[1].ID, rest.Items[0].ID)
	if want := fmt.Sprint(ids[0], ids[1], ids[2]); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
	managed, err := cargos.List(ctx, "alice", true, 0, "")
	if err != nil || len(managed.Items) != 1 || managed.Items[0].ID != sb.CargoID || managed.Items[0].ManagedBySandboxID != sb.ID {
		t.Fatalf("managed: %+v %v", managed, err)
	}
	if none, err := cargos.List(ctx, "bob", false, 0, ""); err != nil || len(none.Items) != 0 {
		t.Fatalf("bob: %+v %v", none, err)
	}
}

// A volume the engine still holds makes the delete a conflict and keeps the row.
func TestDeleteOfAVolumeInUseIsAConflict(t *testing.T) {
	e := sandboxtest.New(t, sandboxtest.Options{})
	cargos := e.Svc.Cargos()
	ctx := context.Background()
	c, err := cargos.Create(ctx, "alice", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Drv.Fail(fake.MethodDeleteVolume, fmt.Errorf("volume in use: %w", bay.ErrConflict), 1)
	if err := cargos.Delete(ctx, "alice", c.ID); code(err) != bay.CodeConflict {
		t.Fatalf("delete in use: %v", err)
	}
	if _, err := cargos.Get(ctx, "alice", c.ID); err != nil {
		t.Fatalf("row gone after a refused delete: %v", err)
	}
	if err := cargos.Delete(ctx, "alice", c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cargos.Get(ctx, "alice", c.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("after delete: %v", err)
	}
}
