package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

const (
	// deletedPipelines is how many Pipelines are deleted while being created.
	deletedPipelines = 200
	// deleteLanes create and delete Pipelines in parallel.
	deleteLanes = 6
	// maxDeleteDelay bounds the random time between a Pipeline's create and its delete: a little
	// more than a Pipeline takes here to get every child, so that deletes fall at every stage.
	maxDeleteDelay = 500 * time.Millisecond
	// deleteSeed seeds the delays.
	deleteSeed = 20260102
	// racedPipelines are deleted the moment the operator adds their finalizer: the delete is
	// sent as the operator sends its finalizer patch.
	racedPipelines = 60
	// racedPrefix names them.
	racedPrefix = "raced-"
)

// deleteWhileCreating creates Pipelines and deletes each after a random delay, at any moment
// of its creation, then checks that nothing is left: no Pipeline, no PersistentVolume (which
// only the operator removes: live List of the cluster's volumes), and no namespaced child the
// garbage collector would not remove.
func deleteWhileCreating(r *run) {
	const ns = "delete-while-creating"
	cp := startControlPlane(r, ns)
	startWorld(r, cp)
	counter := &writeCounter{}
	race := &finalizerRace{c: cp.admin, ns: ns}
	startInProcess(r, cp.config(r, operatorUser), func(rt http.RoundTripper) http.RoundTripper { return race.wrap(counter.wrap(rt)) })

	start := time.Now()
	stages := createAndDelete(r, cp.admin, ns)
	raceFinalizers(r, cp.admin, ns, race)
	deleted := time.Now()
	gone := waitPipelinesGone(r, cp.admin, ns)
	counter.quiet(2 * time.Second)
	left := leftovers(r, cp.admin, ns)

	r.res.load = fmt.Sprintf("%d Pipelines created by %d writers, each deleted 0–%s after its create; then %d deleted as the operator adds their finalizer",
		deletedPipelines, deleteLanes, maxDeleteDelay, racedPipelines)
	r.res.faults = fmt.Sprintf("%d deletes during creation (%s), %d with the finalizer patch", deletedPipelines, describeCounts(stages, "%s: %d"), race.fired.Load())
	r.res.converge = fmt.Sprintf("every Pipeline gone %.1f s after the last delete; volumes left behind: %d",
		gone.Sub(deleted).Seconds(), len(left.volumesLeft))
	r.figure("stage each Pipeline had reached when deleted: %s (delays drawn with seed %d)", describeCounts(stages, "%s: %d"), deleteSeed)
	r.figure("deleted as the operator sent its finalizer patch: %d of %d (the delete sent from the operator's transport, just before the patch)",
		race.fired.Load(), racedPipelines)
	r.figure("creates and deletes took %.1f s; every Pipeline was gone %.1f s after the last delete",
		deleted.Sub(start).Seconds(), gone.Sub(deleted).Seconds())
	r.figure("PersistentVolumes deleted by the operator: %d (held by the finalizers %v of controllers envtest does not run); left behind (not deleted): %d",
		left.volumesDeleted, left.holding, len(left.volumesLeft))
	r.figure("namespaced children remaining, all controlled by their deleted Pipeline (the garbage collector removes them; envtest runs none): %d; without such an owner: %d",
		left.owned, len(left.orphans))
	r.figure("operator writes: %d; events: %d", counter.writes.Load(), counter.events.Load())
	if len(left.volumesLeft) > 0 {
		r.Errorf("%d PersistentVolumes of deleted Pipelines were left behind: %v", len(left.volumesLeft), left.volumesLeft)
		all := cp.writes(r)
		for pv, p := range left.volumesLeftOf {
			r.figure("left behind: %s", leakTimeline(all, pv, p))
		}
	}
	if len(left.orphans) > 0 {
		r.Errorf("%d children of deleted Pipelines have no owner the garbage collector would follow: %v", len(left.orphans), left.orphans)
	}
}

// createAndDelete creates deletedPipelines Pipelines on deleteLanes lanes, deleting each after
// a random delay, and returns how many were at each stage when deleted.
func createAndDelete(r *run, c client.Client, ns string) map[string]int {
	r.Helper()
	rng := rand.New(rand.NewPCG(deleteSeed, deleteSeed))
	delays := make([]time.Duration, deletedPipelines)
	for i := range delays {
		delays[i] = time.Duration(rng.Int64N(int64(maxDeleteDelay)))
	}
	stages := map[string]int{}
	var mu sync.Mutex
	errs := make([]error, deletedPipelines)
	var wg sync.WaitGroup
	for lane := range deleteLanes {
		wg.Go(func() {
			for i := lane; i < deletedPipelines; i += deleteLanes {
				var stage string
				stage, errs[i] = createThenDelete(r.Context(), c, newPipeline(ns, i), delays[i])
				mu.Lock()
				stages[stage]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			r.Fatalf("%v", err)
		}
	}
	return stages
}

// finalizerRace deletes a Pipeline named racedPrefix… the moment the operator sends the patch
// that adds its finalizer: it wraps the operator's connection, sends the delete from another
// connection and lets the patch go a moment later, so that both are in flight together.
type finalizerRace struct {
	c     client.Client
	ns    string
	fired atomic.Int64
	once  sync.Map
}

func (f *finalizerRace) wrap(rt http.RoundTripper) http.RoundTripper {
	// The operator writes Pipelines in v1, the version the apiserver stores.
	prefix := "/apis/" + pipelinev1.GroupVersion.String() + "/namespaces/" + f.ns + "/pipelines/" + racedPrefix
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch && strings.HasPrefix(req.URL.Path, prefix) && !strings.HasSuffix(req.URL.Path, "/status") {
			name := path.Base(req.URL.Path)
			if _, done := f.once.LoadOrStore(name, true); !done {
				f.fired.Add(1)
				sent := make(chan struct{})
				go func() {
					p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
					close(sent)
					_ = f.c.Delete(context.Background(), p)
				}()
				<-sent
				time.Sleep(time.Millisecond)
			}
		}
		return rt.RoundTrip(req)
	})
}

// raceFinalizers creates racedPipelines Pipelines on deleteLanes lanes and waits until the
// operator's finalizer patch of each has set off its delete.
func raceFinalizers(r *run, c client.Client, ns string, race *finalizerRace) {
	r.Helper()
	errs := make([]error, racedPipelines)
	var wg sync.WaitGroup
	for lane := range deleteLanes {
		wg.Go(func() {
			for i := lane; i < racedPipelines; i += deleteLanes {
				p := newPipeline(ns, i)
				p.Name = racedPrefix + p.Name
				if errs[i] = c.Create(r.Context(), p); errs[i] != nil {
					return
				}
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
					if _, fired := race.once.Load(p.Name); fired {
						break
					}
					if time.Now().After(deadline) {
						errs[i] = fmt.Errorf("the operator sent no finalizer patch for Pipeline %s in a minute", p.Name)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			r.Fatalf("%v", err)
		}
	}
}

// createThenDelete creates p, waits delay, reads the stage it has reached and deletes it.
func createThenDelete(ctx context.Context, c client.Client, p *pipelinev1.Pipeline, delay time.Duration) (string, error) {
	if err := c.Create(ctx, p); err != nil {
		return "", fmt.Errorf("create Pipeline %s: %w", p.Name, err)
	}
	time.Sleep(delay)
	stage := "unknown"
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err == nil {
		stage = creationStage(p)
	}
	if err := c.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
		return stage, fmt.Errorf("delete Pipeline %s: %w", p.Name, err)
	}
	return stage, nil
}

// creationStage names how far the creation of p had gone.
func creationStage(p *pipelinev1.Pipeline) string {
	switch {
	case !slices.Contains(p.Finalizers, pipeline.Finalizer):
		return "no finalizer yet"
	case p.Status.ObservedGeneration == 0:
		return "finalizer, children being made"
	case p.Status.Phase == pipelinev1.PipelinePhaseRunning:
		return string(pipelinev1.PipelinePhaseRunning)
	}
	return "children made, " + string(p.Status.Phase)
}

// waitPipelinesGone waits until namespace ns holds no Pipeline, and returns when.
func waitPipelinesGone(r *run, c client.Client, ns string) time.Time {
	r.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list := &pipelinev1.PipelineList{}
		err := c.List(r.Context(), list, client.InNamespace(ns))
		if err == nil {
			r.res.lost = len(list.Items) // deletes not carried out, so far
		}
		if err == nil && len(list.Items) == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			var left []string
			for _, p := range list.Items {
				left = append(left, fmt.Sprintf("%s (finalizers %v, phase %q)", p.Name, p.Finalizers, p.Status.Phase))
			}
			r.Fatalf("Pipelines not gone two minutes after their delete: %v (%v)", left, err)
		}
	}
}

// remains is what deleted Pipelines left.
type remains struct {
	volumesLeftOf  map[string]string // the volumes left behind: the Pipeline of each
	volumesDeleted int               // volumes the operator deleted, held by the finalizers of controllers envtest does not run
	holding        []string          // those finalizers
	volumesLeft    []string          // volumes nobody deleted
	owned          int               // namespaced children controlled by a deleted Pipeline
	orphans        []string          // namespaced children without such an owner
}

// leftovers lists, straight from the apiserver, what the deleted Pipelines of ns left.
func leftovers(r *run, c client.Client, ns string) remains {
	r.Helper()
	out := remains{volumesLeftOf: map[string]string{}}
	volumes := &corev1.PersistentVolumeList{}
	if err := c.List(r.Context(), volumes, client.MatchingLabels{resources.LabelPipelineNamespace: ns}); err != nil {
		r.Fatalf("list PersistentVolumes: %v", err)
	}
	for _, pv := range volumes.Items {
		if pv.DeletionTimestamp.IsZero() {
			out.volumesLeft = append(out.volumesLeft, fmt.Sprintf("%s (Pipeline %s)", pv.Name, pv.Labels[resources.LabelPipeline]))
			out.volumesLeftOf[pv.Name] = pv.Labels[resources.LabelPipeline]
		} else {
			out.volumesDeleted++
			for _, f := range pv.Finalizers {
				if !slices.Contains(out.holding, f) {
					out.holding = append(out.holding, f)
				}
			}
		}
	}
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{},
		&networkingv1.NetworkPolicyList{}} {
		if err := c.List(r.Context(), l, client.InNamespace(ns)); err != nil {
			r.Fatalf("list %T: %v", l, err)
		}
		for _, obj := range items(l) {
			if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Pipeline" {
				out.owned++
			} else {
				out.orphans = append(out.orphans, fmt.Sprintf("%T %s", obj, obj.GetName()))
			}
		}
	}
	return out
}

// items are the objects of a list.
func items(l client.ObjectList) []client.Object {
	all, _ := meta.ExtractList(l)
	out := make([]client.Object, 0, len(all))
	for _, o := range all {
		if obj, ok := o.(client.Object); ok {
			out = append(out, obj)
		}
	}
	return out
}

// leakTimeline lists, from the audit log, the writes to Pipeline p (its status included) and
// the create of its volume pv, in the order they reached the apiserver: who, what, the answer,
// and when each was received and completed.
func leakTimeline(all []write, pv, p string) string {
	var steps []write
	for _, w := range all {
		if (w.resource == "pipelines" || w.resource == "pipelines/status") && w.name == p ||
			w.resource == "persistentvolumes" && w.name == pv && w.verb == "create" {
			steps = append(steps, w)
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].sent.Before(steps[j].sent) })
	parts := make([]string, 0, len(steps))
	for _, w := range steps {
		parts = append(parts, fmt.Sprintf("%s %s %s %s → %d (%s–%s)", w.user, w.verb, w.resource, w.name, w.code,
			w.sent.Format("15:04:05.000"), w.at.Format("05.000")))
	}
	return fmt.Sprintf("volume %s of Pipeline %s: %s", pv, p, strings.Join(parts, "; "))
}
