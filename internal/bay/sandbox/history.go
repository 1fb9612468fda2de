package sandbox

import (
	"context"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// HistoryParams filter ListHistory (validated by the caller: exec type, limit 1..500, offset).
type HistoryParams struct {
	ExecType       string
	SuccessOnly    bool
	Limit          int
	Offset         int
	Tags           *string
	HasNotes       *bool
	HasDescription *bool
}

// ExecutionEntry renders a history row.
func ExecutionEntry(e *bay.Execution) bayapi.ExecutionHistoryEntry {
	var sid *string
	if e.SessionID != "" {
		v := e.SessionID
		sid = &v
	}
	return bayapi.ExecutionHistoryEntry{
		ID: e.ID, SessionID: sid, ExecType: e.ExecType, Code: e.Code, Success: e.Success,
		ExecutionTimeMS: e.ExecutionTimeMS, Output: e.Output, Error: e.Error, PayloadRef: e.PayloadRef,
		Description: e.Description, Tags: e.Tags, Notes: e.Notes, LearnEnabled: e.LearnEnabled,
		LearnStatus: e.LearnStatus, LearnError: e.LearnError, LearnProcessedAt: bayapi.TimePtr(e.LearnProcessedAt),
		CreatedAt: bayapi.NewTime(e.CreatedAt),
	}
}

// ListHistory returns the sandbox's execution history, newest first, and the total count.
func (s *Service) ListHistory(ctx context.Context, owner, id string, p HistoryParams) (*bayapi.ExecutionHistoryList, error) {
	if _, err := s.ownedSandbox(ctx, s.store, owner, id); err != nil {
		return nil, err
	}
	q := bay.ExecutionQuery{
		Owner: owner, SandboxID: id, ExecType: p.ExecType, SuccessOnly: p.SuccessOnly,
		HasNotes: p.HasNotes, HasDescription: p.HasDescription, Limit: p.Limit, Offset: p.Offset,
	}
	if t := NormalizeTags(p.Tags); t != nil {
		q.Tags = strings.Split(*t, ",")
	}
	rows, total, err := s.store.ListExecutions(ctx, q)
	if err != nil {
		return nil, internal("Failed to list execution history", err)
	}
	out := &bayapi.ExecutionHistoryList{Entries: make([]bayapi.ExecutionHistoryEntry, 0, len(rows)), Total: total}
	for _, e := range rows {
		out.Entries = append(out.Entries, ExecutionEntry(e))
	}
	return out, nil
}

// LastExecution returns the newest entry (of execType if set), or not_found
// "No execution history found".
func (s *Service) LastExecution(ctx context.Context, owner, id, execType string) (*bayapi.ExecutionHistoryEntry, error) {
	if _, err := s.ownedSandbox(ctx, s.store, owner, id); err != nil {
		return nil, err
	}
	rows, _, err := s.store.ListExecutions(ctx, bay.ExecutionQuery{Owner: owner, SandboxID: id, ExecType: execType, Limit: 1})
	if err != nil {
		return nil, internal("Failed to list execution history", err)
	}
	if len(rows) == 0 {
		return nil, bay.Errorf(bay.CodeNotFound, "No execution history found")
	}
	e := ExecutionEntry(rows[0])
	return &e, nil
}

func (s *Service) ownedExecution(ctx context.Context, r bay.Reader, owner, id, execID string) (*bay.Execution, error) {
	e, err := r.GetExecution(ctx, execID)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, bay.Errorf(bay.CodeNotFound, "Execution not found: %s", execID)
		}
		return nil, internal("Failed to load execution", err)
	}
	if e.Owner != owner || e.SandboxID != id {
		return nil, bay.Errorf(bay.CodeNotFound, "Execution not found: %s", execID)
	}
	return e, nil
}

// GetExecution returns one entry of this sandbox and owner, or not_found.
func (s *Service) GetExecution(ctx context.Context, owner, id, execID string) (*bayapi.ExecutionHistoryEntry, error) {
	if _, err := s.ownedSandbox(ctx, s.store, owner, id); err != nil {
		return nil, err
	}
	e, err := s.ownedExecution(ctx, s.store, owner, id, execID)
	if err != nil {
		return nil, err
	}
	out := ExecutionEntry(e)
	return &out, nil
}

// AnnotateExecution sets description, tags (normalised; empty -> null) and notes; nil fields
// are unchanged.
func (s *Service) AnnotateExecution(ctx context.Context, owner, id, execID string, desc, tags, notes *string) (*bayapi.ExecutionHistoryEntry, error) {
	var out bayapi.ExecutionHistoryEntry
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		if _, err := s.ownedSandbox(ctx, tx, owner, id); err != nil {
			return err
		}
		e, err := s.ownedExecution(ctx, tx, owner, id, execID)
		if err != nil {
			return err
		}
		if desc != nil {
			e.Description = desc
		}
		if tags != nil {
			e.Tags = NormalizeTags(tags)
		}
		if notes != nil {
			e.Notes = notes
		}
		if err := tx.UpdateExecution(ctx, e); err != nil {
			return err
		}
		out = ExecutionEntry(e)
		return nil
	})
	if err != nil {
		return nil, classify(err, "Failed to annotate execution")
	}
	return &out, nil
}
