// Command manager runs the pipeline-operator controller manager.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/controller"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(pipelinev1beta1.AddToScheme(scheme))
	utilruntime.Must(apiv2.AddToScheme(scheme))
}

func main() {
	var (
		metricsAddr    string
		probeAddr      string
		leaderElect    bool
		secureMetrics  bool
		enableHTTP2    bool
		leaderElectNS  string
		maxConcurrency int
		lease          = controller.DefaultLeaseTimings()
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0",
		"Address of the metrics endpoint: :8443 for HTTPS, :8080 for HTTP, 0 to disable it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&leaderElect, "leader-elect", false,
		"Elect a leader through a Lease so that only one replica reconciles at a time (config/manager sets it). "+
			"The leader releases the Lease when it stops cleanly, so another replica takes over within the retry period; "+
			"after a crash the others wait for the lease duration.")
	flag.StringVar(&leaderElectNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease; defaults to the manager's own namespace (required outside a cluster).")
	flag.DurationVar(&lease.LeaseDuration, "leader-elect-lease-duration", lease.LeaseDuration,
		"How long the other replicas wait after the leader's last renewal before taking over: what a crash of the leader costs.")
	flag.DurationVar(&lease.RenewDeadline, "leader-elect-renew-deadline", lease.RenewDeadline,
		"How long the leader retries renewing before it stops reconciling and exits; shorter than the lease duration.")
	flag.DurationVar(&lease.RetryPeriod, "leader-elect-retry-period", lease.RetryPeriod,
		"How often the leader renews the Lease and the other replicas try to acquire it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false,
		"Enable HTTP/2 for the metrics server (off: HTTP/2 stream cancellation and rapid reset CVEs).")
	flag.IntVar(&maxConcurrency, "max-concurrent-reconciles", 4, "Pipelines reconciled in parallel (chosen by make bench: docs/performance.md).")
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   metricsAddr,
		SecureServing: secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	mgrOpts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		Cache:                  controller.CacheOptions(),
	}
	if leaderElect {
		controller.EnableLeaderElection(&mgrOpts, controller.LeaderElectionID, leaderElectNS, lease)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), mgrOpts)
	if err != nil {
		setupLog.Error(err, "unable to create manager")
		os.Exit(1)
	}

	metrics, err := controller.NewMetrics(ctrlmetrics.Registry, mgr.GetCache())
	if err != nil {
		setupLog.Error(err, "unable to register metrics")
		os.Exit(1)
	}
	r := &controller.PipelineReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("pipeline-operator"),
		Metrics:   metrics,
	}
	if err := r.SetupWithManager(mgr, controller.WithMaxConcurrentReconciles(maxConcurrency)); err != nil {
		setupLog.Error(err, "unable to set up the Pipeline controller")
		os.Exit(1)
	}

	if err := setupOperatorCondition(mgr); err != nil {
		setupLog.Error(err, "unable to set up the OperatorCondition controller")
		os.Exit(1)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up ready check")
		os.Exit(1)
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// setupOperatorCondition registers the controller of the operator's Upgradeable OperatorCondition
// when OLM runs the operator (it sets OPERATOR_CONDITION_NAME); otherwise the feature is off.
func setupOperatorCondition(mgr ctrl.Manager) error {
	setupLog := ctrl.Log.WithName("setup")
	// The OperatorCondition is read and written directly: caching it would watch every
	// OperatorCondition of the cluster for one object.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("create a client for the OperatorCondition: %w", err)
	}
	cond, err := conditions.InClusterFactory{Client: direct}.NewCondition(apiv2.ConditionType(apiv2.Upgradeable))
	if err != nil {
		setupLog.Info("OLM OperatorCondition off: the operator does not run under OLM", "reason", err.Error())
		return nil
	}
	setupLog.Info("OLM OperatorCondition on: Upgradeable is False while a Pipeline rolls out")
	return (&controller.UpgradeableReconciler{Client: mgr.GetClient(), Condition: cond}).SetupWithManager(mgr)
}
