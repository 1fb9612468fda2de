package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// SkillLibrary is the skill library as the lifecycle service sees it
// (internal/bay/skills.Library).
type SkillLibrary interface {
	// Mounts resolves names to their current versions: read-only mounts at /skills/<name>
	// and /skills/INDEX.md; names the library lacks are skipped.
	Mounts(ctx context.Context, names []string) ([]bay.Mount, []bay.MountedSkill, error)
	// CheckNames is validation_error naming every skill the library lacks.
	CheckNames(ctx context.Context, names []string) error
}

// SetSkills gives the service the skill library (before serving). Without one, a create
// request naming skills is refused and profiles mount only legacy host folders.
func (s *Service) SetSkills(l SkillLibrary) { s.skills = l }

// MaxRequestSkills bounds the skills of one create request.
const MaxRequestSkills = 32

// checkRequestSkills validates a create request's skills: known to the library, no
// duplicates, at most MaxRequestSkills.
func (s *Service) checkRequestSkills(ctx context.Context, names []string) error {
	if len(names) > MaxRequestSkills {
		return bay.Errorf(bay.CodeValidation, "At most %d skills per sandbox, got %d", MaxRequestSkills, len(names)).
			WithDetails(map[string]any{"field": "skills"})
	}
	for i, n := range names {
		if !bay.ValidSkillName(n) {
			return bay.Errorf(bay.CodeValidation, "Invalid skill name %q", n).WithDetails(map[string]any{"field": "skills", "index": i})
		}
		if slices.Contains(names[:i], n) {
			return bay.Errorf(bay.CodeValidation, "Duplicate skill %q", n).WithDetails(map[string]any{"field": "skills", "index": i})
		}
	}
	if s.skills == nil {
		return bay.Errorf(bay.CodeValidation, "Unknown skill(s): %s (no skill library)", strings.Join(names, ", ")).
			WithDetails(map[string]any{"field": "skills", "unknown": names})
	}
	return s.skills.CheckNames(ctx, names)
}

// withRequestSkills stores a create request's skills in the transaction that inserts the
// sandbox, before the caller's hook.
func withRequestSkills(names []string, hook bay.TxHook[*bay.SandboxView]) bay.TxHook[*bay.SandboxView] {
	return func(ctx context.Context, tx bay.Tx, v *bay.SandboxView) error {
		if err := tx.SetSandboxSkills(ctx, v.ID, names); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, v)
		}
		return nil
	}
}

// addSkillMounts mounts the session's library skills into every container of spec: the
// profile's (unless the legacy skills.root_path makes them host folders, mounted by
// instanceSpec) and then the create request's, each at the version current now.
func (s *Service) addSkillMounts(ctx context.Context, sb *bay.Sandbox, prof *bay.Profile, spec *bay.InstanceSpec) error {
	var names []string
	if s.cfg.SkillsRoot == "" {
		names = append(names, prof.Skills...)
	}
	requested, err := s.store.ListSandboxSkills(ctx, sb.ID)
	if err != nil {
		return fmt.Errorf("load sandbox skills: %w", err)
	}
	for _, n := range requested {
		if s.cfg.SkillsRoot != "" && slices.Contains(prof.Skills, n) {
			continue // the profile's host folder of that name is mounted already
		}
		names = append(names, n)
	}
	if len(names) == 0 || s.skills == nil {
		return nil
	}
	mounts, mounted, err := s.skills.Mounts(ctx, names)
	if err != nil {
		return fmt.Errorf("resolve skills: %w", err)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Mounts = append(slices.Clip(c.Mounts), mounts...)
	}
	if len(mounted) > 0 {
		s.log.InfoContext(ctx, "skills mounted", "sandbox_id", sb.ID, "skills", mounted)
	}
	return nil
}
