package pipeline

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/operatorcondition"
	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// ownManagerLabel marks the Pipelines of a test that runs managers of its own (its value is the
// test's namespace): the suite's manager leaves them alone, and each of those managers sees
// only the Pipelines of its test.
const ownManagerLabel = "test.distri-infer.ndsl.cn/own-manager"

// suiteCacheOptions are the operator's cache options for the suite's manager: without the
// Pipelines of tests that run their own managers.
func suiteCacheOptions() cache.Options {
	opts := apply.CacheOptions()
	notOwn, err := labels.NewRequirement(ownManagerLabel, selection.DoesNotExist, nil)
	Expect(err).NotTo(HaveOccurred())
	opts.ByObject[&pipelinev1.Pipeline{}] = cache.ByObject{Label: labels.NewSelector().Add(*notOwn)}
	return opts
}

// forOwnManagers labels a Pipeline for the managers of the test running in namespace ns.
func forOwnManagers(ns string) func(*pipelinev1.Pipeline) {
	return func(p *pipelinev1.Pipeline) { metav1.SetMetaDataLabel(&p.ObjectMeta, ownManagerLabel, ns) }
}

// lifecycleScheme knows the operator's types and OLM's OperatorCondition, as the operator's
// manager does: the suite's scheme and OLM's types.
func lifecycleScheme() *runtime.Scheme {
	GinkgoHelper()
	s := testenv.Scheme()
	Expect(apiv2.AddToScheme(s)).To(Succeed())
	return s
}

// ownManager is an operator process of a test: a manager with its own cache and connections,
// whose every write to the apiserver is counted.
type ownManager struct {
	mgr     ctrl.Manager
	counter *writeCounter
	passes  *atomic.Int64
	cancel  context.CancelFunc
	done    chan error
}

// ownManagerOptions configure a test's manager.
type ownManagerOptions struct {
	// leaseID, when set, turns on leader election for the Lease of that name in the test's namespace.
	leaseID string
	lease   leaderelection.Timings
	// condition, when set, runs the Upgradeable controller with it.
	condition conditions.Condition
	// disableStepNetworkPolicies is the manager's --step-network-policies=false.
	disableStepNetworkPolicies bool
}

// startOwnManager starts a manager for the Pipelines of the test in namespace ns, set up as
// cmd/ sets up the operator's. Leader election talks to the apiserver through a connection of its
// own, so that the counted writes are the operator's alone.
func startOwnManager(ns string, o ownManagerOptions) *ownManager {
	GinkgoHelper()
	m := &ownManager{counter: &writeCounter{}, passes: &atomic.Int64{}, done: make(chan error, 1)}
	counting := rest.CopyConfig(cfg)
	counting.Wrap(m.counter.wrap)

	opts := apply.CacheOptions()
	opts.ByObject[&pipelinev1.Pipeline{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{ownManagerLabel: ns})}
	mgrOpts := ctrl.Options{
		Scheme:     lifecycleScheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      opts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if o.leaseID != "" {
		leaderelection.Enable(&mgrOpts, o.leaseID, ns, o.lease)
		mgrOpts.LeaderElectionConfig = rest.CopyConfig(cfg)
	}
	var err error
	m.mgr, err = ctrl.NewManager(counting, mgrOpts)
	Expect(err).NotTo(HaveOccurred())
	r := &countingReconciler{Reconciler: &Reconciler{
		Client:    m.mgr.GetClient(),
		APIReader: m.mgr.GetAPIReader(),
		Recorder:  m.mgr.GetEventRecorder("pipeline-operator"),

		DisableStepNetworkPolicies: o.disableStepNetworkPolicies,
	}, passes: m.passes}
	Expect(r.SetupWithManager(m.mgr)).To(Succeed())
	if o.condition != nil {
		Expect((&operatorcondition.UpgradeableReconciler{Client: m.mgr.GetClient(), Condition: o.condition}).SetupWithManager(m.mgr)).To(Succeed())
	}

	var ctx context.Context
	ctx, m.cancel = context.WithCancel(context.Background())
	go func() { m.done <- m.mgr.Start(ctx) }()
	DeferCleanup(m.stop)
	return m
}

// elected reports whether the manager leads (always, without leader election).
func (m *ownManager) elected() bool {
	select {
	case <-m.mgr.Elected():
		return true
	default:
		return false
	}
}

// stop cancels the manager and waits until it has stopped; stopping twice is harmless.
func (m *ownManager) stop() {
	GinkgoHelper()
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	Eventually(m.done, "30s").Should(Receive(Not(HaveOccurred())))
}

// countingReconciler counts the passes of the reconciler it wraps.
type countingReconciler struct {
	*Reconciler
	passes *atomic.Int64
}

func (r *countingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.passes.Add(1)
	return r.Reconciler.Reconcile(ctx, req)
}

func (r *countingReconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	if err := setupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := r.watches(ctrl.NewControllerManagedBy(mgr).For(&pipelinev1.Pipeline{}))
	for _, o := range opts {
		o(b)
	}
	return b.Complete(r)
}
