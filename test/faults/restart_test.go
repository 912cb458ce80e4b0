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
// Pipelines is stored, then starts it again on the same etcd.
func apiserverRestart(r *run) {
	outageInBurst(r, outage{
		ns: "apiserver-restart", component: "kube-apiserver", stopped: "the apiserver stopped", back: "the apiserver",
		downtime: apiserverDowntime, restart: "unreachable %.1f s (stopped, %.0f s later started on the same etcd)",
		stop: (*controlPlane).stopAPIServer, start: (*controlPlane).startAPIServer,
	})
}

// etcdRestart stops etcd for etcdDowntime when half of a burst of Pipelines is stored, then
// starts it again on the same data; kube-apiserver keeps running.
func etcdRestart(r *run) {
	outageInBurst(r, outage{
		ns: "etcd-restart", component: "etcd", stopped: "etcd stopped", back: "etcd",
		downtime: etcdDowntime, restart: "down %.1f s (stopped, %.0f s later started on the same data)",
		stop: (*controlPlane).stopEtcd, start: (*controlPlane).startEtcd,
	})
}

// outage is a component of the control plane stopped in the middle of a burst.
type outage struct {
	ns        string
	component string // as the report names it
	stopped   string // "<what> stopped", in the load figure
	back      string // "<what> was back", in the convergence figure
	downtime  time.Duration
	restart   string // the fault's figure: the time unreachable, then the downtime
	stop      func(*controlPlane, *run) string
	start     func(*controlPlane, *run)
}

// outageInBurst stops o's component when half of a burst of Pipelines is stored and starts it
// again after o.downtime. The operator runs as its image does (the manager binary with leader
// election) and is started again whenever it exits, as the kubelet would.
func outageInBurst(r *run, o outage) {
	cp := startControlPlane(r, o.ns)
	world := startWorld(r, cp)
	op := startManagerProcess(r, cp, operatorUser, o.ns, true)

	b := startBurst(cp.admin, o.ns, burstSize, newPipeline)
	b.waitCreated(r, burstSize/2)
	waitDeployments(r, cp.admin, o.ns, atWorkDeployments)
	stored, made := b.created.Load(), countDeployments(r, cp.admin, o.ns)
	down := time.Now()
	how := o.stop(cp, r)
	time.Sleep(o.downtime)
	o.start(cp, r)
	back := time.Now()
	world.restart(r)
	b.wait(r)
	conv := expectConverged(r, cp.admin, o.ns, names(burstSize))

	starts, exits := op.history()
	r.res.load = fmt.Sprintf("burst of %d Pipelines (%d writers), %d stored and %d Deployments made when %s",
		burstSize, burstWriters, stored, made, o.stopped)
	r.res.faults = fmt.Sprintf("%s "+o.restart+"; manager processes started: %d",
		o.component, back.Sub(down).Seconds(), o.downtime.Seconds(), starts)
	r.res.converge = fmt.Sprintf("%.1f s after %s was back", conv.at.Sub(back).Seconds(), o.back)
	r.figure("%s stopped %.1f s after the burst began (%s), healthy again %.1f s later",
		o.component, down.Sub(b.started).Seconds(), how, back.Sub(down).Seconds())
	r.figure("converged %.1f s after %s was back (%.1f s after the burst began)", conv.at.Sub(back).Seconds(), o.back, conv.at.Sub(b.started).Seconds())
	r.figure("manager processes started: %d (each started again %s after it exited); exits: %s", starts, restartDelay, describeExits(exits))
	reportResume(r, cp, back, o.back)
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
