package metrics

import (
	"context"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Store returns s with every call timed in bay_store_call_duration_seconds (reads inside a
// transaction too; method Tx times the whole transaction). Through it, session transitions
// out of starting feed bay_session_start_duration_seconds and warm claims
// bay_warmpool_claims_total.
func (m *Metrics) Store(s bay.Store) bay.Store {
	return &timedStore{timedReader: timedReader{m: m, r: s}, s: s}
}

var (
	_ bay.Store = (*timedStore)(nil)
	_ bay.Tx    = (*timedTx)(nil)
)

type timedStore struct {
	timedReader
	s bay.Store
}

func (t *timedStore) Tx(ctx context.Context, fn func(tx bay.Tx) error) (err error) {
	defer func(b time.Time) { t.observe("Tx", b, err) }(time.Now())
	return t.s.Tx(ctx, func(tx bay.Tx) error {
		return fn(&timedTx{timedReader: timedReader{m: t.m, r: tx}, tx: tx})
	})
}

func (t *timedStore) Close() error { return t.s.Close() }

type timedReader struct {
	m *Metrics
	r bay.Reader
}

func (t *timedReader) observe(method string, began time.Time, err error) {
	t.m.storeDuration.WithLabelValues(method, callOutcome(err)).Observe(since(began))
}

func (t *timedReader) GetSandbox(ctx context.Context, id string) (v *bay.Sandbox, err error) {
	defer func(b time.Time) { t.observe("GetSandbox", b, err) }(time.Now())
	return t.r.GetSandbox(ctx, id)
}

func (t *timedReader) ListSandboxes(ctx context.Context, q bay.SandboxQuery) (v []*bay.Sandbox, err error) {
	defer func(b time.Time) { t.observe("ListSandboxes", b, err) }(time.Now())
	return t.r.ListSandboxes(ctx, q)
}

func (t *timedReader) CountSandboxes(ctx context.Context, q bay.SandboxQuery) (n int, err error) {
	defer func(b time.Time) { t.observe("CountSandboxes", b, err) }(time.Now())
	return t.r.CountSandboxes(ctx, q)
}

func (t *timedReader) GetSession(ctx context.Context, id string) (v *bay.Session, err error) {
	defer func(b time.Time) { t.observe("GetSession", b, err) }(time.Now())
	return t.r.GetSession(ctx, id)
}

func (t *timedReader) ListSessions(ctx context.Context, q bay.SessionQuery) (v []*bay.Session, err error) {
	defer func(b time.Time) { t.observe("ListSessions", b, err) }(time.Now())
	return t.r.ListSessions(ctx, q)
}

func (t *timedReader) GetCargo(ctx context.Context, id string) (v *bay.Cargo, err error) {
	defer func(b time.Time) { t.observe("GetCargo", b, err) }(time.Now())
	return t.r.GetCargo(ctx, id)
}

func (t *timedReader) ListCargos(ctx context.Context, q bay.CargoQuery) (v []*bay.Cargo, err error) {
	defer func(b time.Time) { t.observe("ListCargos", b, err) }(time.Now())
	return t.r.ListCargos(ctx, q)
}

func (t *timedReader) GetExecution(ctx context.Context, id string) (v *bay.Execution, err error) {
	defer func(b time.Time) { t.observe("GetExecution", b, err) }(time.Now())
	return t.r.GetExecution(ctx, id)
}

func (t *timedReader) ListExecutions(ctx context.Context, q bay.ExecutionQuery) (v []*bay.Execution, n int, err error) {
	defer func(b time.Time) { t.observe("ListExecutions", b, err) }(time.Now())
	return t.r.ListExecutions(ctx, q)
}

func (t *timedReader) GetIdempotency(ctx context.Context, owner, key string) (v *bay.IdempotencyRecord, err error) {
	defer func(b time.Time) { t.observe("GetIdempotency", b, err) }(time.Now())
	return t.r.GetIdempotency(ctx, owner, key)
}

func (t *timedReader) ListAPIKeys(ctx context.Context) (v []*bay.APIKey, err error) {
	defer func(b time.Time) { t.observe("ListAPIKeys", b, err) }(time.Now())
	return t.r.ListAPIKeys(ctx)
}

type timedTx struct {
	timedReader
	tx bay.Tx
}

func (t *timedTx) InsertSandbox(ctx context.Context, s *bay.Sandbox) (err error) {
	defer func(b time.Time) { t.observe("InsertSandbox", b, err) }(time.Now())
	return t.tx.InsertSandbox(ctx, s)
}

func (t *timedTx) UpdateSandbox(ctx context.Context, s *bay.Sandbox) (err error) {
	defer func(b time.Time) { t.observe("UpdateSandbox", b, err) }(time.Now())
	return t.tx.UpdateSandbox(ctx, s)
}

func (t *timedTx) InsertSession(ctx context.Context, s *bay.Session) (err error) {
	defer func(b time.Time) { t.observe("InsertSession", b, err) }(time.Now())
	return t.tx.InsertSession(ctx, s)
}

// UpdateSession also observes a session leaving starting for running or failed: the start
// latency is measured from StartedAt, which the lifecycle service sets on entering starting.
func (t *timedTx) UpdateSession(ctx context.Context, s *bay.Session) (err error) {
	var was bay.SessionState
	if s.StartedAt != nil && (s.ObservedState == bay.SessionRunning || s.ObservedState == bay.SessionFailed) {
		// The previous state, read untimed so that the metric of reads stays the service's.
		if old, gerr := t.tx.GetSession(ctx, s.ID); gerr == nil {
			was = old.ObservedState
		}
	}
	began := time.Now()
	err = t.tx.UpdateSession(ctx, s)
	t.observe("UpdateSession", began, err)
	if err == nil && (was == bay.SessionStarting || was == bay.SessionPending) && s.ObservedState != was {
		outcome := OutcomeOK
		if s.ObservedState == bay.SessionFailed {
			outcome = "failed"
		}
		t.m.sessionStart.WithLabelValues(s.ProfileID, outcome).Observe(max(0, time.Since(*s.StartedAt).Seconds()))
	}
	return err
}

func (t *timedTx) DeleteSession(ctx context.Context, id string) (err error) {
	defer func(b time.Time) { t.observe("DeleteSession", b, err) }(time.Now())
	return t.tx.DeleteSession(ctx, id)
}

func (t *timedTx) InsertCargo(ctx context.Context, c *bay.Cargo) (err error) {
	defer func(b time.Time) { t.observe("InsertCargo", b, err) }(time.Now())
	return t.tx.InsertCargo(ctx, c)
}

func (t *timedTx) UpdateCargo(ctx context.Context, c *bay.Cargo) (err error) {
	defer func(b time.Time) { t.observe("UpdateCargo", b, err) }(time.Now())
	return t.tx.UpdateCargo(ctx, c)
}

func (t *timedTx) DeleteCargo(ctx context.Context, id string) (err error) {
	defer func(b time.Time) { t.observe("DeleteCargo", b, err) }(time.Now())
	return t.tx.DeleteCargo(ctx, id)
}

func (t *timedTx) InsertExecution(ctx context.Context, e *bay.Execution) (err error) {
	defer func(b time.Time) { t.observe("InsertExecution", b, err) }(time.Now())
	return t.tx.InsertExecution(ctx, e)
}

func (t *timedTx) UpdateExecution(ctx context.Context, e *bay.Execution) (err error) {
	defer func(b time.Time) { t.observe("UpdateExecution", b, err) }(time.Now())
	return t.tx.UpdateExecution(ctx, e)
}

func (t *timedTx) PutIdempotency(ctx context.Context, r *bay.IdempotencyRecord) (err error) {
	defer func(b time.Time) { t.observe("PutIdempotency", b, err) }(time.Now())
	return t.tx.PutIdempotency(ctx, r)
}

func (t *timedTx) DeleteIdempotency(ctx context.Context, owner, key string) (err error) {
	defer func(b time.Time) { t.observe("DeleteIdempotency", b, err) }(time.Now())
	return t.tx.DeleteIdempotency(ctx, owner, key)
}

func (t *timedTx) DeleteExpiredIdempotency(ctx context.Context, now time.Time) (n int, err error) {
	defer func(b time.Time) { t.observe("DeleteExpiredIdempotency", b, err) }(time.Now())
	return t.tx.DeleteExpiredIdempotency(ctx, now)
}

func (t *timedReader) ListAllAPIKeys(ctx context.Context) (v []*bay.APIKey, err error) {
	defer func(b time.Time) { t.observe("ListAllAPIKeys", b, err) }(time.Now())
	return t.r.ListAllAPIKeys(ctx)
}

func (t *timedTx) RevokeAPIKey(ctx context.Context, id string, at time.Time) (err error) {
	defer func(b time.Time) { t.observe("RevokeAPIKey", b, err) }(time.Now())
	return t.tx.RevokeAPIKey(ctx, id, at)
}

func (t *timedTx) TouchAPIKey(ctx context.Context, id string, at time.Time) (err error) {
	defer func(b time.Time) { t.observe("TouchAPIKey", b, err) }(time.Now())
	return t.tx.TouchAPIKey(ctx, id, at)
}

func (t *timedTx) InsertAPIKey(ctx context.Context, k *bay.APIKey) (err error) {
	defer func(b time.Time) { t.observe("InsertAPIKey", b, err) }(time.Now())
	return t.tx.InsertAPIKey(ctx, k)
}

// ClaimWarmSandbox also counts the claim as a warm-pool hit or miss of its profile.
func (t *timedTx) ClaimWarmSandbox(ctx context.Context, c bay.WarmClaim) (sb *bay.Sandbox, err error) {
	began := time.Now()
	sb, err = t.tx.ClaimWarmSandbox(ctx, c)
	t.observe("ClaimWarmSandbox", began, err)
	switch {
	case err == nil:
		t.m.warmClaims.WithLabelValues(c.ProfileID, "hit").Inc()
	case bay.IsNotFound(err):
		t.m.warmClaims.WithLabelValues(c.ProfileID, "miss").Inc()
	}
	return sb, err
}

func (t *timedTx) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (ok bool, err error) {
	defer func(b time.Time) { t.observe("AcquireLease", b, err) }(time.Now())
	return t.tx.AcquireLease(ctx, name, holder, now, ttl)
}

func (t *timedTx) ReleaseLease(ctx context.Context, name, holder string) (err error) {
	defer func(b time.Time) { t.observe("ReleaseLease", b, err) }(time.Now())
	return t.tx.ReleaseLease(ctx, name, holder)
}

func (t *timedReader) GetSkill(ctx context.Context, name string) (v0 *bay.Skill, err error) {
	defer func(b time.Time) { t.observe("GetSkill", b, err) }(time.Now())
	return t.r.GetSkill(ctx, name)
}

func (t *timedReader) ListSkills(ctx context.Context) (v0 []*bay.Skill, err error) {
	defer func(b time.Time) { t.observe("ListSkills", b, err) }(time.Now())
	return t.r.ListSkills(ctx)
}

func (t *timedReader) GetSkillVersion(ctx context.Context, name, version string) (v0 *bay.Skill, err error) {
	defer func(b time.Time) { t.observe("GetSkillVersion", b, err) }(time.Now())
	return t.r.GetSkillVersion(ctx, name, version)
}

func (t *timedReader) ListSandboxSkills(ctx context.Context, sandboxID string) (v0 []string, err error) {
	defer func(b time.Time) { t.observe("ListSandboxSkills", b, err) }(time.Now())
	return t.r.ListSandboxSkills(ctx, sandboxID)
}

func (t *timedReader) GetExecRecord(ctx context.Context, id string) (v0 *bay.ExecRecord, err error) {
	defer func(b time.Time) { t.observe("GetExecRecord", b, err) }(time.Now())
	return t.r.GetExecRecord(ctx, id)
}

func (t *timedReader) ListExecRecords(ctx context.Context, q bay.ExecQuery) (v0 []*bay.ExecRecord, v1 int, err error) {
	defer func(b time.Time) { t.observe("ListExecRecords", b, err) }(time.Now())
	return t.r.ListExecRecords(ctx, q)
}

func (t *timedReader) GetJob(ctx context.Context, id string) (v0 *bay.Job, err error) {
	defer func(b time.Time) { t.observe("GetJob", b, err) }(time.Now())
	return t.r.GetJob(ctx, id)
}

func (t *timedReader) ListJobs(ctx context.Context, q bay.JobQuery) (v0 []*bay.Job, v1 int, err error) {
	defer func(b time.Time) { t.observe("ListJobs", b, err) }(time.Now())
	return t.r.ListJobs(ctx, q)
}

func (t *timedReader) GetReuseKey(ctx context.Context, owner, key string) (v0 string, err error) {
	defer func(b time.Time) { t.observe("GetReuseKey", b, err) }(time.Now())
	return t.r.GetReuseKey(ctx, owner, key)
}

func (t *timedTx) PutSkill(ctx context.Context, s *bay.Skill, now time.Time) (v0 bool, err error) {
	defer func(b time.Time) { t.observe("PutSkill", b, err) }(time.Now())
	return t.tx.PutSkill(ctx, s, now)
}

func (t *timedTx) DeleteSkill(ctx context.Context, name string) (err error) {
	defer func(b time.Time) { t.observe("DeleteSkill", b, err) }(time.Now())
	return t.tx.DeleteSkill(ctx, name)
}

func (t *timedTx) SetSandboxSkills(ctx context.Context, sandboxID string, names []string) (err error) {
	defer func(b time.Time) { t.observe("SetSandboxSkills", b, err) }(time.Now())
	return t.tx.SetSandboxSkills(ctx, sandboxID, names)
}

func (t *timedTx) InsertExecRecord(ctx context.Context, e *bay.ExecRecord) (err error) {
	defer func(b time.Time) { t.observe("InsertExecRecord", b, err) }(time.Now())
	return t.tx.InsertExecRecord(ctx, e)
}

func (t *timedTx) UpdateExecRecord(ctx context.Context, e *bay.ExecRecord) (err error) {
	defer func(b time.Time) { t.observe("UpdateExecRecord", b, err) }(time.Now())
	return t.tx.UpdateExecRecord(ctx, e)
}

func (t *timedTx) InsertJob(ctx context.Context, j *bay.Job) (err error) {
	defer func(b time.Time) { t.observe("InsertJob", b, err) }(time.Now())
	return t.tx.InsertJob(ctx, j)
}

func (t *timedTx) UpdateJob(ctx context.Context, j *bay.Job) (err error) {
	defer func(b time.Time) { t.observe("UpdateJob", b, err) }(time.Now())
	return t.tx.UpdateJob(ctx, j)
}

func (t *timedTx) InsertReuseKey(ctx context.Context, owner, key, sandboxID string) (err error) {
	defer func(b time.Time) { t.observe("InsertReuseKey", b, err) }(time.Now())
	return t.tx.InsertReuseKey(ctx, owner, key, sandboxID)
}

func (t *timedTx) DeleteReuseKey(ctx context.Context, owner, key, sandboxID string) (err error) {
	defer func(b time.Time) { t.observe("DeleteReuseKey", b, err) }(time.Now())
	return t.tx.DeleteReuseKey(ctx, owner, key, sandboxID)
}

func (t *timedReader) DeploymentID(ctx context.Context) (v0 string, err error) {
	defer func(b time.Time) { t.observe("DeploymentID", b, err) }(time.Now())
	return t.r.DeploymentID(ctx)
}

func (t *timedReader) ListBayInstances(ctx context.Context) (v0 []*bay.BayInstance, err error) {
	defer func(b time.Time) { t.observe("ListBayInstances", b, err) }(time.Now())
	return t.r.ListBayInstances(ctx)
}

func (t *timedTx) HeartbeatBayInstance(ctx context.Context, id, bootID string, now time.Time) (err error) {
	defer func(b time.Time) { t.observe("HeartbeatBayInstance", b, err) }(time.Now())
	return t.tx.HeartbeatBayInstance(ctx, id, bootID, now)
}

func (t *timedTx) DeleteBayInstance(ctx context.Context, id string, before time.Time) (v0 bool, err error) {
	defer func(b time.Time) { t.observe("DeleteBayInstance", b, err) }(time.Now())
	return t.tx.DeleteBayInstance(ctx, id, before)
}

func (t *timedReader) GetSkillArchive(ctx context.Context, version string, maxBytes int64) (v0 *bay.SkillArchive, err error) {
	defer func(b time.Time) { t.observe("GetSkillArchive", b, err) }(time.Now())
	return t.r.GetSkillArchive(ctx, version, maxBytes)
}

func (t *timedTx) PutSkillArchive(ctx context.Context, a *bay.SkillArchive) (err error) {
	defer func(b time.Time) { t.observe("PutSkillArchive", b, err) }(time.Now())
	return t.tx.PutSkillArchive(ctx, a)
}
