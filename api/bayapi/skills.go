package bayapi

// The skill library (ours): an admin-managed set of skill folders, each stored as immutable
// content-hashed versions, readable by every owner and mounted read-only into sandboxes at
// SkillsMountRoot/<name>.

// Paths of the skill library.
const (
	PathSkills             = "/v1/skills"
	PathSkill              = "/v1/skills/{name}"
	PathSkillFile          = "/v1/skills/{name}/files/{path...}"
	PathAdminSkills        = "/v1/admin/skills"
	PathAdminSkillValidate = "/v1/admin/skills/validate"
	PathAdminSkill         = "/v1/admin/skills/{name}"
)

// SkillsMountRoot is where a sandbox sees its skills: SkillsMountRoot/<name>/SKILL.md, and
// SkillsIndexFile lists them.
const (
	SkillsMountRoot = "/skills"
	SkillsIndexFile = "/skills/INDEX.md"
)

// Skill kinds.
const (
	SkillKindKnowledge = "knowledge"
	SkillKindInvocable = "invocable"
)

// MaxSkillsPerSandbox bounds the skills of one create request.
const MaxSkillsPerSandbox = 32

// SkillSummary is one entry of GET /v1/skills: the light first step of progressive loading.
type SkillSummary struct {
	Name           string           `json:"name"`
	Description    string           `json:"description"`
	Version        string           `json:"version"` // sha256 hex of the content
	Kind           string           `json:"kind"`    // knowledge | invocable
	HasScripts     bool             `json:"has_scripts"`
	HasTemplates   bool             `json:"has_templates"`
	HasReferences  bool             `json:"has_references"`
	HasAssets      bool             `json:"has_assets"`
	Manifest       *ManifestSummary `json:"manifest"` // null for knowledge skills
	SizeBytes      int64            `json:"size_bytes"`
	CreatedAt      Time             `json:"created_at"` // when this version was first stored
	UploadedBy     string           `json:"uploaded_by"`
	MountPath      string           `json:"mount_path"` // where a sandbox sees it
	FileCount      int              `json:"file_count"`
	ManifestSHA256 string           `json:"manifest_sha256,omitempty"`
}

// ManifestSummary is the part of an invocable skill's manifest.json a client needs to pick
// and call it.
type ManifestSummary struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Image       string         `json:"image"`
	Inputs      map[string]any `json:"inputs"`  // JSON Schema of interface.inputs
	Outputs     map[string]any `json:"outputs"` // JSON Schema of interface.outputs
}

// SkillList is GET /v1/skills.
type SkillList struct {
	Items []SkillSummary `json:"items"`
}

// SkillDetail is GET /v1/skills/{name}: the summary plus SKILL.md and the file list.
type SkillDetail struct {
	SkillSummary
	SkillMD  string         `json:"skill_md"`
	Manifest map[string]any `json:"manifest_json"` // the whole manifest.json, null for knowledge skills
	Files    []SkillFile    `json:"files"`
}

// SkillFile is one file of a skill version.
type SkillFile struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256,omitempty"`
	Executable bool   `json:"executable,omitempty"`
	Link       string `json:"link,omitempty"`
}

// SkillProblem is one validation finding, naming the file (a path inside the skill, or the
// archive entry) and the field (a front matter key, a JSON pointer into manifest.json, or
// empty when the whole file is meant).
type SkillProblem struct {
	File    string `json:"file"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// SkillValidation is POST /v1/admin/skills/validate, and the details of a refused upload.
type SkillValidation struct {
	Valid    bool           `json:"valid"`
	Name     string         `json:"name,omitempty"`
	Version  string         `json:"version,omitempty"`
	Kind     string         `json:"kind,omitempty"`
	Errors   []SkillProblem `json:"errors"`
	Warnings []SkillProblem `json:"warnings"`
}

// SkillUploadResponse is POST /v1/admin/skills.
type SkillUploadResponse struct {
	Skill    SkillSummary   `json:"skill"`
	Created  bool           `json:"created"` // false: this exact version was already current
	Warnings []SkillProblem `json:"warnings"`
}

// MountedSkill is one skill mounted into a sandbox's session.
type MountedSkill struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Path    string `json:"path"`
}
