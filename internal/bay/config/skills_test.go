package config

import "testing"

// TestSkillsFromEnv: `make run` sets the seed directory through the environment.
func TestSkillsFromEnv(t *testing.T) {
	c, err := Load(LoadOptions{Env: []string{"BAY_SKILLS__SEED_DIR=/srv/repo/skills", "BAY_SKILLS__MAX_ARCHIVE_BYTES=8m"}, SearchPaths: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Skills.SeedDir != "/srv/repo/skills" || c.Skills.MaxArchiveBytes != 8<<20 || c.Skills.MaxFiles != 2000 || c.Skills.Dir != "" {
		t.Fatalf("skills %+v", c.Skills)
	}
}
