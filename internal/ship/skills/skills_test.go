package skills

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadAndInstall(t *testing.T) {
	src := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(src, "b-skill", SkillFile), "---\nname: Bee\ndescription: \"quoted: yes\"\n---\nbody\n")
	write(filepath.Join(src, "a-skill", SkillFile), "no front matter\n")
	write(filepath.Join(src, "a-skill", "lib", "x.py"), "x = 1\n")
	write(filepath.Join(src, "not-a-skill", "README"), "")
	list, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "a-skill" || list[1].Name != "Bee" || list[1].Description != "quoted: yes" {
		t.Fatalf("load %+v", list)
	}
	if l, err := Load(filepath.Join(src, "missing")); err != nil || l != nil {
		t.Fatalf("missing dir: %v %v", l, err)
	}

	ws := t.TempDir()
	write(filepath.Join(ws, "skills", "a-skill", "old.txt"), "stale")
	write(filepath.Join(ws, "skills", "mine", SkillFile), "user skill")
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := Install(root, src, list); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "skills", "a-skill", "old.txt")); !os.IsNotExist(err) {
		t.Fatal("stale file kept")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "skills", "a-skill", "lib", "x.py")); string(b) != "x = 1\n" {
		t.Fatalf("copied file %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "skills", "mine", SkillFile)); string(b) != "user skill" {
		t.Fatal("user skill touched")
	}
	ents, _ := os.ReadDir(filepath.Join(ws, "skills"))
	if len(ents) != 3 {
		t.Fatalf("leftover temp dirs: %v", ents)
	}
	if _, err := frontMatter([]byte("---\nname: x\n")); err == nil {
		t.Fatal("unterminated front matter accepted")
	}
}
