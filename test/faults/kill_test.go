package faults

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
)

// atWorkDeployments is how many Deployments the operator must have made before a fault comes:
// it comes while the operator is at work.
const atWorkDeployments = 60

// managerKilled kills the manager with SIGKILL when half of a burst is stored and the operator
// is at work; the supervisor starts it again, as the kubelet would. The new process waits for
// the Lease of the killed one to expire, then finishes the burst.
func managerKilled(r *run) {
	const ns = "manager-killed"
	cp := startControlPlane(r, ns)
	startWorld(r, cp)
	op := startManagerProcess(r, cp, operatorUser, ns, true)

	b := startBurst(cp.admin, ns, burstSize, newPipeline)
	b.waitCreated(r, burstSize/2)
	waitDeployments(r, cp.admin, ns, atWorkDeployments)
	stored, made := b.created.Load(), countDeployments(r, cp.admin, ns)
	killed := op.kill()
	b.wait(r)
	conv := expectConverged(r, cp.admin, ns, names(burstSize))

	starts, exits := op.history()
	all := cp.writes(r)
	// The processes of the supervised manager write as pipeline-operator.1, .2, …
	var first time.Time
	if second := operatorWrites(all, operatorUser+".2"); len(second) > 0 {
		first = second[0].at
	}
	r.res.load = fmt.Sprintf("burst of %d Pipelines (%d writers), %d stored and %d Deployments made when the manager was killed",
		burstSize, burstWriters, stored, made)
	r.res.faults = fmt.Sprintf("SIGKILL of the manager; %d processes started in all", starts)
	r.res.converge = fmt.Sprintf("%.1f s after the kill", conv.at.Sub(killed).Seconds())
	r.figure("killed %.1f s after the burst began; exits: %s", killed.Sub(b.started).Seconds(), describeExits(exits))
	if !first.IsZero() {
		r.figure("the new process's first write came %.1f s after the kill (it waits for the killed process's Lease to expire: lease duration %s)",
			first.Sub(killed).Seconds(), leaderelection.DefaultTimings().LeaseDuration)
	}
	r.figure("converged %.1f s after the kill (%.1f s after the burst began)", conv.at.Sub(killed).Seconds(), conv.at.Sub(b.started).Seconds())
	r.figure("NameConflict claims (status or events): %d", len(conv.conflicts))
	reportWrites(r, cp, burstSize, operatorUser)
}

// leaderFailover runs two managers with leader election, loads them with a burst and kills
// the leader with SIGKILL when half of it is stored: the standby takes over. The audit log
// tells their writes apart (each writes as its own user): they must never interleave.
func leaderFailover(r *run) {
	const ns = "leader-failover"
	const userA, userB = operatorUser + "-a", operatorUser + "-b"
	cp := startControlPlane(r, ns)
	startWorld(r, cp)
	a := startManagerProcess(r, cp, userA, ns, false)
	waitLease(r, cp.admin, ns)
	b := startManagerProcess(r, cp, userB, ns, false)

	burst := startBurst(cp.admin, ns, burstSize, newPipeline)
	burst.waitCreated(r, burstSize/2)
	waitDeployments(r, cp.admin, ns, atWorkDeployments)
	stored := burst.created.Load()
	killed := a.kill()
	burst.wait(r)
	conv := expectConverged(r, cp.admin, ns, names(burstSize))

	all := cp.writes(r)
	wa, wb := operatorWrites(all, userA), operatorWrites(all, userB)
	r.res.load = fmt.Sprintf("burst of %d Pipelines (%d writers), %d stored when the leader was killed", burstSize, burstWriters, stored)
	r.res.faults = "SIGKILL of the leader of two managers"
	r.res.converge = fmt.Sprintf("%.1f s after the kill", conv.at.Sub(killed).Seconds())
	oneWriterAtATime(r, wa, wb, killed)
	if len(wb) > 0 {
		r.figure("handover: the standby's Lease taken %.1f s after the kill, its first write %.1f s after the kill (lease duration %s)",
			leaseTaken(all, userB, killed).Sub(killed).Seconds(), wb[0].at.Sub(killed).Seconds(), leaderelection.DefaultTimings().LeaseDuration)
	}
	r.figure("converged %.1f s after the kill (%.1f s after the burst began)", conv.at.Sub(killed).Seconds(), conv.at.Sub(burst.started).Seconds())
	_, exitsB := b.history()
	r.figure("exits of the standby: %s", describeExits(exitsB))
	reportWrites(r, cp, burstSize, userA, userB)
}

// oneWriterAtATime checks that the leader wrote only before the kill and the standby only
// after the leader's last write, and reports both.
func oneWriterAtATime(r *run, wa, wb []write, killed time.Time) {
	r.Helper()
	if len(wa) == 0 {
		r.Errorf("the first leader made no write before it was killed")
		return
	}
	lastA := wa[len(wa)-1].at
	overlapping := 0
	for _, w := range wb {
		if w.at.Before(killed) || !w.at.After(lastA) {
			overlapping++
		}
	}
	if overlapping > 0 {
		r.Errorf("the standby made %d writes while the leader was alive or still writing: two writers at once", overlapping)
	}
	// The audit log records when a write completed: a write sent just before the kill may
	// complete a little later on a loaded machine.
	if lastA.After(killed.Add(5 * time.Second)) {
		r.Errorf("the killed leader's last write completed %s after the kill", lastA.Sub(killed))
	}
	r.figure("writes of the first leader: %d, the last completed %+.2f s from the kill; of the standby: %d, %d of them before the leader's last write or the kill",
		len(wa), lastA.Sub(killed).Seconds(), len(wb), overlapping)
}

// leaseTaken is when user first wrote the leader election Lease after t.
func leaseTaken(all []write, user string, t time.Time) time.Time {
	for _, w := range all {
		if w.by(user) && w.resource == "leases" && w.code < 300 && w.at.After(t) {
			return w.at
		}
	}
	return time.Time{}
}

// waitLease waits until a manager holds the leader election Lease of namespace ns.
func waitLease(r *run, c client.Client, ns string) {
	r.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		lease := &coordinationv1.Lease{}
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: leaderelection.ID}, lease)
		if err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
			return
		}
		if time.Now().After(deadline) {
			r.Fatalf("no manager took the Lease %s/%s: %v", ns, leaderelection.ID, err)
		}
	}
}

// waitDeployments waits until namespace ns holds at least n Deployments.
func waitDeployments(r *run, c client.Client, ns string, n int) {
	r.Helper()
	for deadline := time.Now().Add(2 * time.Minute); countDeployments(r, c, ns) < n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.Fatalf("the operator made fewer than %d Deployments in two minutes", n)
		}
	}
}

func countDeployments(r *run, c client.Client, ns string) int {
	r.Helper()
	list := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		r.Fatalf("list Deployments: %v", err)
	}
	return len(list.Items)
}
