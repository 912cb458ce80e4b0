// Package leaderelection is how replicas of the operator share the work: the Lease they compete
// for and its timings.
package leaderelection

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// ID names the Lease that replicas of the operator compete for.
const ID = "pipeline-operator.distri-infer.ndsl.cn"

// Timings are the durations of lease-based leader election.
type Timings struct {
	// LeaseDuration is how long other replicas wait, after the leader's last renewal, before
	// they take the lease over: the longest a crashed leader leaves Pipelines unreconciled.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps failing to renew before it stops reconciling
	// and exits, so that it never writes once another replica may lead.
	RenewDeadline time.Duration
	// RetryPeriod is how often the leader renews and the other replicas try to acquire.
	RetryPeriod time.Duration
}

// DefaultTimings are the timings of the operator's leader election: client-go's usual
// 15s lease, 10s renew deadline and 2s retry period.
func DefaultTimings() Timings {
	return Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// Enable turns on lease-based leader election in opts: one replica, the holder of
// the Lease id in namespace (empty: the manager's own), runs the controllers. The leader releases
// the Lease when its context is cancelled (a clean shutdown, such as a rolling update), so that
// another replica takes over within one retry period instead of waiting for the lease to
// expire; the process must exit once the manager has stopped, as cmd/ does.
func Enable(opts *ctrl.Options, id, namespace string, t Timings) {
	opts.LeaderElection = true
	opts.LeaderElectionID = id
	opts.LeaderElectionNamespace = namespace
	opts.LeaderElectionReleaseOnCancel = true
	opts.LeaseDuration = &t.LeaseDuration
	opts.RenewDeadline = &t.RenewDeadline
	opts.RetryPeriod = &t.RetryPeriod
}
