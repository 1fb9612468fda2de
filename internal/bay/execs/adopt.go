package execs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// DefaultAdoptInterval is how often RunAdoption looks for the open execs of gone bays.
const DefaultAdoptInterval = time.Minute

// Adoption: bay instance ids come and go (on Kubernetes each replica's is its Pod's name), and
// Reconcile only finishes what a previous run of this instance id left open. When a bay
// instance of the same deployment goes away for good, a live one adopts its open execs: the
// instance counts as gone when its heartbeat (internal/bay/lease writes it with the instance
// lease) is at least Config.GoneAfter old, the rule internal/bay/gc adopts orphan containers by.
// Each exec is claimed in a store transaction that re-reads the heartbeat and the record and
// writes this bay's instance id into it only while the record still names the gone instance and
// is open (compare-and-set: write transactions are serialised across the bays of a database),
// so one bay adopts it, once. From then on it is this bay's exec, taken up like Reconcile does,
// and a bay that comes back under the gone id leaves it alone. A live bay's execs are never
// claimed (its heartbeat is fresh), and what another deployment made is never seen: its records
// are in its own database and its containers carry its own bay.deployment label.

// adopts reports whether this bay adopts the execs of gone bays.
func (s *Service) adopts() bool { return s.cfg.GoneAfter > 0 && s.cfg.Deployment != "" }

// RunAdoption adopts at once and then every AdoptInterval until ctx ends, and returns nil.
// Failures are logged and retried at the next pass. Without a deployment id or GoneAfter it
// returns at once.
func (s *Service) RunAdoption(ctx context.Context) error {
	if !s.adopts() {
		return nil
	}
	t := time.NewTicker(s.cfg.AdoptInterval)
	defer t.Stop()
	for {
		if err := s.Adopt(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "adopting the execs of gone bays", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Adopt takes over the open execs of the bay instances of this deployment that are gone, and
// removes their exec containers whose exec is over or unknown. An adopted exec whose container
// exists is waited for (a queued one's start is recorded) and finalised as usual; one that never
// started is queued again here unless it names env variables (their values are never stored);
// otherwise it ends lost, saying which bay went away. The exec's files must be in this bay's
// workspace (bays sharing a database share execs.workspace_root): an exec this bay cannot see
// ends lost, and its container is removed. It returns every failure, joined; an exec whose
// container could not be inspected is left for the next pass.
func (s *Service) Adopt(ctx context.Context) error {
	if !s.adopts() {
		return nil
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return nil
	}
	gone, err := s.goneInstances(ctx)
	if err != nil || len(gone) == 0 {
		return err
	}
	open, err := s.openRecords(ctx)
	if err != nil {
		return fmt.Errorf("adopt execs: %w", err)
	}
	var errs []error
	byBay := map[string][]*bay.ExecRecord{}
	exists := map[string]bool{}
	for _, rec := range open {
		if !gone[rec.BayInstance] {
			continue
		}
		ok, err := s.containerExists(ctx, rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("adopt exec %s: %w", rec.ID, err))
			continue
		}
		exists[rec.ID] = ok
		byBay[rec.BayInstance] = append(byBay[rec.BayInstance], rec)
	}
	var adopted []*bay.ExecRecord
	from := map[string]string{} // exec id -> the gone bay instance it was claimed from
	for _, id := range slices.Sorted(maps.Keys(byBay)) {
		claimed, err := s.claim(ctx, id, byBay[id], exists)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(claimed) > 0 {
			s.log.InfoContext(ctx, "adopting the open execs of a gone bay", "bay_instance", id, "execs", len(claimed))
		}
		for _, rec := range claimed {
			from[rec.ID] = id
		}
		adopted = append(adopted, claimed...)
	}
	// Oldest first, whichever bay they were claimed from: the queue keeps the admission order.
	slices.SortStableFunc(adopted, func(a, b *bay.ExecRecord) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for _, rec := range adopted {
		cause := fmt.Sprintf("bay instance %s went away", from[rec.ID])
		if !s.cfg.Workspace.Holds(rec.Owner, rec.ProjectID, rec.ID) {
			s.lostElsewhere(ctx, rec, exists[rec.ID], cause)
			continue
		}
		s.resume(ctx, rec, exists[rec.ID], cause)
	}
	err = s.sweep(ctx, map[string]string{bay.LabelManaged: "true", bay.LabelDeployment: s.cfg.Deployment},
		func(id string) bool { return gone[id] })
	return errors.Join(append(errs, err)...)
}

// goneInstances returns the ids of the bay instances, other than this one, whose heartbeat is
// at least GoneAfter old.
func (s *Service) goneInstances(ctx context.Context) (map[string]bool, error) {
	beats, err := s.store.ListBayInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("adopt execs: list bay instances: %w", err)
	}
	now := s.clock.Now().UTC()
	gone := map[string]bool{}
	for _, b := range beats {
		if b.ID != s.cfg.InstanceID && b.Gone(now, s.cfg.GoneAfter) {
			gone[b.ID] = true
		}
	}
	return gone, nil
}

// claim makes the open execs cands of gone bay instance from this bay's, in one transaction
// that checks again that from is gone and that each record still names it and is open (another
// bay may have adopted it meanwhile, or from come back); a record whose container exists
// (exists) and that never recorded its start is marked running. It returns the records claimed.
func (s *Service) claim(ctx context.Context, from string, cands []*bay.ExecRecord, exists map[string]bool) ([]*bay.ExecRecord, error) {
	var claimed []*bay.ExecRecord
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		claimed = nil
		beats, err := tx.ListBayInstances(ctx)
		if err != nil {
			return fmt.Errorf("list bay instances: %w", err)
		}
		now := s.clock.Now().UTC()
		if i := slices.IndexFunc(beats, func(b *bay.BayInstance) bool { return b.ID == from }); i < 0 || !beats[i].Gone(now, s.cfg.GoneAfter) {
			return nil
		}
		for _, c := range cands {
			rec, err := tx.GetExecRecord(ctx, c.ID)
			if bay.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("get exec %s: %w", c.ID, err)
			}
			if rec.BayInstance != from || rec.Status.Final() {
				continue
			}
			rec.BayInstance = s.cfg.InstanceID
			if exists[rec.ID] && rec.StartedAt == nil {
				rec.Status, rec.StartedAt = bay.ExecRunning, &now
			}
			if err := tx.UpdateExecRecord(ctx, rec); err != nil {
				return fmt.Errorf("claim exec %s: %w", rec.ID, err)
			}
			claimed = append(claimed, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("adopt the execs of bay instance %s: %w", from, err)
	}
	return claimed, nil
}

// lostElsewhere ends an adopted exec whose files this bay's workspace does not hold (the gone
// bay's execs.workspace_root is another directory): its output could be neither collected nor
// served here, so its container, if any, is removed and it ends lost.
func (s *Service) lostElsewhere(ctx context.Context, rec *bay.ExecRecord, exists bool, cause string) {
	if exists {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := s.drv.DestroyInstance(rctx, rec.Instance)
		cancel()
		if err != nil {
			s.log.ErrorContext(ctx, "exec: remove the container", "exec_id", rec.ID, "err", err)
		}
	}
	rec.Status = bay.ExecLost
	rec.ErrorReason = cause + ", and this bay's workspace does not hold the exec's files (bays sharing a database must share execs.workspace_root)"
	s.log.WarnContext(ctx, "exec lost", "exec_id", rec.ID, "reason", rec.ErrorReason)
	s.finish(ctx, rec, nil)
}
