// Package storefilter turns the store's query structs (bay.SandboxQuery, bay.SessionQuery,
// bay.CargoQuery, bay.ExecutionQuery) into SQL WHERE clauses, once for both stores: a Dialect
// says how parameters are written and how values are passed, the filters' meaning lives here.
package storesql

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Dialect is what differs between the stores for the same filter.
type Dialect struct {
	// Placeholder is the text of the n-th parameter (1-based): "?" or "$n".
	Placeholder func(n int) string
	// Time and Bool convert values to the driver's arguments.
	Time func(time.Time) any
	Bool func(bool) any
	// TagMatch is the condition "the tags column contains pattern, ignoring case", pattern a
	// LIKE pattern escaped with backslashes; it adds its parameters with w.Arg.
	TagMatch func(w *Where, pattern string) string
}

// Where accumulates AND-ed conditions and their parameters.
type Where struct {
	d     *Dialect
	conds []string
	args  []any
}

// New returns an empty clause of dialect d.
func New(d *Dialect) *Where { return &Where{d: d} }

// Arg adds a parameter and returns its placeholder.
func (w *Where) Arg(v any) string {
	w.args = append(w.args, v)
	return w.d.Placeholder(len(w.args))
}

// Add adds a condition.
func (w *Where) Add(cond string) { w.conds = append(w.conds, cond) }

// SQL is " WHERE c1 AND c2 ..." or "" without conditions.
func (w *Where) SQL() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// Args are the parameters in placeholder order.
func (w *Where) Args() []any { return w.args }

// Sandboxes is the clause of q (its Limit excepted).
func Sandboxes(d *Dialect, q bay.SandboxQuery) *Where {
	w := New(d)
	if q.Owner != "" {
		w.Add("owner = " + w.Arg(q.Owner))
	}
	if q.AfterID != "" {
		w.Add("id > " + w.Arg(q.AfterID))
	}
	if !q.IncludeDeleted {
		w.Add("deleted_at IS NULL")
	}
	if q.Warm != nil {
		w.Add("is_warm = " + w.Arg(d.Bool(*q.Warm)))
	}
	if q.WarmState != nil {
		w.Add("warm_state = " + w.Arg(*q.WarmState))
	}
	if q.ProfileID != "" {
		w.Add("profile_id = " + w.Arg(q.ProfileID))
	}
	if q.IdleExpiredBefore != nil {
		w.Add("idle_expires_at < " + w.Arg(d.Time(*q.IdleExpiredBefore))) // NULL never compares true
	}
	if q.ExpiredBefore != nil {
		w.Add("expires_at < " + w.Arg(d.Time(*q.ExpiredBefore)))
	}
	if q.HasSession != nil {
		if *q.HasSession {
			w.Add("current_session_id IS NOT NULL")
		} else {
			w.Add("current_session_id IS NULL")
		}
	}
	if q.CargoID != "" {
		w.Add("cargo_id = " + w.Arg(q.CargoID))
	}
	return w
}

// Sessions is the clause of q.
func Sessions(d *Dialect, q bay.SessionQuery) *Where {
	w := New(d)
	if q.SandboxID != "" {
		w.Add("sandbox_id = " + w.Arg(q.SandboxID))
	}
	if q.ObservedState != "" {
		w.Add("observed_state = " + w.Arg(string(q.ObservedState)))
	}
	return w
}

// Cargos is the clause of q (its Limit excepted).
func Cargos(d *Dialect, q bay.CargoQuery) *Where {
	w := New(d)
	if q.Owner != "" {
		w.Add("owner = " + w.Arg(q.Owner))
	}
	if q.Managed != nil {
		w.Add("managed = " + w.Arg(d.Bool(*q.Managed)))
	}
	if q.ManagedBySandboxID != "" {
		w.Add("managed_by_sandbox_id = " + w.Arg(q.ManagedBySandboxID))
	}
	if q.AfterID != "" {
		w.Add("id > " + w.Arg(q.AfterID))
	}
	return w
}

// likeEscaper escapes LIKE's wildcards and the escape character itself.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Executions is the clause of q (its Limit and Offset excepted). A tag matches when it occurs
// in the tags column as a substring, ignoring case; any of q.Tags may match.
func Executions(d *Dialect, q bay.ExecutionQuery) *Where {
	w := New(d)
	if q.Owner != "" {
		w.Add("owner = " + w.Arg(q.Owner))
	}
	if q.SandboxID != "" {
		w.Add("sandbox_id = " + w.Arg(q.SandboxID))
	}
	if q.ExecType != "" {
		w.Add("exec_type = " + w.Arg(q.ExecType))
	}
	if q.SuccessOnly {
		w.Add("success = " + w.Arg(d.Bool(true)))
	}
	var tagConds []string
	for _, t := range q.Tags {
		if t != "" {
			tagConds = append(tagConds, d.TagMatch(w, "%"+likeEscaper.Replace(t)+"%"))
		}
	}
	if len(tagConds) > 0 {
		w.Add("(" + strings.Join(tagConds, " OR ") + ")")
	}
	if q.HasNotes != nil {
		if *q.HasNotes {
			w.Add("(notes IS NOT NULL AND notes <> '')")
		} else {
			w.Add("(notes IS NULL OR notes = '')")
		}
	}
	if q.HasDescription != nil {
		if *q.HasDescription {
			w.Add("(description IS NOT NULL AND description <> '')")
		} else {
			w.Add("(description IS NULL OR description = '')")
		}
	}
	return w
}

// Jobs is the clause of q (its Limit and Offset excepted).
func Jobs(d *Dialect, q bay.JobQuery) *Where {
	w := New(d)
	if q.Owner != "" {
		w.Add("owner = " + w.Arg(q.Owner))
	}
	if q.SandboxID != "" {
		w.Add("sandbox_id = " + w.Arg(q.SandboxID))
	}
	if len(q.Statuses) > 0 {
		ph := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			ph[i] = w.Arg(s)
		}
		w.Add("status IN (" + strings.Join(ph, ", ") + ")")
	}
	return w
}

// JobColumns are the columns of the jobs table in the order both stores scan and write them.
const JobColumns = `id, owner, sandbox_id, session_id, kind, command, cwd, timeout_seconds, description, tags,
status, exit_code, reason, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, created_at, started_at, ended_at,
artifacts`

// JobArtifacts is the stored form of a job's artifacts: nil (NULL) when there are none and no
// note.
func JobArtifacts(j *bay.Job) (any, error) {
	if len(j.Artifacts) == 0 && j.ArtifactsNote == "" {
		return nil, nil
	}
	b, err := json.Marshal(jobArtifacts{j.Artifacts, j.ArtifactsNote})
	if err != nil {
		return nil, fmt.Errorf("encode artifacts: %w", err)
	}
	return string(b), nil
}

// SetJobArtifacts reads a job's artifacts back from their column (nil: NULL).
func SetJobArtifacts(j *bay.Job, col []byte) error {
	if col == nil {
		return nil
	}
	var a jobArtifacts
	if err := json.Unmarshal(col, &a); err != nil {
		return fmt.Errorf("decode artifacts: %w", err)
	}
	j.Artifacts, j.ArtifactsNote = a.Artifacts, a.Note
	return nil
}

type jobArtifacts struct {
	Artifacts []bay.Artifact `json:"artifacts,omitempty"`
	Note      string         `json:"note,omitempty"`
}

// JobUpdateSet is the SET list of an UPDATE of every job column but id (parameters 2..21 of
// placeholder p; the id is parameter 1).
func JobUpdateSet(p func(n int) string) string {
	cols := strings.Split(strings.ReplaceAll(JobColumns, "\n", " "), ",")[1:]
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = strings.TrimSpace(c) + " = " + p(i+2)
	}
	return strings.Join(set, ", ")
}
