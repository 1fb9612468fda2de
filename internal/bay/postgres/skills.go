package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

// The skill library's rows (migration 0004).

const skillColumns = `v.name, v.version, v.description, v.kind, v.manifest, v.files, v.size_bytes, v.uploaded_by, v.created_at`

const (
	qGetSkill = `SELECT ` + skillColumns + ` FROM skills s
		JOIN skill_versions v ON v.name = s.name AND v.version = s.version WHERE s.name = $1`
	qListSkills = `SELECT ` + skillColumns + ` FROM skills s
		JOIN skill_versions v ON v.name = s.name AND v.version = s.version ORDER BY s.name`
	qGetSkillVersion    = `SELECT ` + skillColumns + ` FROM skill_versions v WHERE v.name = $1 AND v.version = $2`
	qSkillNameFold      = `SELECT name, version FROM skills WHERE lower(name) = lower($1)`
	qInsertSkillVersion = `INSERT INTO skill_versions (name, version, description, kind, manifest, files, size_bytes, uploaded_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (name, version) DO NOTHING`
	qUpsertSkill = `INSERT INTO skills (name, version, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at`
	qDeleteSkill        = `DELETE FROM skills WHERE name = $1`
	qListSandboxSkills  = `SELECT name FROM sandbox_skills WHERE sandbox_id = $1 ORDER BY position`
	qClearSandboxSkills = `DELETE FROM sandbox_skills WHERE sandbox_id = $1`
	qAddSandboxSkill    = `INSERT INTO sandbox_skills (sandbox_id, position, name) VALUES ($1, $2, $3)`
)

func scanSkill(r pgx.Row) (*bay.Skill, error) {
	var s bay.Skill
	var files []byte
	if err := r.Scan(&s.Name, &s.Version, &s.Description, &s.Kind, &s.Manifest, &files, &s.SizeBytes, &s.UploadedBy, &s.CreatedAt); err != nil {
		return nil, err
	}
	fs, err := storesql.ParseSkillFiles(files)
	if err != nil {
		return nil, err
	}
	s.Files, s.CreatedAt = fs, s.CreatedAt.UTC()
	return &s, nil
}

// GetSkill returns the current version of name (exact); missing wraps ErrNotFound.
func (q queries) GetSkill(ctx context.Context, name string) (*bay.Skill, error) {
	return getOne(q.q.QueryRow(ctx, qGetSkill, name), scanSkill, "get skill %s", name)
}

// GetSkillVersion returns one stored version, current or not.
func (q queries) GetSkillVersion(ctx context.Context, name, version string) (*bay.Skill, error) {
	return getOne(q.q.QueryRow(ctx, qGetSkillVersion, name, version), scanSkill, "get skill %s@%s", name, version)
}

// ListSkills returns the current version of every skill, by name.
func (q queries) ListSkills(ctx context.Context) ([]*bay.Skill, error) {
	rows, err := q.q.Query(ctx, qListSkills)
	out, err := collect(rows, err, scanSkill)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	return out, nil
}

// ListSandboxSkills returns the skills a sandbox's create request named, in request order.
func (q queries) ListSandboxSkills(ctx context.Context, sandboxID string) ([]string, error) {
	rows, err := q.q.Query(ctx, qListSandboxSkills, sandboxID)
	names, err := collect(rows, err, func(r pgx.Row) (*string, error) {
		var n string
		return &n, r.Scan(&n)
	})
	if err != nil {
		return nil, fmt.Errorf("list sandbox skills %s: %w", sandboxID, err)
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = *n
	}
	return out, nil
}

// PutSkill stores s.Version of s.Name (kept if already stored) and makes it current. It
// reports false when that version already was current. A current skill whose name differs
// only in case wraps ErrConflict.
func (q *txn) PutSkill(ctx context.Context, s *bay.Skill, now time.Time) (bool, error) {
	var curName, curVersion string
	err := q.q.QueryRow(ctx, qSkillNameFold, s.Name).Scan(&curName, &curVersion)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return false, fmt.Errorf("put skill %s: %w", s.Name, err)
	case curName != s.Name:
		return false, fmt.Errorf("put skill %s: skill %s exists: %w", s.Name, curName, bay.ErrConflict)
	case curVersion == s.Version:
		return false, nil
	}
	files, err := storesql.SkillFiles(s)
	if err != nil {
		return false, err
	}
	if _, err := q.q.Exec(ctx, qInsertSkillVersion, s.Name, s.Version, s.Description, s.Kind, s.Manifest, files,
		s.SizeBytes, s.UploadedBy, ts(s.CreatedAt)); err != nil {
		return false, classify(err, "put skill %s@%s", s.Name, s.Version)
	}
	if _, err := q.q.Exec(ctx, qUpsertSkill, s.Name, s.Version, ts(now)); err != nil {
		return false, classify(err, "put skill %s", s.Name)
	}
	return true, nil
}

// DeleteSkill removes name from the library; its versions stay for the sessions that mount
// them. Missing wraps ErrNotFound.
func (q *txn) DeleteSkill(ctx context.Context, name string) error {
	tag, err := q.q.Exec(ctx, qDeleteSkill, name)
	return mustAffect(tag, err, "delete skill %s", name)
}

// SetSandboxSkills replaces the skills stored for a sandbox.
func (q *txn) SetSandboxSkills(ctx context.Context, sandboxID string, names []string) error {
	if len(names) > storesql.MaxSandboxSkills {
		return fmt.Errorf("set sandbox skills %s: %d skills, more than %d", sandboxID, len(names), storesql.MaxSandboxSkills)
	}
	if _, err := q.q.Exec(ctx, qClearSandboxSkills, sandboxID); err != nil {
		return fmt.Errorf("set sandbox skills %s: %w", sandboxID, err)
	}
	for i, n := range names {
		if _, err := q.q.Exec(ctx, qAddSandboxSkill, sandboxID, i, n); err != nil {
			return classify(err, "set sandbox skills %s", sandboxID)
		}
	}
	return nil
}
