package storetest

import (
	"fmt"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// skillTests are the cases of the skill library's rows.
var skillTests = []struct {
	name string
	fn   func(t *testing.T, s bay.Store)
}{
	{"SkillVersions", testSkillVersions},
	{"SkillNamesFoldCase", testSkillNamesFoldCase},
	{"SandboxSkills", testSandboxSkills},
}

func skillVersion(name, version string, sec int) *bay.Skill {
	s := &bay.Skill{Name: name, Version: version, Description: "d " + version, Kind: bay.SkillKnowledge,
		Files: []bay.SkillFile{{Path: "SKILL.md", Size: 10, SHA256: "ab"}, {Path: "scripts/a.sh", Size: 3, SHA256: "cd", Executable: true},
			{Path: "l", Link: "SKILL.md"}},
		SizeBytes: 13, UploadedBy: "admin", CreatedAt: at(sec)}
	if version == "v-inv" {
		s.Kind, s.Manifest = bay.SkillInvocable, []byte(`{"id":"x.y","\u0000":"\xff"}`)
	}
	return s
}

func fmtSkill(s *bay.Skill) string {
	return fmt.Sprintf("%s@%s %q %s %q files=%+v size=%d by=%s at=%s", s.Name, s.Version, s.Description, s.Kind, s.Manifest,
		s.Files, s.SizeBytes, s.UploadedBy, s.CreatedAt.Format("2006-01-02T15:04:05.000000Z07:00"))
}

func putSkill(t *testing.T, s bay.Store, sk *bay.Skill) bool {
	t.Helper()
	var created bool
	mustTx(t, s, func(tx bay.Tx) (err error) {
		created, err = tx.PutSkill(t.Context(), sk, at(100))
		return err
	})
	return created
}

func testSkillVersions(t *testing.T, s bay.Store) {
	ctx := t.Context()
	if _, err := s.GetSkill(ctx, "pdf"); !bay.IsNotFound(err) {
		t.Fatalf("missing skill: %v", err)
	}
	v1, v2 := skillVersion("pdf", "v1", 1), skillVersion("pdf", "v-inv", 2)
	if !putSkill(t, s, v1) || putSkill(t, s, v1) {
		t.Fatal("first put creates, the same version again does not")
	}
	got, err := s.GetSkill(ctx, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "current v1", fmtSkill(got), fmtSkill(v1))
	if !putSkill(t, s, v2) {
		t.Fatal("a new version is created")
	}
	got, _ = s.GetSkill(ctx, "pdf")
	equal(t, "current v2", fmtSkill(got), fmtSkill(v2))
	old, err := s.GetSkillVersion(ctx, "pdf", "v1")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "old version kept", fmtSkill(old), fmtSkill(v1))
	putSkill(t, s, skillVersion("csv", "c1", 3))
	list, err := s.ListSkills(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "csv" || list[1].Version != "v-inv" {
		t.Fatalf("list %v %v", list, err)
	}
	// Back to v1: a stored version becomes current again.
	if !putSkill(t, s, v1) {
		t.Fatal("switching back is a change")
	}
	mustTx(t, s, func(tx bay.Tx) error { return tx.DeleteSkill(ctx, "pdf") })
	if _, err := s.GetSkill(ctx, "pdf"); !bay.IsNotFound(err) {
		t.Fatalf("deleted skill: %v", err)
	}
	if _, err := s.GetSkillVersion(ctx, "pdf", "v-inv"); err != nil {
		t.Fatalf("versions outlive the name: %v", err)
	}
	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.DeleteSkill(ctx, "pdf") })
	wantCode(t, err, bay.ErrNotFound)
	if _, err := s.GetSkillVersion(ctx, "pdf", "nope"); !bay.IsNotFound(err) {
		t.Fatalf("missing version: %v", err)
	}
	if !putSkill(t, s, v2) {
		t.Fatal("re-upload after delete")
	}
}

func testSkillNamesFoldCase(t *testing.T, s bay.Store) {
	putSkill(t, s, skillVersion("Pdf", "v1", 1))
	err := s.Tx(t.Context(), func(tx bay.Tx) error {
		_, err := tx.PutSkill(t.Context(), skillVersion("pdf", "v2", 2), at(3))
		return err
	})
	wantCode(t, err, bay.ErrConflict)
	if _, err := s.GetSkill(t.Context(), "pdf"); !bay.IsNotFound(err) {
		t.Fatalf("lookups are exact: %v", err)
	}
}

func testSandboxSkills(t *testing.T, s bay.Store) {
	ctx := t.Context()
	if got, err := s.ListSandboxSkills(ctx, "sb1"); err != nil || len(got) != 0 {
		t.Fatalf("none: %v %v", got, err)
	}
	mustTx(t, s, func(tx bay.Tx) error { return tx.SetSandboxSkills(ctx, "sb1", []string{"b", "a", "shell.run"}) })
	mustTx(t, s, func(tx bay.Tx) error { return tx.SetSandboxSkills(ctx, "sb2", []string{"z"}) })
	got, err := s.ListSandboxSkills(ctx, "sb1")
	if err != nil || fmt.Sprint(got) != "[b a shell.run]" {
		t.Fatalf("request order: %v %v", got, err)
	}
	mustTx(t, s, func(tx bay.Tx) error { return tx.SetSandboxSkills(ctx, "sb1", nil) })
	if got, _ := s.ListSandboxSkills(ctx, "sb1"); len(got) != 0 {
		t.Fatalf("cleared: %v", got)
	}
	if got, _ := s.ListSandboxSkills(ctx, "sb2"); fmt.Sprint(got) != "[z]" {
		t.Fatalf("other sandbox: %v", got)
	}
	err = s.Tx(ctx, func(tx bay.Tx) error { return tx.SetSandboxSkills(ctx, "sb1", make([]string, 65)) })
	if err == nil {
		t.Fatal("more than 64 skills accepted")
	}
}
