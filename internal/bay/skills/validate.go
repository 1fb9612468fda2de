package skills

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Files with a meaning in a skill folder.
const (
	SkillFile    = "SKILL.md"
	ManifestFile = "manifest.json"
)

// MaxDescriptionLen bounds the front matter's description (characters).
const MaxDescriptionLen = 1024

// The naming rule is bay.ValidSkillName's (internal/bay/skill.go): the folder name, the
// front matter's name and, for an invocable skill, the manifest id are one name.
var (
	knowledgeNameRe = bay.SkillNameRe
	invocableNameRe = bay.SkillIDRe
)

// ValidName reports whether name may name a skill of either kind.
func ValidName(name string) bool { return bay.ValidSkillName(name) }

// riskyPatterns are warned about in scripts/ (seed 001's scan): they are legitimate at times,
// and the sandbox contains them anyway, so they never refuse an upload.
var riskyPatterns = []string{"rm -rf", "sudo", "eval(", "exec("}

// Result is what validation found in a tree.
type Result struct {
	Name        string
	Description string
	Kind        string
	Manifest    []byte // manifest.json, nil for a knowledge skill
	Errors      []bay.SkillProblem
	Warnings    []bay.SkillProblem
}

func (r *Result) errorf(file, field, format string, args ...any) {
	r.Errors = append(r.Errors, bay.SkillProblem{File: file, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (r *Result) warnf(file, field, format string, args ...any) {
	r.Warnings = append(r.Warnings, bay.SkillProblem{File: file, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Validate checks a skill tree: SKILL.md with front matter, the naming rule, the description,
// manifest.json against the manifest schema and its rules, and scripts for risky patterns
// (warnings). Every problem is listed with its file and field.
func Validate(t *Tree) *Result {
	res := &Result{Kind: bay.SkillKnowledge}
	md, ok := t.Entries[SkillFile]
	switch {
	case !ok:
		res.errorf(SkillFile, "", "SKILL.md is required at the top of the skill folder")
	case md.Link != "":
		res.errorf(SkillFile, "", "SKILL.md must be a regular file, not a link")
	default:
		validateSkillMD(res, md.Data)
	}
	if m, ok := t.Entries[ManifestFile]; ok {
		res.Kind = bay.SkillInvocable
		if m.Link != "" {
			res.errorf(ManifestFile, "", "manifest.json must be a regular file, not a link")
		} else {
			res.Manifest = m.Data
			validateManifest(res, m.Data)
		}
	}
	validateName(res, t.Folder)
	scanScripts(res, t)
	return res
}

// validateSkillMD parses the front matter: a first line "---", YAML, a line "---".
func validateSkillMD(res *Result, data []byte) {
	if !utf8.Valid(data) {
		res.errorf(SkillFile, "", "SKILL.md must be UTF-8 text")
		return
	}
	text := strings.TrimPrefix(string(data), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		res.errorf(SkillFile, "", `SKILL.md must start with YAML front matter ("---" line, name and description, "---" line)`)
		return
	}
	front, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		res.errorf(SkillFile, "", `SKILL.md's front matter has no closing "---" line`)
		return
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(front), &fm); err != nil {
		res.errorf(SkillFile, "", "front matter is not valid YAML: %s", firstLine(err.Error()))
		return
	}
	switch name := fm["name"].(type) {
	case nil:
		res.errorf(SkillFile, "name", "name is required")
	case string:
		res.Name = name
	default:
		res.errorf(SkillFile, "name", "name must be a string")
	}
	switch d := fm["description"].(type) {
	case nil:
		res.warnf(SkillFile, "description", "a description is recommended: agents choose skills by it")
	case string:
		res.Description = strings.TrimSpace(d)
		if n := utf8.RuneCountInString(res.Description); n > MaxDescriptionLen {
			res.errorf(SkillFile, "description", "description has %d characters, more than %d", n, MaxDescriptionLen)
		} else if n == 0 {
			res.warnf(SkillFile, "description", "a description is recommended: agents choose skills by it")
		}
	default:
		res.errorf(SkillFile, "description", "description must be a string")
	}
}

// validateName applies the naming rule to the front matter's name, the folder name and the
// manifest's id.
func validateName(res *Result, folder string) {
	name := res.Name
	if name == "" {
		return
	}
	invocable := res.Kind == bay.SkillInvocable
	switch {
	case bay.ReservedSkillName(name):
		res.errorf(SkillFile, "name", "%q is reserved", name)
	case invocable && !(len(name) <= 64 && invocableNameRe.MatchString(name)):
		res.errorf(SkillFile, "name", "an invocable skill is named by its manifest id: lower-case dotted words such as shell.run (%s), got %q", invocableNameRe, name)
	case !invocable && !knowledgeNameRe.MatchString(name):
		if strings.Contains(name, ".") {
			res.errorf(SkillFile, "name", "%q: dotted names are manifest ids, for invocable skills with a manifest.json", name)
		} else {
			res.errorf(SkillFile, "name", "name must be 1-64 letters, digits, '-' or '_', starting with a letter or digit, got %q", name)
		}
	}
	if folder != "" && folder != name {
		res.errorf(SkillFile, "name", "name %q differs from the folder name %q", name, folder)
	}
	if invocable && len(res.Manifest) > 0 {
		var m struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(res.Manifest, &m) == nil {
			if id, ok := m.ID.(string); ok && id != name {
				res.errorf(ManifestFile, "/id", "id %q differs from the skill's name %q", id, name)
			}
		}
	}
}

// scanScripts warns about risky patterns in scripts/, with the line.
func scanScripts(res *Result, t *Tree) {
	for _, p := range t.Paths() {
		e := t.Entries[p]
		if !strings.HasPrefix(p, "scripts/") || e.Link != "" {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(e.Data))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			for _, pat := range riskyPatterns {
				if bytes.Contains(sc.Bytes(), []byte(pat)) {
					res.warnf(p, fmt.Sprintf("line %d", line), "potentially dangerous pattern %q", pat)
				}
			}
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
