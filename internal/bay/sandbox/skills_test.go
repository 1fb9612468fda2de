package sandbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

// withLibrary gives the env's service a library holding the repository's skills.
func withLibrary(t *testing.T, e *env) *skills.Library {
	t.Helper()
	lib, err := skills.New(e.Store, skills.Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.LoadDir(context.Background(), bundledskills.Dir(), "seed"); err != nil {
		t.Fatal(err)
	}
	e.Svc.SetSkills(lib)
	return lib
}

// mountsOf returns "target<-source" of the sandbox's running container, sorted.
func mountsOf(t *testing.T, e *env, sandboxID string) []string {
	t.Helper()
	sess, err := e.Svc.EnsureRunning(context.Background(), sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := e.Drv.Container(sess.Primary().ContainerID)
	if !ok {
		t.Fatal("no container")
	}
	var out []string
	for _, m := range c.Spec.Mounts {
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Target)
		}
		out = append(out, m.Target+"<-"+m.Source)
	}
	sort.Strings(out)
	return out
}

func TestCreateWithSkills(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) { c.Profiles[0].Skills = []string{"csv-report"} })
	lib := withLibrary(t, e)
	ctx := context.Background()
	for _, bad := range [][]string{{"nope"}, {"shell.run", "shell.run"}, {"../x"}, make([]string, 33)} {
		if _, err := e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{Skills: bad}, nil); code(err) != bay.CodeValidation {
			t.Errorf("%q: %v", bad, err)
		}
	}
	sb := e.Create(t, "alice", sandbox.CreateParams{Skills: []string{"shell.run"}})
	csv, _ := lib.Get(ctx, "csv-report")
	sh, _ := lib.Get(ctx, "shell.run")
	got := mountsOf(t, e, sb.ID)
	if len(got) != 3 || got[1] != "/skills/csv-report<-"+lib.VersionDir(csv.Version) || got[2] != "/skills/shell.run<-"+lib.VersionDir(sh.Version) ||
		filepath.Ext(got[0]) != ".md" || got[0][:len("/skills/INDEX.md")] != "/skills/INDEX.md" {
		t.Fatalf("mounts %v", got)
	}
	// Without request skills, the profile's alone.
	plain := e.Create(t, "alice", sandbox.CreateParams{})
	if got := mountsOf(t, e, plain.ID); len(got) != 2 {
		t.Fatalf("profile mounts %v", got)
	}
}

// TestLegacyHostSkills: with skills.root_path the profile's names are host folders; request
// skills still come from the library.
func TestLegacyHostSkills(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, func(c *sandbox.Config) {
		c.SkillsRoot = root
		c.Profiles[0].Skills = []string{"pdf", "shell.run"}
	})
	lib := withLibrary(t, e)
	sb := e.Create(t, "alice", sandbox.CreateParams{Skills: []string{"shell.run", "python.run"}})
	py, _ := lib.Get(context.Background(), "python.run")
	got := mountsOf(t, e, sb.ID) // INDEX.md sorts first
	want := []string{"/skills/pdf<-" + root + "/pdf", "/skills/python.run<-" + lib.VersionDir(py.Version), "/skills/shell.run<-" + root + "/shell.run"}
	if len(got) != 4 || fmt.Sprint(got[1:]) != fmt.Sprint(want) {
		t.Fatalf("mounts %v, want INDEX.md and %v", got, want)
	}
}
