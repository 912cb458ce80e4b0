// Command manager runs the pipeline-operator controller manager.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/controller"
	"github.com/ndsl-cn/pipeline-operator/internal/manager"
	webhookcerts "github.com/ndsl-cn/pipeline-operator/internal/webhook"
	webhookv1beta1 "github.com/ndsl-cn/pipeline-operator/internal/webhook/v1beta1"
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
		webhooks       webhookFlags
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
	webhooks.bind(flag.CommandLine)
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	restConfig := ctrl.GetConfigOrDie()
	var webhookServer webhook.Server
	if webhooks.enabled {
		certDir, err := webhooks.certificates(context.Background(), restConfig)
		if err != nil {
			setupLog.Error(err, "unable to provide the webhook serving certificate")
			os.Exit(1)
		}
		webhookServer = webhook.NewServer(webhook.Options{Port: webhooks.port, CertDir: certDir, TLSOpts: tlsOpts})
	}

	mgrOpts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                manager.MetricsServerOptions(metricsAddr, secureMetrics, tlsOpts),
		WebhookServer:          webhookServer,
		HealthProbeBindAddress: probeAddr,
		Cache:                  controller.CacheOptions(),
	}
	if leaderElect {
		controller.EnableLeaderElection(&mgrOpts, controller.LeaderElectionID, leaderElectNS, lease)
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
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

	if webhooks.enabled {
		if err := webhookv1beta1.SetupPipelineWebhookWithManager(mgr, mgr.GetCache()); err != nil {
			setupLog.Error(err, "unable to set up the Pipeline webhooks")
			os.Exit(1)
		}
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
	if webhooks.enabled {
		// Ready only once the webhook server serves: the webhook Service routes to ready pods.
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			setupLog.Error(err, "unable to set up the webhook ready check")
			os.Exit(1)
		}
	}

	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// webhookFlags configure the admission webhook server and where its certificate comes from.
type webhookFlags struct {
	enabled                        bool
	port                           int
	certDir                        string
	serviceName                    string
	secretName                     string
	mutatingWebhookConfiguration   string
	validatingWebhookConfiguration string
}

func (w *webhookFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&w.enabled, "enable-webhooks", true,
		"Serve the Pipeline defaulting and validating webhooks (off for `make run`, where no webhook is registered).")
	fs.IntVar(&w.port, "webhook-port", webhook.DefaultPort, "Port of the webhook server.")
	fs.StringVar(&w.certDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		"Directory of the webhook serving certificate (tls.crt, tls.key), as mounted by cert-manager or OLM. "+
			"When it holds none, the manager makes a self-signed CA, keeps it in --webhook-secret-name and "+
			"injects it into the webhook configurations.")
	fs.StringVar(&w.serviceName, "webhook-service-name", "pipeline-operator-webhook-service",
		"Service through which the apiserver calls the webhooks (names in the self-signed certificate).")
	fs.StringVar(&w.secretName, "webhook-secret-name", "pipeline-operator-webhook-server-cert",
		"Secret, in the manager's namespace, holding the self-signed webhook certificate.")
	fs.StringVar(&w.mutatingWebhookConfiguration, "mutating-webhook-configuration", "pipeline-operator-mutating-webhook-configuration",
		"MutatingWebhookConfiguration that receives the self-signed CA.")
	fs.StringVar(&w.validatingWebhookConfiguration, "validating-webhook-configuration", "pipeline-operator-validating-webhook-configuration",
		"ValidatingWebhookConfiguration that receives the self-signed CA.")
}

// certificates returns the directory the webhook server reads its certificate from: the
// mounted one, else a self-signed one made (or read back from its Secret) now.
func (w *webhookFlags) certificates(ctx context.Context, cfg *rest.Config) (string, error) {
	if webhookcerts.HasCertificate(w.certDir) {
		return w.certDir, nil
	}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		return "", fmt.Errorf("no certificate in %s and POD_NAMESPACE is not set: mount a certificate "+
			"(cert-manager, OLM), set POD_NAMESPACE for a self-signed one, or pass --enable-webhooks=false", w.certDir)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "", fmt.Errorf("create client: %w", err)
	}
	dir := filepath.Join(os.TempDir(), "pipeline-operator-webhook-certs")
	certs := &webhookcerts.SelfSigned{
		Client:                         c,
		Namespace:                      namespace,
		SecretName:                     w.secretName,
		ServiceName:                    w.serviceName,
		CertDir:                        dir,
		MutatingWebhookConfiguration:   w.mutatingWebhookConfiguration,
		ValidatingWebhookConfiguration: w.validatingWebhookConfiguration,
	}
	if err := certs.Ensure(ctx); err != nil {
		return "", err
	}
	return dir, nil
}

// setupOperatorCondition registers the controller of the operator's Upgradeable OperatorCondition
// when OLM runs the operator (it sets OPERATOR_CONDITION_NAME); otherwise the feature is off. The
// condition is found from POD_NAMESPACE when it is set, so a manager run outside a Pod keeps it too.
func setupOperatorCondition(mgr ctrl.Manager) error {
	setupLog := ctrl.Log.WithName("setup")
	// The OperatorCondition is read and written directly: caching it would watch every
	// OperatorCondition of the cluster for one object.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("create a client for the OperatorCondition: %w", err)
	}
	cond, err := controller.NewOperatorCondition(direct, apiv2.ConditionType(apiv2.Upgradeable), os.Getenv)
	if err != nil {
		setupLog.Info("OLM OperatorCondition off: the operator does not run under OLM", "reason", err.Error())
		return nil
	}
	setupLog.Info("OLM OperatorCondition on: Upgradeable is False while a Pipeline rolls out")
	return (&controller.UpgradeableReconciler{Client: mgr.GetClient(), Condition: cond}).SetupWithManager(mgr)
}
