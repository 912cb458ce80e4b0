package faults

import (
	"fmt"
	"strings"
	"time"
)

const (
	// apiserverDowntime is how long kube-apiserver stays stopped.
	apiserverDowntime = 20 * time.Second
	// etcdDowntime is how long etcd stays stopped.
	etcdDowntime = 10 * time.Second
)

// apiserverRestart stops kube-apiserver for apiserverDowntime when half of a burst of
// Pipelines is stored, then starts it again on the same etcd. The operator runs as its image
// does (the manager binary with leader election) and is started again whenever it exits, as
// the kubelet would.
func apiserverRestart(r *run) {
	const ns = "apiserver-restart"
	cp := startControlPlane(r, ns)
	world := startWorld(r, cp)
	op := startManagerProcess(r, cp, operatorUser, ns, true)

	b := startBurst(cp.admin, ns, burstSize)
	b.waitCreated(r, burstSize/2)
	waitDeployments(r, cp.admin, ns, atWorkDeployments)
	stored, made := b.created.Load(), countDeployments(r, cp.admin, ns)
	down := time.Now()
	how := cp.stopAPIServer(r)
	time.Sleep(apiserverDowntime)
	cp.startAPIServer(r)
	back := time.Now()
	world.restart(r)
	b.wait(r)
	conv := expectConverged(r, cp.admin, ns, names(burstSize))

	starts, exits := op.history()
	r.res.load = fmt.Sprintf("burst of %d Pipelines (%d writers), %d stored and %d Deployments made when the apiserver stopped",
		burstSize, burstWriters, stored, made)
	r.res.faults = fmt.Sprintf("kube-apiserver unreachable %.1f s (stopped, %.0f s later started on the same etcd); manager processes started: %d",
		back.Sub(down).Seconds(), apiserverDowntime.Seconds(), starts)
	r.res.converge = fmt.Sprintf("%.1f s after the apiserver was back", conv.at.Sub(back).Seconds())
	r.figure("kube-apiserver stopped %.1f s after the burst began (%s), healthy again %.1f s later",
		down.Sub(b.started).Seconds(), how, back.Sub(down).Seconds())
	r.figure("converged %.1f s after the apiserver was back (%.1f s after the burst began)", conv.at.Sub(back).Seconds(), conv.at.Sub(b.started).Seconds())
	r.figure("manager processes started: %d (each started again %s after it exited); exits: %s", starts, restartDelay, describeExits(exits))
	reportResume(r, cp, back, "the apiserver")
	reportWrites(r, cp, burstSize, operatorUser)
}

// etcdRestart stops etcd for etcdDowntime when half of a burst of Pipelines is stored, then
// starts it again on the same data; kube-apiserver keeps running. The operator runs as in
// apiserverRestart.
func etcdRestart(r *run) {
	const ns = "etcd-restart"
	cp := startControlPlane(r, ns)
	world := startWorld(r, cp)
	op := startManagerProcess(r, cp, operatorUser, ns, true)

	b := startBurst(cp.admin, ns, burstSize)
	b.waitCreated(r, burstSize/2)
	waitDeployments(r, cp.admin, ns, atWorkDeployments)
	stored, made := b.created.Load(), countDeployments(r, cp.admin, ns)
	down := time.Now()
	how := cp.stopEtcd(r)
	time.Sleep(etcdDowntime)
	cp.startEtcd(r)
	back := time.Now()
	world.restart(r)
	b.wait(r)
	conv := expectConverged(r, cp.admin, ns, names(burstSize))

	starts, exits := op.history()
	r.res.load = fmt.Sprintf("burst of %d Pipelines (%d writers), %d stored and %d Deployments made when etcd stopped",
		burstSize, burstWriters, stored, made)
	r.res.faults = fmt.Sprintf("etcd down %.1f s (stopped, %.0f s later started on the same data); manager processes started: %d",
		back.Sub(down).Seconds(), etcdDowntime.Seconds(), starts)
	r.res.converge = fmt.Sprintf("%.1f s after etcd was back", conv.at.Sub(back).Seconds())
	r.figure("etcd stopped %.1f s after the burst began (%s), healthy again %.1f s later", down.Sub(b.started).Seconds(), how, back.Sub(down).Seconds())
	r.figure("converged %.1f s after etcd was back (%.1f s after the burst began)", conv.at.Sub(back).Seconds(), conv.at.Sub(b.started).Seconds())
	r.figure("manager processes started: %d (each started again %s after it exited); exits: %s", starts, restartDelay, describeExits(exits))
	reportResume(r, cp, back, "etcd")
	reportWrites(r, cp, burstSize, operatorUser)
}

// reportResume adds to the figures when the process of the operator that wrote last (the
// supervised manager's processes write as pipeline-operator.1, .2, …) made its first write after
// back: what comes before is waiting, for the apiserver or for a Lease.
func reportResume(r *run, cp *controlPlane, back time.Time, what string) {
	r.Helper()
	ws := operatorWrites(cp.writes(r), operatorUser)
	if len(ws) == 0 {
		return
	}
	last := ws[len(ws)-1].user
	for _, w := range ws {
		if w.user == last && w.at.After(back) {
			r.figure("the operator's process %s, which wrote last, made its first write %.1f s after %s was back",
				strings.TrimPrefix(last, operatorUser+"."), w.at.Sub(back).Seconds(), what)
			return
		}
	}
}

// reportWrites adds the operator's writes, from the audit log, to the figures of a case.
func reportWrites(r *run, cp *controlPlane, pipelines int, users ...string) {
	r.Helper()
	all := cp.writes(r)
	ws := operatorWrites(all, users...)
	r.figure("operator writes (audit log, events and leader election apart): %s; %.2f per Pipeline; events: %d",
		describeWrites(ws), float64(len(ws))/float64(pipelines), countEvents(all, users...))
}
