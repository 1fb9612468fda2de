package storesql

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ExecRecordCols are the columns of sandbox_execs in the order ExecRecordArgs gives them.
const ExecRecordCols = `id, owner, project_id, task_id, status, created_at, record`

// ExecRecordArgs are the column values of e (created_at converted by d), the record as JSON.
func ExecRecordArgs(d *Dialect, e *bay.ExecRecord) ([]any, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode exec record %s: %w", e.ID, err)
	}
	return []any{e.ID, e.Owner, e.ProjectID, e.TaskID, string(e.Status), d.Time(e.CreatedAt), string(b)}, nil
}

// DecodeExecRecord reads a record back from its JSON column.
func DecodeExecRecord(record []byte) (*bay.ExecRecord, error) {
	var e bay.ExecRecord
	if err := json.Unmarshal(record, &e); err != nil {
		return nil, fmt.Errorf("decode exec record: %w", err)
	}
	return &e, nil
}

// ExecRecords is the clause of q (its Limit and Offset excepted).
func ExecRecords(d *Dialect, q bay.ExecQuery) *Where {
	w := New(d)
	if q.Owner != "" {
		w.Add("owner = " + w.Arg(q.Owner))
	}
	if q.ProjectID != "" {
		w.Add("project_id = " + w.Arg(q.ProjectID))
	}
	if q.TaskID != "" {
		w.Add("task_id = " + w.Arg(q.TaskID))
	}
	if len(q.Statuses) > 0 {
		ph := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			ph[i] = w.Arg(string(s))
		}
		w.Add("status IN (" + strings.Join(ph, ", ") + ")")
	}
	return w
}
