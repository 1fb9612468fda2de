package execs

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Reconcile finishes what a previous run of this bay (same instance id) left open. An exec
// still queued never started: it is queued again, in the order it was admitted (its record
// and inputs are kept), unless it names env variables, whose values are never stored; then it
// ends lost. A queued one whose container exists after all (bay died between creating it and
// recording the start) did start, and is waited for like a running one. A running one whose
// container still exists is waited for again (its output is read back from the start, its
// timeout counts from its start) and finalised as usual; one whose container is gone ends
// lost. Call it once at boot, before serving. What another bay instance left when it went away
// for good is Adopt's (adopt.go).
func (s *Service) Reconcile(ctx context.Context) error {
	open, err := s.openRecords(ctx)
	if err != nil {
		return fmt.Errorf("reconcile execs: %w", err)
	}
	for _, rec := range open {
		if rec.BayInstance != s.cfg.InstanceID {
			continue
		}
		s.mu.Lock()
		_, mine := s.jobs[rec.ID]
		s.mu.Unlock()
		if mine {
			continue // admitted by this process
		}
		exists, err := s.containerExists(ctx, rec)
		if err != nil {
			return fmt.Errorf("reconcile exec %s: %w", rec.ID, err)
		}
		if exists && rec.StartedAt == nil {
			now := s.clock.Now().UTC()
			rec.Status, rec.StartedAt = bay.ExecRunning, &now
			if err := s.store.Tx(ctx, func(tx bay.Tx) error { return update(ctx, tx, rec) }); err != nil {
				return fmt.Errorf("reconcile exec %s: record its start: %w", rec.ID, err)
			}
		}
		s.resume(ctx, rec, exists, "bay restarted")
	}
	return s.sweep(ctx, map[string]string{bay.LabelManaged: "true", bay.LabelInstanceID: s.cfg.InstanceID}, nil)
}

// openRecords returns the queued and running records, oldest first, so that a queue refilled
// from them keeps the admission order.
func (s *Service) openRecords(ctx context.Context) ([]*bay.ExecRecord, error) {
	open, _, err := s.store.ListExecRecords(ctx, bay.ExecQuery{Statuses: []bay.ExecStatus{bay.ExecQueued, bay.ExecRunning}})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(open, func(a, b *bay.ExecRecord) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return open, nil
}

// containerExists reports whether the exec's container is on the engine.
func (s *Service) containerExists(ctx context.Context, rec *bay.ExecRecord) (bool, error) {
	_, err := s.drv.InspectInstance(ctx, rec.Instance)
	if err != nil && !bay.IsNotFound(err) {
		return false, err
	}
	return err == nil, nil
}

// resume takes up an open exec that a bay which stopped left (this instance's previous run, or
// a gone one whose exec this bay adopted), whose record names this bay and, when its container
// exists, records its start: a container is waited for; an exec that never started is queued
// again unless it names env variables; otherwise it ends lost. cause says what stopped the
// bay, for the log and the lost exec's reason ("bay restarted"). While the service stops, the
// exec is left as recorded for this instance's next boot.
func (s *Service) resume(ctx context.Context, rec *bay.ExecRecord, exists bool, cause string) {
	switch {
	case exists:
		s.mu.Lock()
		if !s.stopped {
			s.log.InfoContext(ctx, "exec re-attached", "exec_id", rec.ID, "cause", cause)
			s.launchLocked(&job{rec: rec, reattach: true, done: make(chan struct{})})
		}
		s.mu.Unlock()
		return
	case rec.StartedAt == nil && len(rec.EnvKeys) == 0:
		s.log.InfoContext(ctx, "exec queued again", "exec_id", rec.ID, "cause", cause)
		j := &job{rec: rec, done: make(chan struct{})}
		s.mu.Lock()
		s.queued++ // admitted before: may exceed queue_size
		s.jobs[rec.ID] = j
		s.mu.Unlock()
		s.dispatch(j)
		return
	case rec.StartedAt == nil:
		rec.ErrorReason = cause + " before the exec started, and its env values are never stored"
	default:
		rec.ErrorReason = cause + " and the exec's container was gone"
	}
	rec.Status = bay.ExecLost
	s.log.WarnContext(ctx, "exec lost", "exec_id", rec.ID, "reason", rec.ErrorReason)
	s.finish(ctx, rec, nil)
}

// sweep removes the exec containers labelled with labels, of the bay instances of picks (nil:
// all), whose exec is over or unknown: a container whose create completed after a bay recorded
// the exec's end, or gave up on it.
func (s *Service) sweep(ctx context.Context, labels map[string]string, picks func(bayInstance string) bool) error {
	list, err := s.drv.ListInstances(ctx, labels)
	if err != nil {
		return fmt.Errorf("sweep exec containers: list containers: %w", err)
	}
	for _, inst := range list {
		id, ok := strings.CutPrefix(inst.Name, bay.ExecInstancePrefix)
		if !ok || inst.Labels[LabelExecID] != id || (picks != nil && !picks(inst.Labels[bay.LabelInstanceID])) {
			continue
		}
		rec, err := s.store.GetExecRecord(ctx, id)
		if err != nil && !bay.IsNotFound(err) {
			return fmt.Errorf("sweep exec %s: %w", id, err)
		}
		if err == nil && !rec.Status.Final() {
			continue
		}
		s.log.WarnContext(ctx, "removing the container of an exec that is over", "exec_id", id, "bay_instance", inst.Labels[bay.LabelInstanceID])
		if err := s.drv.DestroyInstance(ctx, inst.Name); err != nil {
			return fmt.Errorf("sweep exec %s: remove its container: %w", id, err)
		}
	}
	return nil
}

// Health is what GET /v1/sandbox/health reports.
type Health struct {
	Status        string `json:"status"` // ok | degraded
	RuntimeMode   string `json:"runtime_mode"`
	OS            string `json:"os"`
	WorkspaceRoot string `json:"workspace_root_native"`
	MountRoot     string `json:"workspace_root_mount"`
	Writable      bool   `json:"workspace_writable"`
	WritableError string `json:"workspace_error,omitempty"`
	Engine        string `json:"engine"` // "docker" (Engine API), or the driver's name
	EngineVersion string `json:"engine_version,omitempty"`
	EngineContext string `json:"engine_context,omitempty"`
	EngineError   string `json:"engine_error,omitempty"`
	Image         string `json:"image"`
	MaxConcurrent int    `json:"max_concurrent_execs"`
	Running       int    `json:"running"`
	Queued        int    `json:"queued"`
}

// EngineInfo is what a driver may tell about its platform (the Docker driver does).
type EngineInfo interface {
	EngineInfo(ctx context.Context) (name, version, context string, err error)
}

// Health checks the engine and the workspace.
func (s *Service) Health(ctx context.Context) Health {
	h := Health{Status: "ok", RuntimeMode: string(s.cfg.Runtime), OS: runtime.GOOS,
		WorkspaceRoot: s.cfg.Workspace.Paths.Native, MountRoot: s.cfg.Workspace.Paths.Mount,
		Image: s.cfg.Image, MaxConcurrent: s.cfg.MaxConcurrent, Engine: "unknown"}
	if err := s.cfg.Workspace.Writable(); err != nil {
		h.Status, h.WritableError = "degraded", err.Error()
	} else {
		h.Writable = true
	}
	if ei, ok := bay.DriverPort[EngineInfo](s.drv); ok { // through decorators (metrics)
		name, version, ectx, err := ei.EngineInfo(ctx)
		h.Engine, h.EngineVersion, h.EngineContext = name, version, ectx
		if err != nil {
			h.Status, h.EngineError = "degraded", "the engine does not answer"
		}
	} else if err := s.drv.Ping(ctx); err != nil {
		h.Status, h.EngineError = "degraded", "the engine does not answer"
	}
	s.mu.Lock()
	h.Running, h.Queued = s.running, s.queued
	s.mu.Unlock()
	return h
}

// Artifacts returns the manifest of one of the owner's execs.
func (s *Service) Artifacts(ctx context.Context, owner, id string) (*bay.ExecRecord, Manifest, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, Manifest{}, err
	}
	m, err := s.cfg.Workspace.ReadManifest(rec.Owner, rec.ProjectID, rec.ID)
	return rec, m, err
}

// OpenArtifact opens one file of the exec's artifact directory for download; a file larger
// than the exec's max_output_bytes is refused (payload_too_large).
func (s *Service) OpenArtifact(ctx context.Context, owner, id, p string) (*ArtifactFile, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	clean, err := CleanInputPath(p)
	if err != nil {
		return nil, bay.Errorf(bay.CodeInvalidPath, "artifact path %q: %v", p, err)
	}
	f, size, err := s.cfg.Workspace.OpenArtifact(rec.Owner, rec.ProjectID, rec.ID, clean)
	if err != nil {
		return nil, err
	}
	if size > rec.Policy.MaxOutputBytes && clean != StdoutFile && clean != StderrFile {
		f.Close()
		return nil, bay.Errorf(bay.CodePayloadTooLarge, "artifact %s is %d bytes, more than max_output_bytes (%d)", clean, size, rec.Policy.MaxOutputBytes)
	}
	return &ArtifactFile{File: f, Size: size, Name: clean}, nil
}
