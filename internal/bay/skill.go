package bay

import (
	"context"
	"regexp"
	"strings"
	"time"
)

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

// The naming rule, reconciling seed 001's folder names with seed 003's dotted manifest ids. A
// skill's name is its folder name, and SKILL.md's front matter name must equal it:
//
//   - a knowledge skill (no manifest.json) is named with letters, digits, "-" and "_",
//     starting with a letter or digit, at most 64 characters (SkillNameRe);
//   - an invocable skill (with manifest.json) is named by its manifest id, lower-case dotted
//     words such as shell.run (SkillIDRe, at most 64 characters), and manifest.json's id
//     must equal the name.
//
// So a dot in a name always means "invocable", the two forms never collide, and neither can
// be INDEX.md, the sandbox's list of its skills. Names are unique case-insensitively, and
// payloads, candidates and releases are reserved (the reference API uses those paths).
var (
	SkillNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	SkillIDRe   = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9]+)+$`)
)

// ReservedSkillName reports whether name (in any case) is reserved.
func ReservedSkillName(name string) bool {
	switch strings.ToLower(name) {
	case "payloads", "candidates", "releases":
		return true
	}
	return false
}

// ValidSkillName reports whether name may name a skill of either kind.
func ValidSkillName(name string) bool {
	if ReservedSkillName(name) {
		return false
	}
	return SkillNameRe.MatchString(name) || (len(name) <= 64 && SkillIDRe.MatchString(name))
}

// Where a sandbox sees its skills: SkillsMountRoot/<name>/SKILL.md, listed in SkillsIndexFile.
const (
	SkillsMountRoot = "/skills"
	SkillsIndexFile = "/skills/INDEX.md"
)

// SkillProblem is one validation finding, naming the file (a path inside the skill, or the
// archive entry) and the field (a front matter key, a JSON pointer into manifest.json, a
// script's line, or empty when the whole file is meant). It is sent as is in the details of a
// refused upload.
type SkillProblem struct {
	File    string `json:"file"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// SkillCheck is what validating an upload found.
type SkillCheck struct {
	Valid    bool
	Name     string // from SKILL.md ("" when unreadable)
	Version  string // content hash ("" when the archive could not be read)
	Kind     string
	Errors   []SkillProblem
	Warnings []SkillProblem
}

// MountedSkill is one skill version mounted into a session.
type MountedSkill struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Path    string `json:"path"`
}

// SkillArchive is one skill version's content as the database holds it, so that every bay on
// the database can materialise any version in its own directory: the normalised archive
// (internal/bay/skills), keyed by the version (the content hash it unpacks to).
type SkillArchive struct {
	Version   string // the skill version the archive unpacks to
	SHA256    string // hex sha256 of the archive's bytes
	Size      int64  // the archive's bytes
	Data      []byte // nil when a reader's bound kept it unread
	CreatedAt time.Time
}

// SkillArchiveReader reads skill archives.
type SkillArchiveReader interface {
	// GetSkillArchive returns version's archive, its Data only when Size <= maxBytes (nil
	// otherwise: a stored archive larger than the reader's bound is never read). Missing wraps
	// ErrNotFound.
	GetSkillArchive(ctx context.Context, version string, maxBytes int64) (*SkillArchive, error)
}

// SkillArchiveWriter writes skill archives.
type SkillArchiveWriter interface {
	// PutSkillArchive stores a (Version, SHA256, Size, Data, CreatedAt) unless its version has
	// an archive already, which is then kept: the content is the same by construction.
	PutSkillArchive(ctx context.Context, a *SkillArchive) error
}
