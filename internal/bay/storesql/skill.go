package storesql

import (
	"encoding/json"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// SkillFiles is the stored form of a skill version's file list (JSON text).
func SkillFiles(s *bay.Skill) (string, error) {
	files := s.Files
	if files == nil {
		files = []bay.SkillFile{}
	}
	b, err := json.Marshal(files)
	if err != nil {
		return "", fmt.Errorf("encode skill files: %w", err)
	}
	return string(b), nil
}

// ParseSkillFiles reads a file list back.
func ParseSkillFiles(b []byte) ([]bay.SkillFile, error) {
	var files []bay.SkillFile
	if err := json.Unmarshal(b, &files); err != nil {
		return nil, fmt.Errorf("decode skill files: %w", err)
	}
	return files, nil
}

// MaxSandboxSkills bounds the skills stored for one sandbox (a create request's list).
const MaxSandboxSkills = 64
