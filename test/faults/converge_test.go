package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// convergeDeadline is how long a case waits for convergence before it fails: generous, the
// figures are measured, not asserted.
const convergeDeadline = 4 * time.Minute

// snapshot is what a check reads from the apiserver: the Pipelines of a namespace and every
// Deployment, Service, claim, autoscaler and NetworkPolicy in it, the operator's ConfigMaps
// there, and every PersistentVolume.
type snapshot struct {
	pipelines   map[string]*pipelinev1.Pipeline
	deployments []appsv1.Deployment
	services    []corev1.Service
	claims      []corev1.PersistentVolumeClaim
	volumes     []corev1.PersistentVolume
	configMaps  []corev1.ConfigMap
	autoscalers []autoscalingv2.HorizontalPodAutoscaler
	policies    []networkingv1.NetworkPolicy
}

func readSnapshot(ctx context.Context, c client.Client, ns string) (*snapshot, error) {
	w := &snapshot{pipelines: map[string]*pipelinev1.Pipeline{}}
	pipelines := &pipelinev1.PipelineList{}
	deployments := &appsv1.DeploymentList{}
	services := &corev1.ServiceList{}
	claims := &corev1.PersistentVolumeClaimList{}
	volumes := &corev1.PersistentVolumeList{}
	configMaps := &corev1.ConfigMapList{}
	autoscalers := &autoscalingv2.HorizontalPodAutoscalerList{}
	policies := &networkingv1.NetworkPolicyList{}
	for _, l := range []client.ObjectList{pipelines, deployments, services, claims, autoscalers, policies} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	// The namespace's own ConfigMaps (kube-root-ca.crt) are not the operator's.
	if err := c.List(ctx, configMaps, client.InNamespace(ns), client.MatchingLabels{labelManagedBy: resources.ManagedBy}); err != nil {
		return nil, err
	}
	if err := c.List(ctx, volumes); err != nil {
		return nil, err
	}
	for i := range pipelines.Items {
		w.pipelines[pipelines.Items[i].Name] = &pipelines.Items[i]
	}
	w.deployments, w.services, w.claims, w.volumes = deployments.Items, services.Items, claims.Items, volumes.Items
	w.configMaps, w.autoscalers, w.policies = configMaps.Items, autoscalers.Items, policies.Items
	return w, nil
}

// converged lists what keeps the Pipelines named want from being converged, in the world the
// simulated controllers make: each exists, carries the status of its generation and is
// running with every step ready, and has exactly its children — the storage its status names,
// a Deployment and a Service per step, the NetworkPolicy of its steps, each as the spec says and
// controlled by it — and nothing else exists in the namespace. An empty list means converged.
func (w *snapshot) converged(ns string, want []string) []string {
	var problems []string
	for name := range w.pipelines {
		if !slices.Contains(want, name) {
			problems = append(problems, "Pipeline "+name+" exists but was never created")
		}
	}
	children := w.childrenByPipeline(ns, &problems)
	for _, name := range want {
		p, ok := w.pipelines[name]
		if !ok {
			problems = append(problems, "Pipeline "+name+" is missing")
			continue
		}
		problems = append(problems, pipelineProblems(p)...)
		problems = append(problems, childProblems(p, children[name])...)
	}
	sort.Strings(problems)
	return problems
}

// lost counts the Pipelines named want that are missing, and the children missing from those
// that exist: a Deployment and a Service per step, and the claim and volume their status names.
func (w *snapshot) lost(ns string, want []string) int {
	var ignored []string
	children := w.childrenByPipeline(ns, &ignored)
	n := 0
	for _, name := range want {
		p, ok := w.pipelines[name]
		if !ok {
			n++
			continue
		}
		has := map[string]bool{}
		for kind, objs := range children[name] {
			for _, obj := range objs {
				has[kind+" "+obj.GetName()] = true
			}
		}
		wanted := []string{}
		for i := range steps {
			wanted = append(wanted, "Deployment "+stepObjectName(p, i), "Service "+stepObjectName(p, i))
		}
		if claim := p.Status.Storage.ClaimName; claim != "" {
			wanted = append(wanted, "PersistentVolumeClaim "+claim)
		}
		if volume := p.Status.Storage.VolumeName; volume != "" {
			wanted = append(wanted, "PersistentVolume "+volume)
		}
		for _, k := range wanted {
			if !has[k] {
				n++
			}
		}
	}
	return n
}

// pipelineProblems lists what in the status of p is not converged.
func pipelineProblems(p *pipelinev1.Pipeline) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, p.Name+": "+fmt.Sprintf(format, args...)) }
	st := p.Status
	if !p.DeletionTimestamp.IsZero() {
		add("being deleted")
	}
	if !slices.Contains(p.Finalizers, pipeline.Finalizer) {
		add("no finalizer")
	}
	if st.ObservedGeneration != p.Generation {
		add("observedGeneration %d of generation %d", st.ObservedGeneration, p.Generation)
	}
	if ready, total := ptr.Deref(st.ReadySteps, -1), ptr.Deref(st.TotalSteps, -1); st.Phase != pipelinev1.PipelinePhaseRunning ||
		ready != steps || total != steps {
		add("phase %q, %d of %d steps ready", st.Phase, ready, total)
	}
	for _, t := range []string{pipelinev1.ConditionAvailable, pipelinev1.ConditionReconciled} {
		if c := meta.FindStatusCondition(st.Conditions, t); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != p.Generation {
			add("condition %s is not True for generation %d: %v", t, p.Generation, c)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionDegraded); c != nil && c.Status != metav1.ConditionFalse {
		add("Degraded %s: %s", c.Reason, c.Message)
	}
	return out
}

// children are the objects of one Pipeline, by kind and name.
type children map[string][]client.Object

// childrenByPipeline files every child of the snapshot under the Pipeline that controls it (the
// volumes: that their labels name), and lists the objects that belong to no live Pipeline.
func (w *snapshot) childrenByPipeline(ns string, problems *[]string) map[string]children {
	out := map[string]children{}
	file := func(kind string, obj client.Object) {
		owner := ""
		if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Pipeline" {
			owner = ref.Name
			if p, ok := w.pipelines[owner]; !ok || p.UID != ref.UID {
				*problems = append(*problems, fmt.Sprintf("%s %s is controlled by a Pipeline %s (uid %s) that does not exist", kind, obj.GetName(), ref.Name, ref.UID))
				return
			}
		}
		if kind == "PersistentVolume" {
			owner = obj.GetLabels()[resources.LabelPipeline]
		}
		if owner == "" {
			*problems = append(*problems, fmt.Sprintf("%s %s belongs to no Pipeline", kind, obj.GetName()))
			return
		}
		if out[owner] == nil {
			out[owner] = children{}
		}
		out[owner][kind] = append(out[owner][kind], obj)
	}
	for i := range w.deployments {
		file("Deployment", &w.deployments[i])
	}
	for i := range w.services {
		file("Service", &w.services[i])
	}
	for i := range w.claims {
		file("PersistentVolumeClaim", &w.claims[i])
	}
	for i := range w.configMaps {
		file("ConfigMap", &w.configMaps[i])
	}
	for i := range w.autoscalers {
		file("HorizontalPodAutoscaler", &w.autoscalers[i])
	}
	for i := range w.policies {
		file("NetworkPolicy", &w.policies[i])
	}
	for i := range w.volumes {
		if w.volumes[i].Labels[resources.LabelPipelineNamespace] == ns {
			file("PersistentVolume", &w.volumes[i])
		}
	}
	return out
}

// childProblems lists how the children of p differ from exactly what its spec asks for.
func childProblems(p *pipelinev1.Pipeline, have children) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, p.Name+": "+fmt.Sprintf(format, args...)) }
	stepNames := make([]string, steps)
	for i := range stepNames {
		stepNames[i] = stepObjectName(p, i)
	}
	workloads, configMaps, autoscalers := slices.Clone(stepNames), []string(nil), []string(nil)
	switch variant(p) {
	case variantRouter:
		workloads = append(workloads, p.Name+"-router")
		configMaps = []string{p.Name + "-router"}
	case variantAutoscaling:
		autoscalers = []string{stepNames[1]}
	}
	sort.Strings(workloads)
	for kind, want := range map[string][]string{
		"Deployment": workloads, "Service": workloads, "ConfigMap": configMaps, "HorizontalPodAutoscaler": autoscalers,
		"PersistentVolumeClaim": {p.Status.Storage.ClaimName}, "PersistentVolume": {p.Status.Storage.VolumeName},
		// Every Pipeline of the suite has three steps: one policy for those its entry calls.
		"NetworkPolicy": {resources.StepsNetworkPolicyName(p)},
	} {
		var got []string
		for _, obj := range have[kind] {
			got = append(got, obj.GetName())
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			add("%s objects %v, want exactly %v", kind, got, want)
		}
	}
	for _, obj := range append(have["Deployment"], have["Service"]...) {
		i := slices.Index(stepNames, obj.GetName())
		if i < 0 {
			continue
		}
		l := obj.GetLabels()
		if l[resources.LabelPipeline] != p.Name || l[resources.LabelStep] != strconv.Itoa(i+1) || l[labelManagedBy] != resources.ManagedBy {
			add("%T %s has labels %v", obj, obj.GetName(), l)
		}
		if d, ok := obj.(*appsv1.Deployment); ok {
			out = append(out, deploymentProblems(p, i, d)...)
		}
	}
	for _, obj := range append(have["PersistentVolumeClaim"], have["PersistentVolume"]...) {
		if l := obj.GetLabels(); l[resources.LabelPipeline] != p.Name || l[labelManagedBy] != resources.ManagedBy {
			add("%T %s has labels %v", obj, obj.GetName(), l)
		}
	}
	return out
}

// deploymentProblems lists how the Deployment of step i differs from the spec: image, model and
// Pipeline in its environment.
func deploymentProblems(p *pipelinev1.Pipeline, i int, d *appsv1.Deployment) []string {
	step := p.Spec.Steps[i]
	if len(d.Spec.Template.Spec.Containers) != 1 {
		return []string{fmt.Sprintf("%s: Deployment %s has %d containers", p.Name, d.Name, len(d.Spec.Template.Spec.Containers))}
	}
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if c.Image != step.Image || env[pipelinev1.EnvModelName] != step.Model || env[pipelinev1.EnvPipelineName] != p.Name {
		return []string{fmt.Sprintf("%s: Deployment %s runs %s with %s=%q %s=%q", p.Name, d.Name, c.Image,
			pipelinev1.EnvModelName, env[pipelinev1.EnvModelName], pipelinev1.EnvPipelineName, env[pipelinev1.EnvPipelineName])}
	}
	return nil
}

// nameConflicts lists every claim of a NameConflict: Degraded conditions of the Pipelines in
// the snapshot and events recorded on Pipelines of namespace ns. In these cases no object of
// anyone else ever takes a child's name, so every such claim is about the Pipeline's own child.
func nameConflicts(ctx context.Context, c client.Client, ns string, w *snapshot) ([]string, error) {
	var out []string
	for _, p := range w.pipelines {
		if cond := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionDegraded); cond != nil &&
			cond.Reason == pipelinev1.ReasonNameConflict {
			out = append(out, fmt.Sprintf("Pipeline %s status: %s", p.Name, cond.Message))
		}
	}
	events := &eventsv1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, e := range events.Items {
		if e.Reason == pipelinev1.ReasonNameConflict {
			out = append(out, fmt.Sprintf("event on %s %s: %s", e.Regarding.Kind, e.Regarding.Name, e.Note))
		}
	}
	sort.Strings(out)
	return out, nil
}

// convergence follows a case until its Pipelines converge.
type convergence struct {
	// at is when the check first found every Pipeline converged.
	at time.Time
	// conflicts are the NameConflict claims seen on the way.
	conflicts []string
}

// waitConverged reads a snapshot every half second until the Pipelines named want have
// converged, and fails the case with what is still wrong after convergeDeadline. Reads that fail
// (the apiserver is away) are tried again. Every read also looks for NameConflict claims.
func waitConverged(r *run, c client.Client, ns string, want []string) convergence {
	r.Helper()
	var conv convergence
	seen := map[string]bool{}
	var last []string
	for deadline := time.Now().Add(convergeDeadline); ; time.Sleep(500 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		w, err := readSnapshot(ctx, c, ns)
		var conflicts []string
		if err == nil {
			conflicts, err = nameConflicts(ctx, c, ns, w)
		}
		cancel()
		if err != nil {
			last = []string{"read a snapshot: " + err.Error()}
		} else {
			for _, s := range conflicts {
				if !seen[s] {
					seen[s] = true
					conv.conflicts = append(conv.conflicts, s)
				}
			}
			r.res.lost = w.lost(ns, want)
			if last = w.converged(ns, want); len(last) == 0 {
				conv.at = time.Now()
				return conv
			}
		}
		if time.Now().After(deadline) {
			r.Fatalf("not converged after %s; %d problems, the first: %v", convergeDeadline, len(last), last[:min(len(last), 15)])
		}
	}
}

// expectConverged checks that the Pipelines named want converged and stayed so: no
// NameConflict was ever claimed, and nothing changes for a few seconds (no
// write lost, no hot loop, no late duplicate).
func expectConverged(r *run, c client.Client, ns string, want []string) convergence {
	r.Helper()
	conv := waitConverged(r, c, ns, want)
	first, err := readSnapshot(r.Context(), c, ns)
	if err != nil {
		r.Fatalf("read a snapshot: %v", err)
	}
	before := versionsOf(first, ns)
	time.Sleep(3 * time.Second)
	w, err := readSnapshot(r.Context(), c, ns)
	if err != nil {
		r.Fatalf("read a snapshot: %v", err)
	}
	r.res.lost = w.lost(ns, want)
	if problems := w.converged(ns, want); len(problems) > 0 {
		r.Errorf("converged, then not: %v", problems[:min(len(problems), 15)])
	}
	if after := versionsOf(w, ns); !maps.Equal(before, after) {
		r.Errorf("objects kept changing after convergence: %v", changed(before, after))
		for name, p := range w.pipelines {
			if was := first.pipelines[name]; was != nil && was.ResourceVersion != p.ResourceVersion {
				r.Logf("Pipeline %s changed: %s", name, cmp.Diff(was, p))
			}
		}
	}
	conflicts, err := nameConflicts(r.Context(), c, ns, w)
	if err != nil {
		r.Fatalf("list events: %v", err)
	}
	for _, s := range conflicts {
		if !slices.Contains(conv.conflicts, s) {
			conv.conflicts = append(conv.conflicts, s)
		}
	}
	if len(conv.conflicts) > 0 {
		r.Errorf("a Pipeline claimed its own child belongs to someone else (NameConflict), %d times: %v",
			len(conv.conflicts), conv.conflicts[:min(len(conv.conflicts), 10)])
	}
	return conv
}

// versionsOf maps every Pipeline of the snapshot w of namespace ns, every object in ns and every
// volume of its Pipelines to its resourceVersion.
func versionsOf(w *snapshot, ns string) map[string]string {
	out := map[string]string{}
	for _, p := range w.pipelines {
		out["Pipeline "+p.Name] = p.ResourceVersion
	}
	for i := range w.deployments {
		out["Deployment "+w.deployments[i].Name] = w.deployments[i].ResourceVersion
	}
	for i := range w.services {
		out["Service "+w.services[i].Name] = w.services[i].ResourceVersion
	}
	for i := range w.claims {
		out["PersistentVolumeClaim "+w.claims[i].Name] = w.claims[i].ResourceVersion
	}
	for i := range w.volumes {
		if w.volumes[i].Labels[resources.LabelPipelineNamespace] == ns {
			out["PersistentVolume "+w.volumes[i].Name] = w.volumes[i].ResourceVersion
		}
	}
	return out
}

// changed lists the keys whose values differ between a and b.
func changed(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
