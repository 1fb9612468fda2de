package skills

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

func tree(folder string, files map[string]string) *Tree {
	t := &Tree{Folder: folder, Entries: map[string]*Entry{}}
	for p, body := range files {
		t.Entries[p] = &Entry{Path: p, Data: []byte(body)}
	}
	return t
}

func md(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# body\n"
}

// manifestJSON is shell.run's manifest with edit applied to its decoded form.
func manifestJSON(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	tr, problems := ReadDir(filepath.Join(bundledskills.Dir(), "shell.run"), Limits{})
	if tr == nil {
		t.Fatal(problems)
	}
	var m map[string]any
	if err := json.Unmarshal(tr.Entries[ManifestFile].Data, &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func sub(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

type finding struct{ file, field, msg string }

func TestValidate(t *testing.T) {
	long := strings.Repeat("é", MaxDescriptionLen+1)
	cases := []struct {
		name     string
		folder   string
		files    map[string]string
		errors   []finding // each must occur (substring of the message)
		warnings []finding
	}{
		{"ok knowledge", "demo", map[string]string{"SKILL.md": md("demo", "d")}, nil, nil},
		{"ok flat archive", "", map[string]string{"SKILL.md": md("demo_2-x", "d")}, nil, nil},
		{"missing SKILL.md", "demo", map[string]string{"README.md": "x"}, []finding{{"SKILL.md", "", "required"}}, nil},
		{"no front matter", "demo", map[string]string{"SKILL.md": "# demo\n"}, []finding{{"SKILL.md", "", "front matter"}}, nil},
		{"unclosed front matter", "demo", map[string]string{"SKILL.md": "---\nname: demo\n"}, []finding{{"SKILL.md", "", "closing"}}, nil},
		{"bad yaml", "demo", map[string]string{"SKILL.md": "---\nname: [\n---\n"}, []finding{{"SKILL.md", "", "YAML"}}, nil},
		{"missing name", "demo", map[string]string{"SKILL.md": "---\ndescription: d\n---\n"}, []finding{{"SKILL.md", "name", "required"}}, nil},
		{"name not string", "demo", map[string]string{"SKILL.md": "---\nname: [a]\ndescription: d\n---\n"}, []finding{{"SKILL.md", "name", "string"}}, nil},
		{"bad chars", "de mo", map[string]string{"SKILL.md": md("de mo", "d")}, []finding{{"SKILL.md", "name", "letters, digits"}}, nil},
		{"leading dash", "-rf", map[string]string{"SKILL.md": md("-rf", "d")}, []finding{{"SKILL.md", "name", "letters, digits"}}, nil},
		{"too long", "", map[string]string{"SKILL.md": md(strings.Repeat("a", 65), "d")}, []finding{{"SKILL.md", "name", "1-64"}}, nil},
		{"folder differs", "other", map[string]string{"SKILL.md": md("demo", "d")}, []finding{{"SKILL.md", "name", "folder name"}}, nil},
		{"reserved", "payloads", map[string]string{"SKILL.md": md("payloads", "d")}, []finding{{"SKILL.md", "name", "reserved"}}, nil},
		{"reserved case", "", map[string]string{"SKILL.md": md("Releases", "d")}, []finding{{"SKILL.md", "name", "reserved"}}, nil},
		{"dotted knowledge", "a.b", map[string]string{"SKILL.md": md("a.b", "d")}, []finding{{"SKILL.md", "name", "manifest ids"}}, nil},
		{"no description", "demo", map[string]string{"SKILL.md": "---\nname: demo\n---\n"}, nil, []finding{{"SKILL.md", "description", "recommended"}}},
		{"description too long", "demo", map[string]string{"SKILL.md": md("demo", long)}, []finding{{"SKILL.md", "description", "more than 1024"}}, nil},
		{"risky scripts", "demo", map[string]string{"SKILL.md": md("demo", "d"), "scripts/a.sh": "ok\nsudo rm -rf /\n", "scripts/b.py": "eval(x)\nexec(y)"},
			nil, []finding{{"scripts/a.sh", "line 2", `"sudo"`}, {"scripts/a.sh", "line 2", `"rm -rf"`}, {"scripts/b.py", "line 1", "eval("}, {"scripts/b.py", "line 2", "exec("}}},
		{"risky outside scripts ignored", "demo", map[string]string{"SKILL.md": md("demo", "d"), "references/a.md": "sudo"}, nil, nil},

		{"ok invocable", "shell.run", map[string]string{"SKILL.md": md("shell.run", "d"), "manifest.json": manifestJSON(t, nil)}, nil, nil},
		{"invocable bad name", "Shell_run", map[string]string{"SKILL.md": md("Shell_run", "d"), "manifest.json": manifestJSON(t, nil)},
			[]finding{{"SKILL.md", "name", "manifest id"}, {"manifest.json", "/id", "differs"}}, nil},
		{"manifest id differs", "shell.run", map[string]string{"SKILL.md": md("shell.run", "d"), "manifest.json": manifestJSON(t, func(m map[string]any) { m["id"] = "shell.exec" })},
			[]finding{{"manifest.json", "/id", "differs"}}, nil},
		{"manifest not json", "shell.run", map[string]string{"SKILL.md": md("shell.run", "d"), "manifest.json": "{"}, []finding{{"manifest.json", "", "JSON"}}, nil},
		{"manifest escalations", "shell.run", map[string]string{"SKILL.md": md("shell.run", "d"), "manifest.json": manifestJSON(t, func(m map[string]any) {
			sub(m, "permissions", "net")["mode"] = "bridge"
			sub(m, "permissions", "fs")["write"] = []any{"/etc/**", "work/../../x", "artifacts/**"}
			sub(m, "runtime")["kind"] = "k8s"
			sub(m, "limits")["pids"] = 0
			m["extra"] = true
			delete(m, "schema_version")
		})}, []finding{
			{"manifest.json", "/permissions/net/mode", "none"},
			{"manifest.json", "/permissions/fs/write/0", "pattern"},
			{"manifest.json", "/permissions/fs/write/1", "pattern"},
			{"manifest.json", "/runtime/kind", "docker"},
			{"manifest.json", "/limits/pids", "8"},
			{"manifest.json", "/", "extra"},
			{"manifest.json", "/", "schema_version"},
		}, nil},
		{"manifest bad id", "a", map[string]string{"SKILL.md": md("a", "d"), "manifest.json": manifestJSON(t, func(m map[string]any) { m["id"] = "a" })},
			[]finding{{"manifest.json", "/id", "pattern"}, {"SKILL.md", "name", "manifest id"}}, nil},
		{"inputs not a schema", "shell.run", map[string]string{"SKILL.md": md("shell.run", "d"), "manifest.json": manifestJSON(t, func(m map[string]any) {
			sub(m, "interface", "inputs")["properties"] = map[string]any{"x": map[string]any{"type": 7}}
		})}, []finding{{"manifest.json", "/interface/inputs", "JSON Schema"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Validate(tree(c.folder, c.files))
			check := func(kind string, got []finding, want []finding) {
				for _, w := range want {
					found := false
					for _, g := range got {
						found = found || (g.file == w.file && g.field == w.field && strings.Contains(g.msg, w.msg))
					}
					if !found {
						t.Errorf("%s %+v missing in %+v", kind, w, got)
					}
				}
				if len(want) == 0 && len(got) > 0 {
					t.Errorf("unexpected %s %+v", kind, got)
				}
			}
			var errs, warns []finding
			for _, p := range res.Errors {
				errs = append(errs, finding{p.File, p.Field, p.Message})
			}
			for _, p := range res.Warnings {
				warns = append(warns, finding{p.File, p.Field, p.Message})
			}
			check("error", errs, c.errors)
			check("warning", warns, c.warnings)
		})
	}
}

// TestBundledSkillsValid: the repository's skills pass, with their kinds.
func TestBundledSkillsValid(t *testing.T) {
	for _, name := range bundledskills.Names {
		tr, problems := ReadDir(filepath.Join(bundledskills.Dir(), name), Limits{})
		if tr == nil {
			t.Fatalf("%s: %+v", name, problems)
		}
		res := Validate(tr)
		if len(res.Errors) > 0 || len(res.Warnings) > 0 || res.Name != name {
			t.Errorf("%s: %+v", name, res)
		}
		want := bay.SkillKnowledge
		if strings.Contains(name, ".") {
			want = bay.SkillInvocable
		}
		if res.Kind != want {
			t.Errorf("%s kind %s", name, res.Kind)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"pdf": true, "skill-pdf": true, "a_b": true, "shell.run": true, "Shell.run": false,
		"a..b": false, ".a": false, "payloads": false, "INDEX.md": false, "": false, "../x": false, "a/b": false} {
		if ValidName(name) != want {
			t.Errorf("ValidName(%q) = %v", name, !want)
		}
	}
}
