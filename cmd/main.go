// Command manager runs the pipeline-operator controller manager.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	if err := webhooks.applyEnv(flag.CommandLine, os.LookupEnv); err != nil {
		setupLog.Error(err, "invalid environment")
		os.Exit(1)
	}

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	restConfig := ctrl.GetConfigOrDie()
	webhookServer, selfSigned, err := webhooks.server(tlsOpts)
	if err != nil {
		setupLog.Error(err, "unable to provide the webhook serving certificate")
		os.Exit(1)
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
		// The router binary ships in the manager's image; config/manager names that image here.
		RouterImage: os.Getenv(controller.EnvRouterImage),
	}
	if r.RouterImage == "" {
		setupLog.Info("No router image: Pipelines with spec.router enabled get no router until it is set", "env", controller.EnvRouterImage)
	}
	if err := r.SetupWithManager(mgr, controller.WithMaxConcurrentReconciles(maxConcurrency)); err != nil {
		setupLog.Error(err, "unable to set up the Pipeline controller")
		os.Exit(1)
	}

	if webhooks.enabled {
		if err := setupWebhooks(mgr, selfSigned); err != nil {
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

// The flag that turns the webhooks off, and the environment variable that does the same when
// the flag is not given (kubebuilder's convention).
const (
	enableWebhooksFlag = "enable-webhooks"
	enableWebhooksEnv  = "ENABLE_WEBHOOKS"
)

// applyEnv lets ENABLE_WEBHOOKS decide whether the webhooks are served when fs (parsed) was not
// given --enable-webhooks; an empty value counts as unset.
func (w *webhookFlags) applyEnv(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) error {
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == enableWebhooksFlag })
	v, ok := lookupEnv(enableWebhooksEnv)
	if explicit || !ok || v == "" {
		return nil
	}
	enabled, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%s=%q is neither true nor false", enableWebhooksEnv, v)
	}
	w.enabled = enabled
	return nil
}

func (w *webhookFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&w.enabled, enableWebhooksFlag, true,
		"Serve the Pipeline defaulting and validating webhooks (off for `make run`, where no webhook is registered). "+
			"Without this flag, the environment variable "+enableWebhooksEnv+" (true or false) decides; the flag wins over it.")
	fs.IntVar(&w.port, "webhook-port", webhook.DefaultPort, "Port of the webhook server.")
	fs.StringVar(&w.certDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		"Directory of the webhook serving certificate (tls.crt, tls.key), as mounted by cert-manager or OLM. "+
			"When it holds none, the manager makes a self-signed CA and serving certificate, keeps them in "+
			"--webhook-secret-name, renews them before they expire and keeps the CA in the webhook configurations "+
			"while it runs.")
	fs.StringVar(&w.serviceName, "webhook-service-name", "pipeline-operator-webhook-service",
		"Service through which the apiserver calls the webhooks (names in the self-signed certificate).")
	fs.StringVar(&w.secretName, "webhook-secret-name", "pipeline-operator-webhook-server-cert",
		"Secret, in the manager's namespace, holding the self-signed webhook certificate.")
	fs.StringVar(&w.mutatingWebhookConfiguration, "mutating-webhook-configuration", "pipeline-operator-mutating-webhook-configuration",
		"MutatingWebhookConfiguration that receives the self-signed CA.")
	fs.StringVar(&w.validatingWebhookConfiguration, "validating-webhook-configuration", "pipeline-operator-validating-webhook-configuration",
		"ValidatingWebhookConfiguration that receives the self-signed CA.")
}

// server is the webhook server, nil when the webhooks are off, and the self-signed certificate
// it serves when no certificate is mounted.
func (w *webhookFlags) server(tlsOpts []func(*tls.Config)) (webhook.Server, *webhookcerts.SelfSigned, error) {
	if !w.enabled {
		return nil, nil, nil
	}
	selfSigned, err := w.selfSigned()
	if err != nil {
		return nil, nil, err
	}
	opts := webhook.Options{Port: w.port, CertDir: w.certDir, TLSOpts: tlsOpts}
	if selfSigned != nil {
		// Served from the Secret as it changes, instead of from files.
		opts.TLSOpts = append(slices.Clip(tlsOpts), func(c *tls.Config) { c.GetCertificate = selfSigned.GetCertificate })
	}
	return webhook.NewServer(opts), selfSigned, nil
}

// setupWebhooks registers the Pipeline webhooks, the rotation of the self-signed certificate
// (when selfSigned is not nil) and their readiness checks.
func setupWebhooks(mgr ctrl.Manager, selfSigned *webhookcerts.SelfSigned) error {
	if err := webhookv1beta1.SetupPipelineWebhookWithManager(mgr, mgr.GetCache()); err != nil {
		return err
	}
	// Ready only once the webhook server serves: the webhook Service routes to ready pods.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("add the webhook ready check: %w", err)
	}
	if selfSigned == nil {
		return nil
	}
	if err := selfSigned.SetupWithManager(context.Background(), mgr); err != nil {
		return err
	}
	// And only once the self-signed certificate is served and its CA injected.
	if err := mgr.AddReadyzCheck("webhook-certificate", selfSigned.Ready); err != nil {
		return fmt.Errorf("add the webhook certificate ready check: %w", err)
	}
	return nil
}

// selfSigned is the self-signed certificate provisioning when no certificate is mounted in the
// certificate directory, nil when one is.
func (w *webhookFlags) selfSigned() (*webhookcerts.SelfSigned, error) {
	if webhookcerts.HasCertificate(w.certDir) {
		return nil, nil
	}
	namespace := os.Getenv(controller.EnvPodNamespace)
	if namespace == "" {
		return nil, fmt.Errorf("no certificate in %s and POD_NAMESPACE is not set: mount a certificate "+
			"(cert-manager, OLM), set POD_NAMESPACE for a self-signed one, or disable the webhooks "+
			"(--enable-webhooks=false or ENABLE_WEBHOOKS=false)", w.certDir)
	}
	return &webhookcerts.SelfSigned{
		Namespace:                      namespace,
		SecretName:                     w.secretName,
		ServiceName:                    w.serviceName,
		CertDir:                        filepath.Join(os.TempDir(), "pipeline-operator-webhook-certs"),
		MutatingWebhookConfiguration:   w.mutatingWebhookConfiguration,
		ValidatingWebhookConfiguration: w.validatingWebhookConfiguration,
	}, nil
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
