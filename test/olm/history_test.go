package olm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// followedKinds are the kinds a history follows: the namespaced children of a Pipeline, and the
// ReplicaSets and Pods of its steps.
var followedKinds = []schema.GroupVersionKind{
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
	corev1.SchemeGroupVersion.WithKind("Pod"),
}

// history is every change the apiserver made to the objects of followedKinds in one namespace
// from a snapshot on, as its watch reports them: each change is one event, so that counting
// events counts changes exactly, whoever made them and whether or not they bumped the
// generation (an owner reference change does not).
type history struct {
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup

	mu sync.Mutex
	// before and last are the objects at the snapshot and as last reported, by "<kind> <name>".
	before, last map[string]*metav1.PartialObjectMetadata
	// ownerChanges counts, by object, the changes of its ownerReferences.
	ownerChanges map[string]int
	// created and deleted are the objects created and deleted after the snapshot.
	created, deleted []string
	errs             []string
}

// recordHistory lists the objects of followedKinds in namespace ns (the snapshot) and follows
// every change to them from the resourceVersion of each list on, until stop.
func recordHistory(ctx context.Context, ns string) *history {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(ctx)
	h := &history{cancel: cancel, before: map[string]*metav1.PartialObjectMetadata{},
		last: map[string]*metav1.PartialObjectMetadata{}, ownerChanges: map[string]int{}}
	for _, gvk := range followedKinds {
		listKind := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(listKind)
		Expect(admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for i := range list.Items {
			key := gvk.Kind + " " + list.Items[i].Name
			h.before[key], h.last[key] = list.Items[i].DeepCopy(), list.Items[i].DeepCopy()
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				l := &metav1.PartialObjectMetadataList{}
				l.SetGroupVersionKind(listKind)
				return admin.Watch(ctx, l, client.InNamespace(ns), &client.ListOptions{Raw: &opts})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		h.wg.Go(func() { h.follow(gvk.Kind, w) })
	}
	return h
}

// follow records the events of w, a watch of kind, until it ends.
func (h *history) follow(kind string, w *watchtools.RetryWatcher) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		h.mu.Lock()
		h.record(kind, ev)
		h.mu.Unlock()
	}
}

func (h *history) record(kind string, ev watch.Event) {
	if ev.Type == watch.Error {
		h.errs = append(h.errs, fmt.Sprintf("watch of %s: %v", kind, apierrors.FromObject(ev.Object)))
		return
	}
	obj, ok := ev.Object.(*metav1.PartialObjectMetadata)
	if !ok {
		if ev.Type != watch.Bookmark {
			h.errs = append(h.errs, fmt.Sprintf("watch of %s: a %s event of %T", kind, ev.Type, ev.Object))
		}
		return
	}
	key := kind + " " + obj.Name
	switch ev.Type {
	case watch.Added:
		h.created = append(h.created, key)
	case watch.Deleted:
		h.deleted = append(h.deleted, key)
	case watch.Modified:
		if was, ok := h.last[key]; ok && !apiequality.Semantic.DeepEqual(was.OwnerReferences, obj.OwnerReferences) {
			h.ownerChanges[key]++
		}
	}
	h.last[key] = obj.DeepCopy()
}

// stop ends the watches and waits for them; stopping twice is harmless.
func (h *history) stop() {
	h.once.Do(func() {
		h.cancel()
		h.wg.Wait()
	})
}

// controlledByPipelines maps every object, as last reported, whose controller is a Pipeline to
// the apiVersion its controller reference names.
func (h *history) controlledByPipelines() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for key, obj := range h.last {
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.Kind == "Pipeline" {
			out[key] = ref.APIVersion
		}
	}
	return out
}

// mostOwnerChanges is the largest number of owner reference changes of one object so far.
func (h *history) mostOwnerChanges() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	most := 0
	for _, n := range h.ownerChanges {
		most = max(most, n)
	}
	return most
}

// objects are copies of the objects at the snapshot and as last reported, by "<kind> <name>".
func (h *history) objects() (before, last map[string]*metav1.PartialObjectMetadata) {
	h.mu.Lock()
	defer h.mu.Unlock()
	before, last = map[string]*metav1.PartialObjectMetadata{}, map[string]*metav1.PartialObjectMetadata{}
	for k, obj := range h.before {
		before[k] = obj.DeepCopy()
	}
	for k, obj := range h.last {
		last[k] = obj.DeepCopy()
	}
	return before, last
}

// outcome is what the history saw: the objects created and deleted after the snapshot, the
// number of owner reference changes by object, and the errors of the watches.
func (h *history) outcome() (created, deleted []string, ownerChanges map[string]int, errs []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ownerChanges = map[string]int{}
	for k, n := range h.ownerChanges {
		ownerChanges[k] = n
	}
	return append([]string(nil), h.created...), append([]string(nil), h.deleted...), ownerChanges, append([]string(nil), h.errs...)
}

// summary describes the history for a failure message and the timings.
func (h *history) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.ownerChanges))
	for k := range h.ownerChanges {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	changes := make([]string, 0, len(keys))
	for _, k := range keys {
		changes = append(changes, fmt.Sprintf("%s ×%d", k, h.ownerChanges[k]))
	}
	return fmt.Sprintf("owner reference changes %v; created %v; deleted %v; errors %v", changes, h.created, h.deleted, h.errs)
}

// expectRolledOnce checks a history that spans an upgrade which changed the owner references of a
// Pipeline's children and the pod template of each step once (the release before named the next
// step by a name DNS search domains apply to, and gave the pods Service links): every object of
// the snapshot is still the same object, each Deployment's generation rose by exactly one, each
// made one new ReplicaSet whose pod replaced the step's pod of the snapshot, the NetworkPolicy
// of the second step was created (the release before made none), nothing else was created or
// deleted, and the owner references of each object changed at most once.
func expectRolledOnce(h *history) {
	GinkgoHelper()
	created, deleted, ownerChanges, errs := h.outcome()
	Expect(errs).To(BeEmpty())
	for key, n := range ownerChanges {
		Expect(n).To(BeNumerically("<=", 1), "the owner references of %s changed %d times", key, n)
	}
	kinds := map[string]int{}
	for _, key := range created {
		kind, _, _ := strings.Cut(key, " ")
		kinds[kind]++
	}
	Expect(kinds).To(Equal(map[string]int{"ReplicaSet": 2, "Pod": 2, "NetworkPolicy": 1}),
		"one ReplicaSet and one pod per step, and the steps' NetworkPolicy: created %v", created)
	before, last := h.objects()
	var oldPods []string
	oldHashes := map[string]bool{}
	for key, b := range before {
		kind, _, _ := strings.Cut(key, " ")
		a := last[key]
		Expect(a).NotTo(BeNil(), key)
		Expect(a.UID).To(Equal(b.UID), "%s is the same object", key)
		switch kind {
		case "Deployment":
			Expect(a.Generation-b.Generation).To(Equal(int64(1)), "%s: generation %d, then %d", key, b.Generation, a.Generation)
		case "Pod":
			oldPods = append(oldPods, key)
			oldHashes[b.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = true
		}
	}
	Expect(oldPods).To(HaveLen(2), "the snapshot holds the two steps' pods")
	Expect(deleted).To(ConsistOf(oldPods), "the steps' pods of the snapshot are replaced, and nothing else is deleted")
	for _, key := range created {
		if kind, _, _ := strings.Cut(key, " "); kind == "Pod" {
			Expect(oldHashes).NotTo(HaveKey(last[key].Labels[appsv1.DefaultDeploymentUniqueLabelKey]), "%s runs the new pod template", key)
		}
	}
}
