package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// instanceTests are the cases of the deployment id, the bay instances' heartbeats and the
// skill versions' archives.
var instanceTests = []struct {
	name string
	fn   func(t *testing.T, s bay.Store)
}{
	{"DeploymentID", testDeploymentID},
	{"BayInstanceHeartbeats", testBayInstanceHeartbeats},
	{"SkillArchives", testSkillArchives},
}

func testDeploymentID(t *testing.T, s bay.Store) {
	id, err := s.DeploymentID(t.Context())
	if err != nil || len(id) != 32 {
		t.Fatalf("deployment id %q: %v", id, err)
	}
	if again, err := s.DeploymentID(t.Context()); err != nil || again != id {
		t.Fatalf("deployment id changed: %q then %q (%v)", id, again, err)
	}
}

// The heartbeat rows: created on the first beat, moved forward (never back) by later ones,
// deleted only when older than the bound given.
func testBayInstanceHeartbeats(t *testing.T, s bay.Store) {
	ctx := t.Context()
	beat := func(id, boot string, at time.Time) {
		t.Helper()
		mustTx(t, s, func(tx bay.Tx) error { return tx.HeartbeatBayInstance(ctx, id, boot, at) })
	}
	beat("b", "b/1", at(0))
	beat("a", "a/1", at(0))
	beat("a", "a/2", at(60))
	beat("a", "a/2", at(1)) // a late write of an earlier beat
	rows, err := s.ListBayInstances(ctx)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v %v", rows, err)
	}
	if a := rows[0]; a.ID != "a" || a.BootID != "a/2" || !a.StartedAt.Equal(at(0)) || !a.HeartbeatAt.Equal(at(60)) {
		t.Fatalf("row a: %+v", a)
	}
	del := func(id string, before time.Time) bool {
		t.Helper()
		var deleted bool
		mustTx(t, s, func(tx bay.Tx) (err error) { deleted, err = tx.DeleteBayInstance(ctx, id, before); return err })
		return deleted
	}
	if del("a", at(60)) {
		t.Fatal("a row as recent as the bound was deleted")
	}
	if !del("a", at(61)) || del("a", at(61)) {
		t.Fatal("an older row is deleted once")
	}
	if rows, _ := s.ListBayInstances(ctx); len(rows) != 1 || rows[0].ID != "b" {
		t.Fatalf("after delete: %v", rows)
	}
}

// Archives are content-addressed: the first write of a version stays; a read bounded below the
// size returns the description without the bytes.
func testSkillArchives(t *testing.T, s bay.Store) {
	ctx := t.Context()
	if _, err := s.GetSkillArchive(ctx, "v1", 1<<20); !bay.IsNotFound(err) {
		t.Fatalf("missing archive: %v", err)
	}
	data := bytes.Repeat([]byte{0, 0xff, 'x'}, 1000) // arbitrary bytes, NUL included
	a := &bay.SkillArchive{Version: "v1", SHA256: "h1", Size: int64(len(data)), Data: data, CreatedAt: at(5)}
	mustTx(t, s, func(tx bay.Tx) error { return tx.PutSkillArchive(ctx, a) })
	other := &bay.SkillArchive{Version: "v1", SHA256: "h2", Size: 3, Data: []byte("abc"), CreatedAt: at(6)}
	mustTx(t, s, func(tx bay.Tx) error { return tx.PutSkillArchive(ctx, other) })
	got, err := s.GetSkillArchive(ctx, "v1", int64(len(data)))
	if err != nil || got.Version != "v1" || got.SHA256 != "h1" || got.Size != int64(len(data)) || !bytes.Equal(got.Data, data) || !got.CreatedAt.Equal(at(5)) {
		t.Fatalf("archive: %+v %v", got, err)
	}
	got, err = s.GetSkillArchive(ctx, "v1", int64(len(data))-1)
	if err != nil || got.Data != nil || got.Size != int64(len(data)) || got.SHA256 != "h1" {
		t.Fatalf("bounded read: size %d, %d bytes, %v", got.Size, len(got.Data), err)
	}
	err = s.Tx(ctx, func(tx bay.Tx) error {
		return tx.PutSkillArchive(ctx, &bay.SkillArchive{Version: "v2", SHA256: "h", Size: 10, Data: []byte("short"), CreatedAt: at(7)})
	})
	if err == nil {
		t.Fatal("an archive whose size disagrees with its bytes was stored")
	}
	if _, err := s.GetSkillArchive(ctx, "v2", 1<<20); !bay.IsNotFound(err) {
		t.Fatalf("refused archive: %v", err)
	}
}
