package bay

import (
	"context"
	"time"
)

// LabelDeployment ties what a bay creates on the container platform to its database: the
// deployment id the database was given when its schema was made (InstanceReader.DeploymentID).
// Bays on one database write the same value; bays on another database never do, so one
// deployment's GC never adopts what another's bays made on a shared engine or namespace.
const LabelDeployment = "bay.deployment"

// WithDeployment adds the bay.deployment label to labels when deployment is set (bays opened
// on a store without one, in tests, write none) and returns labels.
func WithDeployment(labels map[string]string, deployment string) map[string]string {
	if deployment != "" {
		labels[LabelDeployment] = deployment
	}
	return labels
}

// BayInstance is one bay instance id's heartbeat row: the bay running with that id renews it
// while it runs (the instance lease's renewals write it), so another bay can tell a bay that is
// gone (its heartbeat lapsed) from one that is alive, and adopt the gone one's orphans.
type BayInstance struct {
	ID          string    // the instance id (gc.instance_id, $HOSTNAME, a Pod's name)
	BootID      string    // the process that wrote the last heartbeat
	StartedAt   time.Time // first heartbeat of that id
	HeartbeatAt time.Time // last heartbeat
}

// Gone reports whether the bay that wrote b stopped renewing it: its last heartbeat is at least
// after old at now. Callers choose after well above the renewal period (internal/bay/gc's
// DeadInstanceFloor), so a live bay is never taken for a gone one over a short stall.
func (b *BayInstance) Gone(now time.Time, after time.Duration) bool {
	return now.Sub(b.HeartbeatAt) >= after
}

// MaxBayInstances bounds ListBayInstances: the rows of instance ids that stopped long ago and
// left nothing are pruned (Tx.DeleteBayInstance), so a deployment has far fewer.
const MaxBayInstances = 10000

// InstanceReader reads the deployment id and the bay instances' heartbeats.
type InstanceReader interface {
	// DeploymentID is the random id the database was given by its first migration.
	DeploymentID(ctx context.Context) (string, error)
	// ListBayInstances returns every heartbeat row by id (at most MaxBayInstances).
	ListBayInstances(ctx context.Context) ([]*BayInstance, error)
}

// InstanceWriter writes the heartbeats.
type InstanceWriter interface {
	// HeartbeatBayInstance records that instance id runs as bootID at now (creating the row on
	// the first heartbeat of the id; a heartbeat never moves HeartbeatAt back).
	HeartbeatBayInstance(ctx context.Context, id, bootID string, now time.Time) error
	// DeleteBayInstance removes id's row if its last heartbeat is before before; it reports
	// whether it did.
	DeleteBayInstance(ctx context.Context, id string, before time.Time) (bool, error)
}
