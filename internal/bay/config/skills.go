package config

import (
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// checkSkills validates the skills block (root_path is checked with the other paths).
func checkSkills(s *SkillsConfig, add func(key, format string, args ...any)) {
	for _, p := range []struct{ key, v string }{{"skills.dir", s.Dir}, {"skills.seed_dir", s.SeedDir}} {
		if p.v != "" && !strings.HasPrefix(p.v, "/") {
			add(p.key, "must be an absolute host path, got %q", p.v)
		}
	}
	if s.MaxArchiveBytes <= 0 {
		add("skills.max_archive_bytes", "must be > 0, got %d", s.MaxArchiveBytes)
	}
	if s.MaxUnpackedBytes <= 0 {
		add("skills.max_unpacked_bytes", "must be > 0, got %d", s.MaxUnpackedBytes)
	}
	if s.MaxFiles <= 0 {
		add("skills.max_files", "must be > 0, got %d", s.MaxFiles)
	}
}

// profileSkillName reports whether a profile may name the skill: a library skill name, or
// with the legacy skills.root_path a folder name under it.
func profileSkillName(name, root string) bool {
	if root != "" {
		return len(name) <= 64 && nameRe.MatchString(name) && name != "." && name != ".."
	}
	return bay.ValidSkillName(name)
}
