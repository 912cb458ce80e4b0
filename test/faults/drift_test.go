package faults

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

const (
	// driftPipelines is the number of converged Pipelines others tamper with, one change each.
	driftPipelines = 40
	// repairDeadline is how long a change may stay unrepaired before the case fails.
	repairDeadline = time.Minute
	// someoneElse is the field manager of the changes.
	someoneElse = "someone-else"
)

// tamper is a change someone else makes to a child of a Pipeline, and how to tell it was
// repaired.
type tamper struct {
	what     string
	obj      func(p *pipelinev1.Pipeline) client.Object
	change   func(ctx context.Context, c client.Client, obj client.Object) error
	repaired func(p *pipelinev1.Pipeline, before, now client.Object) bool
}

func stepObject[T client.Object](obj T, step int) func(p *pipelinev1.Pipeline) client.Object {
	return func(p *pipelinev1.Pipeline) client.Object {
		obj := obj.DeepCopyObject().(T)
		obj.SetNamespace(p.Namespace)
		obj.SetName(stepObjectName(p, step))
		return obj
	}
}

func update(edit func(client.Object)) func(ctx context.Context, c client.Client, obj client.Object) error {
	return func(ctx context.Context, c client.Client, obj client.Object) error {
		edit(obj)
		return c.Update(ctx, obj, client.FieldOwner(someoneElse))
	}
}

func recreated(p *pipelinev1.Pipeline, before, now client.Object) bool {
	return now.GetUID() != before.GetUID() && metav1.IsControlledBy(now, p)
}

func hasLabel(key, value string) func(_ *pipelinev1.Pipeline, _, now client.Object) bool {
	return func(_ *pipelinev1.Pipeline, _, now client.Object) bool { return now.GetLabels()[key] == value }
}

func container(obj client.Object) *corev1.Container {
	return &obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// tampers are the changes of the drift case, each made to a different Pipeline.
var tampers = []tamper{
	{what: "Deployment deleted", obj: stepObject(&appsv1.Deployment{}, 0),
		change: func(ctx context.Context, c client.Client, obj client.Object) error { return c.Delete(ctx, obj) }, repaired: recreated},
	{what: "Service deleted", obj: stepObject(&corev1.Service{}, 1),
		change: func(ctx context.Context, c client.Client, obj client.Object) error { return c.Delete(ctx, obj) }, repaired: recreated},
	{what: "Deployment image changed", obj: stepObject(&appsv1.Deployment{}, 2),
		change: update(func(o client.Object) { container(o).Image = "busybox:1.36" }),
		repaired: func(p *pipelinev1.Pipeline, _, now client.Object) bool {
			return container(now).Image == p.Spec.Steps[2].Image
		}},
	{what: "Deployment env changed", obj: stepObject(&appsv1.Deployment{}, 1),
		change: update(func(o client.Object) {
			c := container(o)
			for i := range c.Env {
				if c.Env[i].Name == pipelinev1.EnvModelName {
					c.Env[i].Value = "someone-elses-model"
				}
			}
		}),
		repaired: func(p *pipelinev1.Pipeline, _, now client.Object) bool {
			return envValue(container(now), pipelinev1.EnvModelName) == p.Spec.Steps[1].Model
		}},
	{what: "Service relabelled (pipeline label)", obj: stepObject(&corev1.Service{}, 2),
		change: update(func(o client.Object) { o.GetLabels()[resources.LabelPipeline] = someoneElse }),
		repaired: func(p *pipelinev1.Pipeline, before, now client.Object) bool {
			return hasLabel(resources.LabelPipeline, p.Name)(p, before, now)
		}},
	{what: "Deployment relabelled (managed-by label removed)", obj: stepObject(&appsv1.Deployment{}, 0),
		change:   update(func(o client.Object) { delete(o.GetLabels(), labelManagedBy) }),
		repaired: hasLabel(labelManagedBy, resources.ManagedBy)},
	{what: "PersistentVolumeClaim relabelled (managed-by label removed)",
		obj: func(p *pipelinev1.Pipeline) client.Object {
			return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Status.Storage.ClaimName}}
		},
		change:   update(func(o client.Object) { delete(o.GetLabels(), labelManagedBy) }),
		repaired: hasLabel(labelManagedBy, resources.ManagedBy)},
	{what: "PersistentVolume relabelled (managed-by label removed)",
		obj: func(p *pipelinev1.Pipeline) client.Object {
			return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: p.Status.Storage.VolumeName}}
		},
		change:   update(func(o client.Object) { delete(o.GetLabels(), labelManagedBy) }),
		repaired: hasLabel(labelManagedBy, resources.ManagedBy)},
}

// change is one tamper applied to one Pipeline.
type change struct {
	tamper   *tamper
	pipeline *pipelinev1.Pipeline
	before   client.Object
	at       time.Time
	repaired time.Time
}

// drift converges Pipelines, then changes one child of each as someone else (deleted, its
// image or environment edited, its labels changed, so that it leaves the operator's cache),
// all at once, and measures how long each takes to be put back.
func drift(r *run) {
	const ns = "drift"
	cp := startControlPlane(r, ns)
	startWorld(r, cp)
	counter := &writeCounter{}
	startInProcess(r, cp.config(r, operatorUser), counter.wrap)
	b := startBurst(cp.admin, ns, driftPipelines, newPipeline)
	b.wait(r)
	want := names(driftPipelines)
	first := expectConverged(r, cp.admin, ns, want)
	writesBefore, eventsBefore := counter.writes.Load(), counter.events.Load()

	changes := makeChanges(r, cp.admin, ns)
	start := time.Now()
	waitRepaired(r, cp.admin, changes)
	conv := expectConverged(r, cp.admin, ns, want)
	counter.quiet(time.Second)

	r.res.load = fmt.Sprintf("%d converged Pipelines (converged %.1f s after their burst began)", driftPipelines, first.at.Sub(b.started).Seconds())
	r.res.faults = fmt.Sprintf("%d changes by someone else at once, %d kinds", len(changes), len(tampers))
	var slowest time.Duration
	for _, c := range changes {
		slowest = max(slowest, c.repaired.Sub(c.at))
	}
	r.res.converge = fmt.Sprintf("every change repaired within %.1f s; converged %.1f s after the changes", slowest.Seconds(), conv.at.Sub(start).Seconds())
	for i := range tampers {
		var d []time.Duration
		for _, c := range changes {
			if c.tamper == &tampers[i] {
				d = append(d, c.repaired.Sub(c.at))
			}
		}
		r.figure("%s (%d): repaired after %s", tampers[i].what, len(d), durations(d))
	}
	r.figure("converged again (repaired Deployments available) %.1f s after the changes", conv.at.Sub(start).Seconds())
	r.figure("operator writes for the repairs: %d; events: %d", counter.writes.Load()-writesBefore, counter.events.Load()-eventsBefore)
}

// makeChanges applies tampers[i % len(tampers)] to Pipeline i, all in parallel.
func makeChanges(r *run, c client.Client, ns string) []*change {
	r.Helper()
	ctx := r.Context()
	changes := make([]*change, driftPipelines)
	errs := make([]error, driftPipelines)
	var wg sync.WaitGroup
	for i := range driftPipelines {
		wg.Go(func() {
			p := &pipelinev1.Pipeline{}
			if errs[i] = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: newPipeline(ns, i).Name}, p); errs[i] != nil {
				return
			}
			t := &tampers[i%len(tampers)]
			obj := t.obj(p)
			if errs[i] = c.Get(ctx, client.ObjectKeyFromObject(obj), obj); errs[i] != nil {
				return
			}
			before := obj.DeepCopyObject().(client.Object)
			if errs[i] = t.change(ctx, c, obj); errs[i] == nil {
				changes[i] = &change{tamper: t, pipeline: p, before: before, at: time.Now()}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			r.Fatalf("change a child of Pipeline %d: %v", i, err)
		}
	}
	return changes
}

// waitRepaired reads every changed object until it is repaired, and fails the case for those
// still not repaired after repairDeadline.
func waitRepaired(r *run, c client.Client, changes []*change) {
	r.Helper()
	pending := slices.Clone(changes)
	for len(pending) > 0 {
		time.Sleep(100 * time.Millisecond)
		var still []*change
		for _, ch := range pending {
			now := ch.tamper.obj(ch.pipeline)
			err := c.Get(r.Context(), client.ObjectKeyFromObject(now), now)
			switch {
			case err == nil && ch.tamper.repaired(ch.pipeline, ch.before, now):
				ch.repaired = time.Now()
			case time.Since(ch.at) > repairDeadline:
				r.Errorf("%s of Pipeline %s not repaired after %s (read: %v)", ch.tamper.what, ch.pipeline.Name, repairDeadline, err)
			default:
				still = append(still, ch)
			}
		}
		pending = still
	}
	if r.Failed() {
		r.FailNow()
	}
}

// durations describes repair times: their median and maximum.
func durations(d []time.Duration) string {
	if len(d) == 0 {
		return "–"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	parts := make([]string, 0, len(d))
	for _, x := range d {
		parts = append(parts, fmt.Sprintf("%.1f", x.Seconds()))
	}
	return fmt.Sprintf("median %.1f s, max %.1f s (each: %s s)", d[len(d)/2].Seconds(), d[len(d)-1].Seconds(), strings.Join(parts, ", "))
}
