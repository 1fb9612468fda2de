package execs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Library is where execs find skills (internal/bay/skills.Library): the current version of a
// name, the directory of a version's files (VersionDir), and that directory made present on
// this bay (Dir materialises it from the database when this bay has not written it).
type Library interface {
	Get(ctx context.Context, name string) (*bay.Skill, error)
	VersionDir(version string) string
	Dir(ctx context.Context, version string) (string, error)
}

// skillManifest is the part of an invocable skill's manifest.json an exec uses. The library
// validated the whole manifest against the schema when the version was uploaded.
type skillManifest struct {
	ID        string `json:"id"`
	Interface struct {
		Inputs  json.RawMessage `json:"inputs"`
		Outputs json.RawMessage `json:"outputs"`
	} `json:"interface"`
	Runtime struct {
		Kind       string   `json:"kind"`
		Image      string   `json:"image"`
		Entrypoint []string `json:"entrypoint"`
	} `json:"runtime"`
	Permissions struct {
		Net struct {
			Mode *bay.NetMode `json:"mode"`
		} `json:"net"`
	} `json:"permissions"`
	Limits bay.PolicyOverrides `json:"limits"`
}

// policy is the manifest's layer of the policy merge.
func (m skillManifest) policy() bay.PolicyOverrides {
	p := m.Limits
	if m.Permissions.Net.Mode != nil {
		p.NetMode = m.Permissions.Net.Mode
	}
	return p
}

// resolvedSkill is the current version of an invocable skill.
type resolvedSkill struct {
	skill    *bay.Skill
	manifest skillManifest
}

// resolveSkill finds the current version of skill id in the library: it must be invocable
// (a knowledge skill is validation_error "not invocable"), and its files are made present in
// this bay's skills directory, which the exec's container mounts.
func (s *Service) resolveSkill(ctx context.Context, id string) (*resolvedSkill, error) {
	if !bay.ValidSkillName(id) {
		return nil, invalid("skill_id %q is not a skill name (an invocable skill's id is like shell.run)", id)
	}
	if s.cfg.Library == nil {
		return nil, bay.Errorf(bay.CodeNotFound, "skill %s not found: this bay has no skill library", id)
	}
	sk, err := s.cfg.Library.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if sk.Kind != bay.SkillInvocable || len(sk.Manifest) == 0 {
		return nil, invalid("skill %s is a knowledge skill: not invocable (it has no manifest.json)", id)
	}
	var m skillManifest
	if err := json.Unmarshal(sk.Manifest, &m); err != nil {
		return nil, fmt.Errorf("decode the manifest of skill %s@%s: %w", id, sk.Version, err)
	}
	if m.ID != id || m.Runtime.Kind != "docker" || len(m.Runtime.Entrypoint) == 0 {
		return nil, fmt.Errorf("skill %s@%s: its stored manifest names id %q, runtime.kind %q and %d entrypoint words",
			id, sk.Version, m.ID, m.Runtime.Kind, len(m.Runtime.Entrypoint))
	}
	if _, err := s.cfg.Library.Dir(ctx, sk.Version); err != nil {
		return nil, fmt.Errorf("skill %s: %w", id, err)
	}
	return &resolvedSkill{skill: sk, manifest: m}, nil
}

// skillMount is the read-only mount of the exec's skill version at /skills/<id>, or nil.
func (s *Service) skillMount(rec *bay.ExecRecord) *bay.Mount {
	if rec.SkillID == "" || rec.SkillVersion == "" || s.cfg.Library == nil {
		return nil
	}
	return &bay.Mount{Source: s.cfg.Library.VersionDir(rec.SkillVersion), Target: bay.SkillsMountRoot + "/" + rec.SkillID, ReadOnly: true, Snapshot: true}
}

// mounts are every mount of the exec's container: the workspace's three, and its skill.
func (s *Service) mounts(rec *bay.ExecRecord) []bay.Mount {
	ms := s.cfg.Workspace.Mounts(rec.Owner, rec.ProjectID, rec.ID, inputsDir(rec))
	if m := s.skillMount(rec); m != nil {
		ms = append(ms, *m)
	}
	return ms
}

// KindSkill is the kind of a skill invocation's record: its command is the manifest's
// entrypoint, and its inputs directory is its own.
const KindSkill = "skill"

// inputsDir is the directory rec's container sees at /workspace/inputs.
func inputsDir(rec *bay.ExecRecord) string {
	return InputsDir(rec.Owner, rec.ProjectID, rec.ID, rec.Kind == KindSkill)
}
