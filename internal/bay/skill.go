package bay

import "time"

// Skill kinds: a knowledge skill is instructions and files an agent reads; an invocable skill
// also has a manifest.json describing how bay runs it.
const (
	SkillKnowledge = "knowledge"
	SkillInvocable = "invocable"
)

// Skill is one immutable version of a library skill (internal/bay/skills). Its files live in
// the skill library's blob directory under Version; the store keeps this description and
// which version of each name is current.
type Skill struct {
	Name        string
	Version     string // sha256 hex of the canonical content (paths, modes, bytes)
	Description string
	Kind        string // SkillKnowledge or SkillInvocable
	Manifest    []byte // manifest.json as uploaded (JSON), nil for a knowledge skill
	Files       []SkillFile
	SizeBytes   int64  // sum of the regular files' sizes
	UploadedBy  string // owner of the key that uploaded this version
	CreatedAt   time.Time
}

// SkillFile is one entry of a skill version, in path order. Directories are implied.
type SkillFile struct {
	Path       string `json:"path"` // slash-separated, relative to the skill folder
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256,omitempty"` // hex, regular files only
	Executable bool   `json:"executable,omitempty"`
	Link       string `json:"link,omitempty"` // symlink target (relative, inside the skill)
}

// HasDir reports whether any file of s lies under the top-level directory dir.
func (s *Skill) HasDir(dir string) bool {
	for _, f := range s.Files {
		if len(f.Path) > len(dir) && f.Path[:len(dir)] == dir && f.Path[len(dir)] == '/' {
			return true
		}
	}
	return false
}
