package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// conflictRecheckInterval is how often a Pipeline whose child's name is held by someone else's
// object looks again: the operator does not watch objects it does not manage, so it would not
// otherwise see that object go.
const conflictRecheckInterval = 10 * time.Second

// conflictRetryInterval is when a pass whose writes were refused only with conflicts runs again,
// should no event of the newer version start it first.
const conflictRetryInterval = time.Second

// scope is the state of one pass over one Pipeline. The steps of a pass run concurrently: each
// writes only its own entries of obs, and problems go through addProblem.
type scope struct {
	pipeline    *pipelinev1.Pipeline
	obs         *status.Observed
	podSecurity resources.PodSecurityLevel
	mu          sync.Mutex
	// requeueAfter is when the Pipeline must be looked at again without a watch event; 0 is never.
	requeueAfter time.Duration
	// routerConfigErr is why the router would refuse the configuration the spec gives; nil when
	// it would not, or when the router is disabled (see planRouter).
	routerConfigErr error
	// stepsApplied is true once every step's children were applied in this pass.
	stepsApplied bool
	// routerApplied is true once the router's children were applied (or deleted) in this pass.
	routerApplied bool
	// volumeName is the name of the model PersistentVolume (nfs and csi storage) this pass
	// wants, set by reconcileStorage (see volumeName); empty until then.
	volumeName string
	// grant is what the ModelStorageClass of modelStorageClass storage grants; nil for other
	// storage.
	grant *classGrant
	// budgets are indexed like spec.steps: whether the step gets a PodDisruptionBudget.
	budgets []bool
	// created are the children this pass created, by "Kind name", for one event.
	created map[string]runtime.Object
}

func newScope(p *pipelinev1.Pipeline) *scope {
	return &scope{pipeline: p, budgets: make([]bool, len(p.Spec.Steps)), obs: status.NewObserved(len(p.Spec.Steps))}
}

func (s *scope) addProblem(reason, format string, args ...any) {
	s.add(problem.Problem{Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (s *scope) add(pr problem.Problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs.Problems = append(s.obs.Problems, pr)
}

// holdStorage records that the pass may not make the storage the spec describes (its
// ModelStorageClass is missing or does not select the namespace): the volumes and claims that
// exist stay, stale or not (reconcileStale), and the pass does not count as having applied the
// spec (status.Observed.StorageHeld).
func (s *scope) holdStorage() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs.StorageHeld = true
}

// requeueWithin asks for another pass within d, whatever else of the pass asks for.
func (s *scope) requeueWithin(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// recordCreated records that the pass created obj.
func (s *scope) recordCreated(obj client.Object) {
	ref := reference(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created == nil {
		s.created = map[string]runtime.Object{}
	}
	s.created[ref.Kind+" "+ref.Name] = ref
}

// reference is obj reduced to what an event names: its kind, API version and name.
func reference(obj client.Object) *metav1.PartialObjectMetadata {
	gvk, _ := apiutil.GVKForObject(obj, clientgoscheme.Scheme)
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID()},
	}
}

// recordCreatedEvent records one event for the children a pass created: a new Pipeline's
// first pass creates all of them, and one event costs the apiserver one write instead of one
// per child. The first child, in name order, is the event's related object, so that events
// of different passes are not folded into one series.
func (r *Reconciler) recordCreatedEvent(s *scope) {
	if len(s.created) == 0 {
		return
	}
	names := make([]string, 0, len(s.created))
	for n := range s.created {
		names = append(names, n)
	}
	sort.Strings(names)
	r.Recorder.Eventf(s.pipeline, s.created[names[0]], corev1.EventTypeNormal, "Created", "Create",
		"Created %s", strings.Join(names, ", "))
}

// conflict records that obj, holding the name of a child, is not the Pipeline's.
func (s *scope) conflict(obj client.Object) {
	ref := reference(obj)
	s.addProblem(pipelinev1.ReasonNameConflict,
		"%s %s already exists and does not belong to this Pipeline: rename or delete it", ref.Kind, ref.Name)
	s.requeueWithin(conflictRecheckInterval)
}

// applier writes the children of the Pipelines r reconciles.
func (r *Reconciler) applier() *apply.Applier {
	return &apply.Applier{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder}
}

// applyChild makes the child desired describes exist as described and fills current with it
// (see apply.Applier.Apply), recording in s what the pass must know: a child it created, a name
// held by someone else's object, a child being replaced. It returns whether current holds the
// Pipeline's child.
func (r *Reconciler) applyChild(ctx context.Context, s *scope, current client.Object, desired runtime.ApplyConfiguration) (bool, error) {
	res, err := r.applyExistingChild(ctx, s, current, desired)
	return res.Owned, err
}

// applyExistingChild is applyChild that returns the whole apply.Result.
func (r *Reconciler) applyExistingChild(ctx context.Context, s *scope, current client.Object, desired runtime.ApplyConfiguration) (apply.Result, error) {
	res, err := r.applier().Apply(ctx, s.pipeline, current, desired)
	switch {
	case res.Created:
		s.recordCreated(current)
	case res.Conflict:
		s.conflict(current)
	case res.Replacing:
		s.requeueWithin(conflictRetryInterval)
	}
	return res, err
}
