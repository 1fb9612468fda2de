package migration

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadAndVerify(t *testing.T) {
	ms, err := Load(fstest.MapFS{
		"migrations/0002_b.sql": {Data: []byte("B")},
		"migrations/0001_a.sql": {Data: []byte("A")},
		"migrations/README":     {Data: []byte("not a migration")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "0001_a.sql" || ms[1].Version != 2 || ms[1].SQL != "B" || len(ms[0].Checksum) != 64 {
		t.Fatalf("loaded %+v", ms)
	}
	if err := Verify(ms, map[int]string{1: ms[0].Checksum}); err != nil {
		t.Fatalf("a prefix of the history: %v", err)
	}
	if err := Verify(ms, map[int]string{1: "edited"}); err == nil || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("edited: %v", err)
	}
	if err := Verify(ms, map[int]string{3: "x"}); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("unknown: %v", err)
	}
	for _, bad := range []fstest.MapFS{
		{"migrations/a.sql": {}},
		{"migrations/0000_zero.sql": {}},
		{"migrations/0001_a.sql": {}, "migrations/1_b.sql": {}},
	} {
		if _, err := Load(bad); err == nil {
			t.Fatalf("Load accepted %v", bad)
		}
	}
}
