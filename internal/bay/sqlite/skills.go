package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

// The skill library's rows (migration 0004).

const skillColumns = `v.name, v.version, v.description, v.kind, v.manifest, v.files, v.size_bytes, v.uploaded_by, v.created_at`

var (
	qGetSkill = prepared(`SELECT ` + skillColumns + ` FROM skills s
		JOIN skill_versions v ON v.name = s.name AND v.version = s.version WHERE s.name = ? COLLATE BINARY`)
	qListSkills = prepared(`SELECT ` + skillColumns + ` FROM skills s
		JOIN skill_versions v ON v.name = s.name AND v.version = s.version ORDER BY s.name`)
	qGetSkillVersion    = prepared(`SELECT ` + skillColumns + ` FROM skill_versions v WHERE v.name = ? AND v.version = ?`)
	qSkillNameFold      = prepared(`SELECT name, version FROM skills WHERE lower(name) = lower(?)`)
	qInsertSkillVersion = prepared(`INSERT INTO skill_versions (name, version, description, kind, manifest, files, size_bytes, uploaded_by, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name, version) DO NOTHING`)
	qUpsertSkill = prepared(`INSERT INTO skills (name, version, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at`)
	qDeleteSkill        = prepared(`DELETE FROM skills WHERE name = ? COLLATE BINARY`)
	qListSandboxSkills  = prepared(`SELECT name FROM sandbox_skills WHERE sandbox_id = ? ORDER BY position`)
	qClearSandboxSkills = prepared(`DELETE FROM sandbox_skills WHERE sandbox_id = ?`)
	qAddSandboxSkill    = prepared(`INSERT INTO sandbox_skills (sandbox_id, position, name) VALUES (?, ?, ?)`)
)

func scanSkill(r scanner) (*bay.Skill, error) {
	var s bay.Skill
	var files string
	var created int64
	if err := r.Scan(&s.Name, &s.Version, &s.Description, &s.Kind, &s.Manifest, &files, &s.SizeBytes, &s.UploadedBy, &created); err != nil {
		return nil, err
	}
	fs, err := storesql.ParseSkillFiles([]byte(files))
	if err != nil {
		return nil, err
	}
	s.Files, s.CreatedAt = fs, fromMicros(created)
	return &s, nil
}

// GetSkill returns the current version of name (exact); missing wraps ErrNotFound.
func (q queries) GetSkill(ctx context.Context, name string) (*bay.Skill, error) {
	s, err := scanSkill(q.queryRow(ctx, qGetSkill, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get skill %s: %w", name, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get skill %s: %w", name, err)
	}
	return s, nil
}

// GetSkillVersion returns one stored version, current or not.
func (q queries) GetSkillVersion(ctx context.Context, name, version string) (*bay.Skill, error) {
	s, err := scanSkill(q.queryRow(ctx, qGetSkillVersion, name, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get skill %s@%s: %w", name, version, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get skill %s@%s: %w", name, version, err)
	}
	return s, nil
}

// ListSkills returns the current version of every skill, by name.
func (q queries) ListSkills(ctx context.Context) ([]*bay.Skill, error) {
	rows, err := q.query(ctx, qListSkills)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	defer rows.Close()
	var out []*bay.Skill
	for rows.Next() {
		s, err := scanSkill(rows)
		if err != nil {
			return nil, fmt.Errorf("list skills: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	return out, nil
}

// ListSandboxSkills returns the skills a sandbox's create request named, in request order.
func (q queries) ListSandboxSkills(ctx context.Context, sandboxID string) ([]string, error) {
	rows, err := q.query(ctx, qListSandboxSkills, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list sandbox skills %s: %w", sandboxID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list sandbox skills %s: %w", sandboxID, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sandbox skills %s: %w", sandboxID, err)
	}
	return out, nil
}

// PutSkill stores s.Version of s.Name (kept if already stored) and makes it current. It
// reports false when that version already was current. A current skill whose name differs
// only in case wraps ErrConflict.
func (q *txn) PutSkill(ctx context.Context, s *bay.Skill, now time.Time) (bool, error) {
	var curName, curVersion string
	err := q.queryRow(ctx, qSkillNameFold, s.Name).Scan(&curName, &curVersion)
	switch {
	case errors.Is(err, sql.ErrNoRows):
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
	if _, err := q.exec(ctx, qInsertSkillVersion, s.Name, s.Version, s.Description, s.Kind, s.Manifest, files,
		s.SizeBytes, s.UploadedBy, micros(s.CreatedAt)); err != nil {
		return false, classify(err, "put skill %s@%s", s.Name, s.Version)
	}
	if _, err := q.exec(ctx, qUpsertSkill, s.Name, s.Version, micros(now)); err != nil {
		return false, classify(err, "put skill %s", s.Name)
	}
	return true, nil
}

// DeleteSkill removes name from the library; its versions stay for the sessions that mount
// them. Missing wraps ErrNotFound.
func (q *txn) DeleteSkill(ctx context.Context, name string) error {
	res, err := q.exec(ctx, qDeleteSkill, name)
	return mustAffect(res, err, "delete skill %s", name)
}

// SetSandboxSkills replaces the skills stored for a sandbox.
func (q *txn) SetSandboxSkills(ctx context.Context, sandboxID string, names []string) error {
	if len(names) > storesql.MaxSandboxSkills {
		return fmt.Errorf("set sandbox skills %s: %d skills, more than %d", sandboxID, len(names), storesql.MaxSandboxSkills)
	}
	if _, err := q.exec(ctx, qClearSandboxSkills, sandboxID); err != nil {
		return fmt.Errorf("set sandbox skills %s: %w", sandboxID, err)
	}
	for i, n := range names {
		if _, err := q.exec(ctx, qAddSandboxSkill, sandboxID, i, n); err != nil {
			return classify(err, "set sandbox skills %s", sandboxID)
		}
	}
	return nil
}
