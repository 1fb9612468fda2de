package gc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// taskRun is one execution of one task: its result, the fixed now it decides with, dry-run.
type taskRun struct {
	s   *Scheduler
	res *TaskResult
	dry bool
	now time.Time
	log *slog.Logger

	// beats are the other bay instances' heartbeat rows by id, read once per task (gone).
	beats   map[string]*bay.BayInstance
	beatsOK bool
}

func (r *taskRun) fail(err error) {
	r.res.Errors = append(r.res.Errors, err.Error())
	r.log.Warn("gc action failed", "err", err)
}

func (r *taskRun) cleaned(what string, attrs ...any) {
	r.res.CleanedCount++
	r.log.Info("gc removed", append([]any{"what", what}, attrs...)...)
}

func (r *taskRun) would(what string) {
	r.res.WouldClean = append(r.res.WouldClean, what)
	r.log.Info("gc dry run: would remove", "what", what)
}

// call bounds one driver or store call.
func (r *taskRun) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.s.cfg.CallTimeout)
}

// reclaim bounds one lifecycle call.
func (r *taskRun) reclaim(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.s.cfg.ReclaimTimeout)
}

func (r *taskRun) older(t time.Time) bool { return !t.IsZero() && r.now.Sub(t) >= r.s.cfg.OrphanGrace }

// eachSandbox pages through the sandboxes matching q (ordered by id) and calls fn on each.
func (r *taskRun) eachSandbox(ctx context.Context, q bay.SandboxQuery, fn func(*bay.Sandbox)) {
	q.Limit = r.s.cfg.BatchSize
	for ctx.Err() == nil {
		cctx, cancel := r.call(ctx)
		page, err := r.s.store.ListSandboxes(cctx, q)
		cancel()
		if err != nil {
			r.fail(fmt.Errorf("list sandboxes: %w", err))
			return
		}
		for _, sb := range page {
			if ctx.Err() != nil {
				return
			}
			fn(sb)
		}
		if len(page) < q.Limit {
			return
		}
		q.AfterID = page[len(page)-1].ID
	}
}

// idleSessions reclaims the compute of sandboxes whose idle deadline passed, then destroys
// sessions left "starting" by a dead bay.
func (r *taskRun) idleSessions(ctx context.Context) {
	notWarm := false
	now := r.now
	r.eachSandbox(ctx, bay.SandboxQuery{Warm: &notWarm, IdleExpiredBefore: &now}, func(sb *bay.Sandbox) {
		pin := bay.Pin{SandboxID: sb.ID, SessionID: sb.CurrentSessionID, Version: sb.Version, Reason: bay.ReasonIdle}
		if !pin.Holds(sb, r.now) { // the store's filter and ours must agree; never act otherwise
			return
		}
		r.act(ctx, pin, "compute/"+sb.ID, r.s.lc.ReclaimCompute)
	})
	r.staleStarts(ctx, func(*bay.Session) bool { return false })
}

// staleStarts destroys sessions stuck in "starting" for longer than StaleStartAfter, or, for
// the sessions selected by dead (restart recovery), regardless of their age.
func (r *taskRun) staleStarts(ctx context.Context, dead func(*bay.Session) bool) {
	cctx, cancel := r.call(ctx)
	sessions, err := r.s.store.ListSessions(cctx, bay.SessionQuery{ObservedState: bay.SessionStarting})
	cancel()
	if err != nil {
		r.fail(fmt.Errorf("list starting sessions: %w", err))
		return
	}
	for _, sess := range sessions {
		if ctx.Err() != nil {
			return
		}
		if !dead(sess) && !sess.StaleStart(r.now, r.s.cfg.StaleStartAfter) {
			continue
		}
		cctx, cancel := r.call(ctx)
		sb, err := r.s.store.GetSandbox(cctx, sess.SandboxID)
		cancel()
		if err != nil && !bay.IsNotFound(err) {
			r.fail(fmt.Errorf("get sandbox %s: %w", sess.SandboxID, err))
			continue
		}
		pin := bay.Pin{SandboxID: sess.SandboxID, SessionID: sess.ID, Reason: bay.ReasonStaleStart}
		if sb != nil {
			pin.Version = sb.Version
		}
		if !pin.Holds(sb, r.now) {
			// Not the current session of a live sandbox: the service's delete and stop remove
			// such rows; nothing of ours to do.
			r.res.SkippedCount++
			continue
		}
		r.act(ctx, pin, "session/"+sess.ID, r.s.lc.ReclaimCompute)
	}
}

// act performs (or, in a dry run, reports) one pinned lifecycle action.
func (r *taskRun) act(ctx context.Context, pin bay.Pin, what string, fn func(context.Context, bay.Pin) (bool, error)) {
	if r.dry {
		r.would(what)
		return
	}
	cctx, cancel := r.reclaim(ctx)
	done, err := fn(cctx, pin)
	cancel()
	switch {
	case err != nil:
		r.fail(fmt.Errorf("%s %s: %w", pin.Reason, what, err))
	case done:
		r.cleaned(what, "reason", pin.Reason, "sandbox_id", pin.SandboxID)
	default:
		r.res.SkippedCount++ // revived or changed since the decision
		r.log.DebugContext(ctx, "gc action skipped: sandbox changed since the decision", "what", what, "reason", pin.Reason)
	}
}

// expiredSandboxes deletes sandboxes whose TTL passed (never revived; expiry is final).
func (r *taskRun) expiredSandboxes(ctx context.Context) {
	notWarm := false
	now := r.now
	r.eachSandbox(ctx, bay.SandboxQuery{Warm: &notWarm, ExpiredBefore: &now}, func(sb *bay.Sandbox) {
		pin := bay.Pin{SandboxID: sb.ID, SessionID: sb.CurrentSessionID, Reason: bay.ReasonTTL}
		if !pin.Holds(sb, r.now) {
			return
		}
		r.act(ctx, pin, "sandbox/"+sb.ID, r.s.lc.ReclaimSandbox)
	})
}

// orphanCargos removes managed cargos that no live sandbox owns, then labelled volumes of this
// instance that have no cargo row.
func (r *taskRun) orphanCargos(ctx context.Context) {
	managed := true
	q := bay.CargoQuery{Managed: &managed, Limit: r.s.cfg.BatchSize}
	for ctx.Err() == nil {
		cctx, cancel := r.call(ctx)
		page, err := r.s.store.ListCargos(cctx, q)
		cancel()
		if err != nil {
			r.fail(fmt.Errorf("list cargos: %w", err))
			return
		}
		for _, c := range page {
			if ctx.Err() != nil {
				return
			}
			r.orphanCargo(ctx, c)
		}
		if len(page) < q.Limit {
			break
		}
		q.AfterID = page[len(page)-1].ID
	}
	r.orphanVolumes(ctx)
	r.orphanSnapshots(ctx)
}

// orphanSnapshots has a driver that keeps copies of read-only mounts (Kubernetes: skill files
// in ConfigMaps) remove those of this deployment that no instance mounts and that nothing
// used for the grace period.
func (r *taskRun) orphanSnapshots(ctx context.Context) {
	sc, ok := bay.DriverPort[bay.SnapshotCollector](r.s.drv)
	if !ok || ctx.Err() != nil {
		return
	}
	cctx, cancel := r.call(ctx)
	names, err := sc.CollectSnapshots(cctx, r.s.cfg.Deployment, r.now.Add(-r.s.cfg.OrphanGrace), r.dry)
	cancel()
	for _, n := range names {
		if r.dry {
			r.would("snapshot/" + n)
		} else {
			r.cleaned("snapshot/"+n, "reason", bay.ReasonOrphan)
		}
	}
	if err != nil {
		r.fail(err)
	}
}

// cargoOrphaned decides, with reads through rd, whether managed cargo c belongs to no live
// sandbox: its sandbox is soft-deleted, or (older than the grace period, so a create in flight
// is not mistaken for a failure) it names no sandbox or one that was never written.
func (r *taskRun) cargoOrphaned(ctx context.Context, rd bay.Reader, c *bay.Cargo) (bool, error) {
	if !c.Managed {
		return false, nil
	}
	if c.ManagedBySandboxID == "" {
		return r.older(c.CreatedAt), nil
	}
	sb, err := rd.GetSandbox(ctx, c.ManagedBySandboxID)
	switch {
	case bay.IsNotFound(err):
		return r.older(c.CreatedAt), nil
	case err != nil:
		return false, fmt.Errorf("get sandbox %s: %w", c.ManagedBySandboxID, err)
	}
	return sb.DeletedAt != nil, nil
}

func (r *taskRun) orphanCargo(ctx context.Context, c *bay.Cargo) {
	cctx, cancel := r.call(ctx)
	orphan, err := r.cargoOrphaned(cctx, r.s.store, c)
	cancel()
	if err != nil {
		r.fail(fmt.Errorf("cargo %s: %w", c.ID, err))
		return
	}
	if !orphan {
		return
	}
	// An instance still mounting the cargo is either a live start we must not break or an
	// orphan, which orphan_container removes first; try again next cycle.
	cctx, cancel = r.call(ctx)
	users, err := r.s.drv.ListInstances(cctx, map[string]string{bay.LabelCargoID: c.ID})
	cancel()
	if err != nil {
		r.fail(fmt.Errorf("cargo %s: list instances: %w", c.ID, err))
		return
	}
	if len(users) > 0 {
		r.res.SkippedCount++
		return
	}
	what := "cargo/" + c.ID
	if r.dry {
		r.would(what)
		return
	}
	// Volume first: if its removal fails, the row stays and the next cycle retries.
	if c.DriverRef != "" {
		cctx, cancel = r.call(ctx)
		err = r.s.drv.DeleteVolume(cctx, c.DriverRef)
		cancel()
		if bay.IsConflict(err) {
			r.res.SkippedCount++ // in use after all
			return
		}
		if err != nil {
			r.fail(fmt.Errorf("cargo %s: delete volume %s: %w", c.ID, c.DriverRef, err))
			return
		}
	}
	removed := false
	cctx, cancel = r.call(ctx)
	err = r.s.store.Tx(cctx, func(tx bay.Tx) error {
		cur, err := tx.GetCargo(cctx, c.ID)
		if bay.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get cargo: %w", err)
		}
		orphan, err := r.cargoOrphaned(cctx, tx, cur)
		if err != nil || !orphan {
			return err
		}
		removed = true
		return tx.DeleteCargo(cctx, c.ID)
	})
	cancel()
	switch {
	case err != nil:
		r.fail(fmt.Errorf("cargo %s: delete row: %w", c.ID, err))
	case removed:
		r.cleaned(what, "reason", bay.ReasonOrphan, "sandbox_id", c.ManagedBySandboxID)
	default:
		r.res.SkippedCount++
	}
}

// orphanVolumes removes volumes labelled as managed by this instance, or by a bay instance of
// this deployment that is gone, whose cargo row does not exist, older than the grace period.
func (r *taskRun) orphanVolumes(ctx context.Context) {
	vols, err := listBoth(ctx, r, func(ctx context.Context, labels map[string]string) ([]bay.VolumeInfo, error) {
		return r.s.drv.ListVolumes(ctx, labels)
	}, func(v bay.VolumeInfo) string { return v.Name })
	if err != nil {
		r.fail(fmt.Errorf("list volumes: %w", err))
		return
	}
	for _, v := range vols {
		if ctx.Err() != nil {
			return
		}
		cargoID := v.Labels[bay.LabelCargoID]
		if cargoID == "" || !r.ownsOrAdopts(ctx, v.Labels) || !r.older(createdAt(v.Labels, v.CreatedAt)) {
			continue
		}
		cctx, cancel := r.call(ctx)
		_, err := r.s.store.GetCargo(cctx, cargoID)
		cancel()
		if err == nil {
			continue
		}
		if !bay.IsNotFound(err) {
			r.fail(fmt.Errorf("volume %s: get cargo %s: %w", v.Name, cargoID, err))
			continue
		}
		what := "volume/" + v.Name
		if r.dry {
			r.would(what)
			continue
		}
		cctx, cancel = r.call(ctx)
		err = r.s.drv.DeleteVolume(cctx, v.Name)
		cancel()
		switch {
		case bay.IsConflict(err):
			r.res.SkippedCount++
		case err != nil:
			r.fail(fmt.Errorf("delete volume %s: %w", v.Name, err))
		default:
			r.cleaned(what, "reason", bay.ReasonOrphan, "cargo_id", cargoID, "bay_instance", v.Labels[bay.LabelInstanceID])
		}
	}
}

// listBoth lists, through list, the objects labelled as managed by this instance and, with a
// deployment id, those labelled with it (any instance's), each once (by key).
func listBoth[T any](ctx context.Context, r *taskRun, list func(context.Context, map[string]string) ([]T, error), key func(T) string) ([]T, error) {
	selectors := []map[string]string{r.ourLabels()}
	if r.s.cfg.Deployment != "" {
		selectors = append(selectors, map[string]string{bay.LabelManaged: "true", bay.LabelDeployment: r.s.cfg.Deployment})
	}
	var out []T
	seen := map[string]bool{}
	for _, sel := range selectors {
		cctx, cancel := r.call(ctx)
		items, err := list(cctx, sel)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if k := key(it); !seen[k] {
				seen[k] = true
				out = append(out, it)
			}
		}
	}
	return out, nil
}

// ownsOrAdopts reports whether an object with these labels is this instance's, or one this
// instance adopts: labelled with this deployment by another bay instance that is gone.
func (r *taskRun) ownsOrAdopts(ctx context.Context, labels map[string]string) bool {
	id := labels[bay.LabelInstanceID]
	if id == r.s.cfg.InstanceID {
		return true
	}
	return r.s.cfg.Deployment != "" && labels[bay.LabelDeployment] == r.s.cfg.Deployment && r.gone(ctx, id)
}

// deadAfter is the heartbeat age from which another bay instance counts as gone.
func (r *taskRun) deadAfter() time.Duration { return r.s.GoneAfter() }

// gone reports whether bay instance id is another one of this deployment whose heartbeat
// lapsed: its row exists (it ran on this database) and is older than deadAfter. The rows are
// read once per task; a failed read is recorded and counts as "not gone".
func (r *taskRun) gone(ctx context.Context, id string) bool {
	if id == "" || id == r.s.cfg.InstanceID || !r.loadBeats(ctx) {
		return false
	}
	b, ok := r.beats[id]
	return ok && b.Gone(r.now, r.deadAfter())
}

// loadBeats reads the heartbeat rows once per task; it reports whether they were read (a
// failure is recorded once and leaves them unread).
func (r *taskRun) loadBeats(ctx context.Context) bool {
	if r.beats != nil {
		return r.beatsOK
	}
	r.beats = map[string]*bay.BayInstance{}
	cctx, cancel := r.call(ctx)
	rows, err := r.s.store.ListBayInstances(cctx)
	cancel()
	if err != nil {
		r.fail(fmt.Errorf("list bay instances: %w", err))
		return false
	}
	for _, b := range rows {
		r.beats[b.ID] = b
	}
	r.beatsOK = true
	return true
}

// sessionOwnership is what proves that an instance was created by a bay instance for a
// session: its name ("bay-session-<session_id>") and labels that must all be present.
var sessionOwnership = struct {
	prefix string
	labels []string
}{prefix: bay.InstancePrefix, labels: []string{bay.LabelSessionID, bay.LabelSandboxID, bay.LabelCargoID, bay.LabelInstanceID, bay.LabelManaged}}

// provablyOurs reports whether the instance was created by bay instance instanceID: its name,
// every ownership label present, bay.managed "true", bay.instance_id instanceID.
func provablyOurs(inst bay.Instance, instanceID string) bool {
	if !strings.HasPrefix(inst.Name, sessionOwnership.prefix) {
		return false
	}
	for _, l := range sessionOwnership.labels {
		if inst.Labels[l] == "" {
			return false
		}
	}
	return inst.Labels[bay.LabelManaged] == "true" && inst.Labels[bay.LabelInstanceID] == instanceID
}

// createdAt is the bay.created_at label when it parses, else the engine's time.
func createdAt(labels map[string]string, engine time.Time) time.Time {
	if v := labels[bay.LabelCreatedAt]; v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return engine
}

// leaked reports whether the instance is a leftover of a session of this bay: provably ours,
// older than the grace period, and its session unknown to the database; or adoptable: provably
// made by a bay instance of this deployment that is gone, older than the grace period, and its
// session unknown, stopped or failed (a live session row is left to the lifecycle: any bay
// reclaims it, stale starts included). A failed session lookup is recorded and counts as not
// leaked.
func (r *taskRun) leaked(ctx context.Context, inst bay.Instance) bool {
	id := inst.Labels[bay.LabelInstanceID]
	own := id == r.s.cfg.InstanceID
	if !provablyOurs(inst, id) || !r.older(createdAt(inst.Labels, inst.CreatedAt)) || !r.ownsOrAdopts(ctx, inst.Labels) {
		return false
	}
	sessionID := inst.Labels[bay.LabelSessionID]
	cctx, cancel := r.call(ctx)
	sess, err := r.s.store.GetSession(cctx, sessionID)
	cancel()
	switch {
	case bay.IsNotFound(err):
		return true
	case err != nil:
		r.fail(fmt.Errorf("instance/%s: get session %s: %w", inst.Name, sessionID, err))
		return false
	}
	return !own && (sess.ObservedState == bay.SessionStopped || sess.ObservedState == bay.SessionFailed)
}

// ourLabels selects, at the engine, the objects labelled as managed by this instance.
func (r *taskRun) ourLabels() map[string]string {
	return map[string]string{bay.LabelManaged: "true", bay.LabelInstanceID: r.s.cfg.InstanceID}
}

// orphanContainers destroys the driver instances (containers, and the network of a
// multi-container one) that provably belong to this bay, are older than the grace period, and
// whose session the database does not know: left by a bay that died mid-start or a failed
// removal. Everything not provably leaked is left alone.
func (r *taskRun) orphanContainers(ctx context.Context) {
	list, err := listBoth(ctx, r, r.s.drv.ListInstances, func(i bay.Instance) string { return i.Name })
	if err != nil {
		r.fail(fmt.Errorf("list instances: %w", err))
		return
	}
	for _, inst := range list {
		if ctx.Err() != nil {
			return
		}
		what := "instance/" + inst.Name
		if !r.leaked(ctx, inst) {
			continue
		}
		if r.dry {
			r.would(what)
			continue
		}
		cctx, cancel := r.call(ctx)
		err := r.s.drv.DestroyInstance(cctx, inst.Name)
		cancel()
		if err != nil {
			r.fail(fmt.Errorf("destroy instance %s: %w", inst.Name, err))
			continue
		}
		r.cleaned(what, "reason", bay.ReasonOrphan, "session_id", inst.Labels[bay.LabelSessionID], "sandbox_id", inst.Labels[bay.LabelSandboxID],
			"bay_instance", inst.Labels[bay.LabelInstanceID])
	}
	r.staleInstanceFiles(ctx)
	if !r.dry && ctx.Err() == nil {
		r.forgetInstances(ctx, list)
	}
}

// staleInstanceFiles removes the files a driver keeps beside an instance (the Docker driver's
// name files under gVisor) once nothing of the instance exists and they are older than the
// grace period: left by a failed removal or a bay that died mid-create.
func (r *taskRun) staleInstanceFiles(ctx context.Context) {
	sw, ok := r.s.drv.(bay.InstanceFileSweeper)
	if !ok || ctx.Err() != nil {
		return
	}
	cctx, cancel := r.call(ctx)
	names, err := sw.StaleInstanceFiles(cctx, r.now.Add(-r.s.cfg.OrphanGrace))
	cancel()
	if err != nil {
		r.fail(fmt.Errorf("list instance files: %w", err))
		return
	}
	for _, name := range names {
		what := "instance-files/" + name
		if r.dry {
			r.would(what)
			continue
		}
		if err := sw.RemoveInstanceFiles(ctx, name); err != nil {
			r.fail(fmt.Errorf("remove instance files of %s: %w", name, err))
			continue
		}
		r.cleaned(what, "reason", bay.ReasonOrphan)
	}
}

// forgetInstances deletes the heartbeat rows of bay instances gone for ForgetInstanceAfter
// whose id labels none of the instances listed (before this task removed any) and no volume
// of the deployment: nothing is left to adopt.
func (r *taskRun) forgetInstances(ctx context.Context, listed []bay.Instance) {
	if r.s.cfg.Deployment == "" || !r.loadBeats(ctx) {
		return
	}
	labelled := map[string]bool{}
	for _, inst := range listed {
		labelled[inst.Labels[bay.LabelInstanceID]] = true
	}
	var stale []string
	for id, b := range r.beats {
		if !labelled[id] && r.now.Sub(b.HeartbeatAt) >= ForgetInstanceAfter {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return
	}
	cctx, cancel := r.call(ctx)
	vols, err := r.s.drv.ListVolumes(cctx, map[string]string{bay.LabelManaged: "true", bay.LabelDeployment: r.s.cfg.Deployment})
	cancel()
	if err != nil {
		r.fail(fmt.Errorf("list volumes: %w", err))
		return
	}
	for _, v := range vols {
		labelled[v.Labels[bay.LabelInstanceID]] = true
	}
	before := r.now.Add(-ForgetInstanceAfter)
	for _, id := range stale {
		if labelled[id] {
			continue
		}
		cctx, cancel := r.call(ctx)
		var deleted bool
		err := r.s.store.Tx(cctx, func(tx bay.Tx) (err error) {
			deleted, err = tx.DeleteBayInstance(cctx, id, before)
			return err
		})
		cancel()
		switch {
		case err != nil:
			r.fail(fmt.Errorf("forget bay instance %s: %w", id, err))
		case deleted:
			r.log.InfoContext(ctx, "gc forgot a bay instance gone long ago", "bay_instance", id)
		}
	}
}

// RecoverStaleStarts destroys the sessions left "starting" by a previous incarnation of this
// bay instance (session InstanceID "<instance_id>/<boot>" with a boot other than
// Config.BootID) regardless of their age, and those of any instance older than
// StaleStartAfter. Without a BootID only the age rule applies. It runs at startup from Run,
// whether or not GC is enabled, and returns how many sessions it destroyed.
func (s *Scheduler) RecoverStaleStarts(ctx context.Context) (int, error) {
	tr := TaskResult{TaskName: "recover_stale_starts", Errors: []string{}}
	run := &taskRun{s: s, res: &tr, now: s.now(), log: s.log.With("task", "recover")}
	run.staleStarts(ctx, func(sess *bay.Session) bool { return sess.FromEarlierBoot(s.cfg.InstanceID, s.cfg.BootID) })
	if len(tr.Errors) > 0 {
		return tr.CleanedCount, fmt.Errorf("%s", strings.Join(tr.Errors, "; "))
	}
	return tr.CleanedCount, nil
}
