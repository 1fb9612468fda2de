package execs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

// tightManifest is an invocable skill whose manifest lowers the policy and names its image.
const tightManifest = `{"schema_version": 1, "id": "tight.one", "name": "Tight", "description": "A tight skill.",
  "interface": {
    "inputs": {"type": "object", "additionalProperties": false, "required": ["n"],
      "properties": {"n": {"type": "integer", "minimum": 1}, "tag": {"type": "string", "maxLength": 4}}},
    "outputs": {"type": "object", "required": ["exit_code"], "properties": {"exit_code": {"type": "integer"}, "stdout": {"type": "string"}}}
  },
  "runtime": {"kind": "docker", "image": "skill-img", "entrypoint": ["bash", "/skills/tight.one/run.sh", "x"]},
  "permissions": {"fs": {"read": ["inputs/**"], "write": ["artifacts/**"]}, "net": {"mode": "none"}},
  "limits": {"timeout_ms": 5000, "memory_mb": 256}
}`

// specs records the container specs the fake engine was asked to run.
type specs struct {
	mu    sync.Mutex
	all   []bay.ContainerSpec
	out   fake.OneShotResult
	files map[string]string // written into /workspace/artifacts, as the skill would
}

func (s *specs) run(_ context.Context, c bay.ContainerSpec) (fake.OneShotResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, c)
	for _, m := range c.Mounts {
		if m.Target != MountArtifacts {
			continue
		}
		for name, body := range s.files {
			if err := os.WriteFile(filepath.Join(m.Source, name), []byte(body), 0o644); err != nil {
				return fake.OneShotResult{}, err
			}
		}
	}
	return s.out, nil
}

func (s *specs) last() bay.ContainerSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all[len(s.all)-1]
}

// newSkillService is newService with a skill library holding the bundled skills and tight.one.
func newSkillService(t *testing.T, sp *specs) (*Service, *skills.Library, string) {
	t.Helper()
	svc, _, root := newService(t, 2, 4, sp.run)
	lib, err := skills.New(svc.store, skills.Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.LoadDir(t.Context(), bundledskills.Dir(), "seed"); err != nil {
		t.Fatal(err)
	}
	extra := t.TempDir()
	dir := filepath.Join(extra, "tight.one")
	for name, body := range map[string]string{
		"SKILL.md":      "---\nname: tight.one\ndescription: A tight skill.\n---\nRuns run.sh.\n",
		"manifest.json": tightManifest,
		"run.sh":        "echo hi\n",
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lib.LoadDir(t.Context(), extra, "seed"); err != nil {
		t.Fatal(err)
	}
	svc.cfg.Library = lib
	return svc, lib, root
}

// TestSkillFromLibrary: an exec's skill_id resolves through the library: the manifest names
// the image and tightens the policy, the record keeps the version, the version is mounted
// read-only at /skills/<id>; a request may not go above the manifest; unknown, knowledge and
// malformed ids are refused before anything runs.
func TestSkillFromLibrary(t *testing.T) {
	sp := &specs{}
	svc, lib, _ := newSkillService(t, sp)
	sk, err := lib.Get(t.Context(), "tight.one")
	if err != nil {
		t.Fatal(err)
	}
	req := shell("p", "x")
	req.SkillID = "tight.one"
	req.Wait = true
	rec, err := svc.Create(t.Context(), "alice", req)
	if err != nil || rec.Image != "skill-img" || rec.Policy.TimeoutMS != 5000 || rec.Policy.MemoryMB != 256 ||
		rec.SkillID != "tight.one" || rec.SkillVersion != sk.Version || rec.Status != bay.ExecSucceeded {
		t.Fatalf("exec of skill tight.one: %+v, %v", rec, err)
	}
	var found bool
	for _, m := range sp.last().Mounts {
		if m.Target == "/skills/tight.one" {
			found = m.ReadOnly && m.Source == lib.VersionDir(sk.Version)
		}
	}
	if !found {
		t.Fatalf("the skill is not mounted read-only from its version: %+v", sp.last().Mounts)
	}
	req.Overrides = bay.PolicyOverrides{TimeoutMS: ptr(int64(6000))}
	var e *bay.Error
	if _, err := svc.Create(t.Context(), "alice", req); !errors.As(err, &e) || e.Code != bay.CodePolicyViolation || e.Details["allowed"] != int64(5000) {
		t.Fatalf("request above the manifest: %v", err)
	}
	before := len(sp.all)
	for id, code := range map[string]string{"no.such": bay.CodeNotFound, "csv-report": bay.CodeValidation, "../etc": bay.CodeValidation, "UPPER.case": bay.CodeValidation} {
		r := shell("p", "x")
		r.SkillID = id
		if _, err := svc.Create(t.Context(), "alice", r); bay.ErrorCode(err) != code {
			t.Errorf("skill %q: %v, want %s", id, err, code)
		}
	}
	if len(sp.all) != before {
		t.Fatalf("a refused skill ran")
	}
}
