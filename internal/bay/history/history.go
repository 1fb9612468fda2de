// Package history is bay's execution-history service: the owner's record of the python, shell
// and browser calls made in a sandbox (the capability service writes the rows), read and
// annotated here. It answers domain values; the HTTP layer renders them.
//
// Every error returned is a classified *bay.Error (or wraps one); messages are safe for
// clients and causes are logged.
package history

import (
	"context"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Service reads and annotates execution history. Create it with New.
type Service struct {
	store bay.Store
}

// New returns a service over store.
func New(store bay.Store) *Service { return &Service{store: store} }

// Params filter List (validated by the caller: exec type, limit 1..500, offset).
type Params struct {
	ExecType       string
	SuccessOnly    bool
	Limit          int
	Offset         int
	Tags           *string
	HasNotes       *bool
	HasDescription *bool
}

// List returns the sandbox's execution history, newest first, and the total count.
func (s *Service) List(ctx context.Context, owner, id string, p Params) (*bay.ExecutionPage, error) {
	if _, err := bay.OwnedSandbox(ctx, s.store, owner, id); err != nil {
		return nil, err
	}
	q := bay.ExecutionQuery{
		Owner: owner, SandboxID: id, ExecType: p.ExecType, SuccessOnly: p.SuccessOnly,
		HasNotes: p.HasNotes, HasDescription: p.HasDescription, Limit: p.Limit, Offset: p.Offset,
	}
	if t := bay.NormalizeTags(p.Tags); t != nil {
		q.Tags = strings.Split(*t, ",")
	}
	rows, total, err := s.store.ListExecutions(ctx, q)
	if err != nil {
		return nil, bay.Internal("Failed to list execution history", err)
	}
	return &bay.ExecutionPage{Entries: rows, Total: total}, nil
}

// Last returns the newest entry (of execType if set), or not_found
// "No execution history found".
func (s *Service) Last(ctx context.Context, owner, id, execType string) (*bay.Execution, error) {
	if _, err := bay.OwnedSandbox(ctx, s.store, owner, id); err != nil {
		return nil, err
	}
	rows, _, err := s.store.ListExecutions(ctx, bay.ExecutionQuery{Owner: owner, SandboxID: id, ExecType: execType, Limit: 1})
	if err != nil {
		return nil, bay.Internal("Failed to list execution history", err)
	}
	if len(rows) == 0 {
		return nil, bay.Errorf(bay.CodeNotFound, "No execution history found")
	}
	return rows[0], nil
}

func owned(ctx context.Context, r bay.Reader, owner, id, execID string) (*bay.Execution, error) {
	if _, err := bay.OwnedSandbox(ctx, r, owner, id); err != nil {
		return nil, err
	}
	e, err := r.GetExecution(ctx, execID)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, bay.Errorf(bay.CodeNotFound, "Execution not found: %s", execID)
		}
		return nil, bay.Internal("Failed to load execution", err)
	}
	if e.Owner != owner || e.SandboxID != id {
		return nil, bay.Errorf(bay.CodeNotFound, "Execution not found: %s", execID)
	}
	return e, nil
}

// Get returns one entry of this sandbox and owner, or not_found.
func (s *Service) Get(ctx context.Context, owner, id, execID string) (*bay.Execution, error) {
	return owned(ctx, s.store, owner, id, execID)
}

// Annotate sets description, tags (normalised; empty -> null) and notes; nil fields are
// unchanged.
func (s *Service) Annotate(ctx context.Context, owner, id, execID string, desc, tags, notes *string) (*bay.Execution, error) {
	var out *bay.Execution
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		e, err := owned(ctx, tx, owner, id, execID)
		if err != nil {
			return err
		}
		if desc != nil {
			e.Description = desc
		}
		if tags != nil {
			e.Tags = bay.NormalizeTags(tags)
		}
		if notes != nil {
			e.Notes = notes
		}
		if err := tx.UpdateExecution(ctx, e); err != nil {
			return err
		}
		out = e
		return nil
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to annotate execution")
	}
	return out, nil
}
