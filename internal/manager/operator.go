// The operator as one controller manager: the options of this package, the Pipeline and
// OperatorCondition controllers, and the admission webhooks with their certificate.

package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/crd"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/operatorcondition"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/guard"
	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/storageversion"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

// Options are what the manager's command line decides.
type Options struct {
	// MetricsAddr is the address of the metrics endpoint; "0" disables it.
	MetricsAddr string
	// SyncPeriod is how often the informers hand every cached object to the controllers again,
	// so that every Pipeline is reconciled again; nil is controller-runtime's default (10 hours).
	SyncPeriod *time.Duration
	// PprofAddr is the address of Go's profiling endpoints (net/http/pprof, plain HTTP, no
	// authentication); "" or "0" disables them.
	PprofAddr string
	// SecureMetrics serves metrics over HTTPS with authentication and authorization.
	SecureMetrics bool
	// MetricsCertDir holds the metrics serving certificate (tls.crt, tls.key); without one the
	// secure endpoint serves the self-signed webhook certificate when the manager keeps one
	// (it names MetricsServiceName too), else a self-signed certificate made at start.
	MetricsCertDir string
	// MetricsServiceName is the Service in front of the metrics endpoint, in the manager's
	// namespace: the self-signed webhook certificate names it too. Empty names none.
	MetricsServiceName string
	// EnableHTTP2 allows HTTP/2 on the metrics and webhook servers.
	EnableHTTP2 bool
	// ProbeAddr is the address of the health and readiness probes.
	ProbeAddr string
	// LeaderElect turns on leader election through a Lease.
	LeaderElect bool
	// LeaderElectionNamespace is the namespace of the Lease; empty is the manager's own.
	LeaderElectionNamespace string
	// Lease are the timings of leader election.
	Lease leaderelection.Timings
	// MaxConcurrentReconciles is how many Pipelines are reconciled in parallel.
	MaxConcurrentReconciles int
	// Webhooks configure the admission webhook server.
	Webhooks WebhookOptions
	// RouterImage is the image routers run from (resources.EnvRouterImage); empty deploys none.
	RouterImage string
	// ClusterDomain is the cluster's DNS domain (the kubelets' --cluster-domain), in which the
	// operator names the steps' Services: a DNS subdomain, with or without a trailing dot; empty
	// is resources.DefaultClusterDomain.
	ClusterDomain string
	// StorageRevocationGrace is how long steps keep model storage that its ModelStorageClass no
	// longer grants before the operator withdraws it; nil is DefaultStorageRevocationGrace, zero
	// withdraws at once.
	StorageRevocationGrace *time.Duration
	// DisableStepNetworkPolicies gives the steps no NetworkPolicy, and deletes those made before:
	// any pod may then call any step (--step-network-policies=false).
	DisableStepNetworkPolicies bool
	// MetricsRegistry receives the operator's metrics; nil is controller-runtime's global
	// registry, which the metrics endpoint serves.
	MetricsRegistry prometheus.Registerer
	// SeveralInProcess lets a process build more than one manager (tests): controller-runtime
	// otherwise refuses a second controller of the same name.
	SeveralInProcess bool
}

// WebhookOptions configure the webhook server and where its certificate comes from. The server
// always serves the Pipeline CRD's conversion webhook; the admission webhooks only when Enabled.
type WebhookOptions struct {
	// Enabled serves the Pipeline admission (defaulting and validating) webhooks.
	Enabled bool
	// LocalConversion serves the conversion webhook on loopback with a certificate made at start
	// and points ConversionCRD at it, for a manager run outside the cluster.
	LocalConversion bool
	// Host is the address the webhook server listens on; empty is every address.
	Host string
	// Port is the webhook server's port.
	Port int
	// CertDir holds a mounted serving certificate; without one the manager makes its own.
	CertDir string
	// ServiceName is the Service through which the apiserver calls the webhooks.
	ServiceName string
	// SecretName is the Secret, in the manager's namespace, holding the self-signed certificate.
	SecretName string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration (the Pipeline webhooks) and
	// GuardWebhookConfiguration (config/policy's guard webhook; empty when not installed)
	// receive the self-signed CA.
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	GuardWebhookConfiguration      string
	// ConversionCRD is the Pipeline CRD, whose conversion webhook this manager serves and which
	// receives the CA; empty serves no conversion (another manager of the cluster does).
	ConversionCRD string
	// Limits bound what a caller of the webhook port can make the manager hold; the zero value
	// is webhookserver.DefaultLimits.
	Limits webhookserver.Limits
	// ClientCAFile, when set, makes the admission webhooks answer only callers with a client
	// certificate of that CA, naming one of ClientNames when there are any
	// (webhookserver.Server.RequireClients).
	ClientCAFile string
	ClientNames  []string
}

// serves reports whether the manager runs a webhook server at all.
func (w WebhookOptions) serves() bool { return w.Enabled || w.ConversionCRD != "" }

// Scheme is what the manager reads, writes and converts: the built-in kinds, both versions of
// Pipelines, OLM's OperatorConditions and the Pipeline CRD (storageversion).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	addV1beta1(s)
	utilruntime.Must(pipelinev1.AddToScheme(s))
	utilruntime.Must(apiv2.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// DefaultStorageRevocationGrace is the grace of Options.StorageRevocationGrace when unset.
const DefaultStorageRevocationGrace = pipeline.DefaultStorageRevocationGrace

// check refuses options no manager can run with, and returns the cluster's DNS domain.
func (o Options) check() (resources.ClusterDomain, error) {
	if g := o.StorageRevocationGrace; g != nil && *g < 0 {
		return "", fmt.Errorf("the storage revocation grace must not be negative, got %s", *g)
	}
	if o.ClusterDomain == "" {
		return resources.DefaultClusterDomain, nil
	}
	return resources.ParseClusterDomain(o.ClusterDomain)
}

// New builds the manager with every controller and webhook registered, ready to start.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	log := ctrl.Log.WithName("setup")
	domain, err := o.check()
	if err != nil {
		return nil, err
	}
	var tlsOpts []func(*tls.Config)
	if !o.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	certs, err := o.Webhooks.certificates(cfg, o.MetricsServiceName)
	if err != nil {
		return nil, fmt.Errorf("provide the webhook serving certificate: %w", err)
	}
	registry := o.MetricsRegistry
	if registry == nil {
		registry = ctrlmetrics.Registry
	}
	webhookServer, err := o.Webhooks.server(tlsOpts, certs, registry)
	if err != nil {
		return nil, err
	}
	mgrOpts := ctrl.Options{
		Scheme:                 Scheme(),
		Metrics:                o.metricsServer(certs.selfSigned, tlsOpts),
		WebhookServer:          webhookServer,
		HealthProbeBindAddress: o.ProbeAddr,
		PprofBindAddress:       o.PprofAddr,
		Cache:                  apply.CacheOptions(),
	}
	mgrOpts.Cache.SyncPeriod = o.SyncPeriod
	if o.SeveralInProcess {
		mgrOpts.Controller.SkipNameValidation = ptr.To(true)
	}
	if o.LeaderElect {
		leaderelection.Enable(&mgrOpts, leaderelection.ID, o.LeaderElectionNamespace, o.Lease)
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}

	m, err := metrics.New(registry, mgr.GetCache())
	if err != nil {
		return nil, fmt.Errorf("register the metrics: %w", err)
	}
	r := &pipeline.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorder("pipeline-operator"),
		Metrics:       m,
		RouterImage:   o.RouterImage,
		ClusterDomain: domain,

		StorageRevocationGrace:     o.StorageRevocationGrace,
		DisableStepNetworkPolicies: o.DisableStepNetworkPolicies,
		RecordStorageIdentity:      recordStorageIdentity,
	}
	if r.RouterImage == "" {
		log.Info("No router image: Pipelines with dataPath.mode Router get no router until it is set", "env", resources.EnvRouterImage)
	}
	if r.DisableStepNetworkPolicies {
		log.Info("Step NetworkPolicies are off: any pod of the cluster may call any step of a Pipeline directly, " +
			"around its router; the policies made before are deleted (see docs/security.md)")
	}
	if err := r.SetupWithManager(mgr, pipeline.WithMaxConcurrentReconciles(o.MaxConcurrentReconciles)); err != nil {
		return nil, fmt.Errorf("set up the Pipeline controller: %w", err)
	}
	if err := setupWebhooks(mgr, certs, o.Webhooks); err != nil {
		return nil, fmt.Errorf("set up the Pipeline webhooks: %w", err)
	}
	if !o.Webhooks.Enabled {
		log.Info("Webhooks are off: storage sources are not checked against the rights of who asks for them. " +
			"Anyone who may create Pipelines can have the operator create a PersistentVolume for any NFS export or " +
			"CSI volume (see docs/security.md); keep the webhooks on in a cluster shared with others")
	}
	// The CRD (read once by the storage migration) and the OperatorCondition (one object) are
	// read and written directly: caching either would watch every object of its kind.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("create a client without cache: %w", err)
	}
	if err := mgr.Add(&storageversion.Migration{Client: direct, RecordStorageIdentity: recordStorageIdentity}); err != nil {
		return nil, fmt.Errorf("add the storage version migration: %w", err)
	}
	if err := setupOperatorCondition(mgr, direct); err != nil {
		return nil, fmt.Errorf("set up the OperatorCondition controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add the ready check: %w", err)
	}
	return mgr, nil
}

// metricsServer are the options of the metrics endpoint: without a certificate in
// MetricsCertDir, it serves the self-signed webhook certificate when the manager keeps one
// (selfSigned not nil).
func (o Options) metricsServer(selfSigned *webhookserver.SelfSigned, tlsOpts []func(*tls.Config)) metricsserver.Options {
	var webhookCert GetCertificateFunc
	if selfSigned != nil {
		webhookCert = selfSigned.GetCertificate
	}
	return MetricsServerOptions(o.MetricsAddr, o.SecureMetrics, o.MetricsCertDir, webhookCert, tlsOpts)
}

// certificates is where the webhook server's certificate comes from: made at start for the
// loopback address (LocalConversion), mounted in CertDir (cert-manager, OLM: both nil), or
// self-signed and kept in a Secret.
type certificates struct {
	local      *webhookserver.LocalConversion
	selfSigned *webhookserver.SelfSigned
}

func (w WebhookOptions) certificates(cfg *rest.Config, metricsService string) (certificates, error) {
	if !w.serves() {
		return certificates{}, nil
	}
	if w.LocalConversion {
		if w.ConversionCRD == "" {
			return certificates{}, errors.New("--local-conversion needs --conversion-crd")
		}
		writer, err := client.New(cfg, client.Options{})
		if err != nil {
			return certificates{}, fmt.Errorf("create a client for the conversion webhook of CRD %s: %w", w.ConversionCRD, err)
		}
		local, err := webhookserver.NewLocalConversion(w.ConversionCRD, w.Port, writer, time.Now())
		return certificates{local: local}, err
	}
	if webhookserver.HasCertificate(w.CertDir) {
		return certificates{}, nil
	}
	namespace := os.Getenv(operatorcondition.EnvPodNamespace)
	if namespace == "" {
		return certificates{}, fmt.Errorf("no certificate in %s and POD_NAMESPACE is not set: mount a certificate "+
			"(cert-manager, OLM), set POD_NAMESPACE for a self-signed one, or run the manager outside the "+
			"cluster with --local-conversion", w.CertDir)
	}
	var extra []string
	if metricsService != "" {
		extra = []string{metricsService}
	}
	selfSigned := &webhookserver.SelfSigned{
		Namespace:     namespace,
		SecretName:    w.SecretName,
		ServiceName:   w.ServiceName,
		ExtraServices: extra,
		CertDir:       filepath.Join(os.TempDir(), "pipeline-operator-webhook-certs"),
		ConversionCRD: w.ConversionCRD,
	}
	if w.Enabled {
		selfSigned.MutatingWebhookConfiguration = w.MutatingWebhookConfiguration
		selfSigned.ValidatingWebhookConfiguration = w.ValidatingWebhookConfiguration
		selfSigned.GuardWebhookConfiguration = w.GuardWebhookConfiguration
	}
	return certificates{selfSigned: selfSigned}, nil
}

// server is the webhook server, serving the certificate of c within w.Limits, its metric
// registered with reg; nil when nothing is served.
func (w WebhookOptions) server(tlsOpts []func(*tls.Config), c certificates, reg prometheus.Registerer) (webhook.Server, error) {
	if !w.serves() {
		return nil, nil
	}
	opts := webhook.Options{Host: w.Host, Port: w.Port, CertDir: w.CertDir, TLSOpts: tlsOpts}
	switch {
	case c.local != nil:
		opts.Host = webhookserver.LoopbackHost
		opts.TLSOpts = append(slices.Clip(tlsOpts), func(t *tls.Config) { t.GetCertificate = c.local.GetCertificate })
	case c.selfSigned != nil:
		// Served from the Secret as it changes, instead of from files.
		opts.TLSOpts = append(slices.Clip(tlsOpts), func(t *tls.Config) { t.GetCertificate = c.selfSigned.GetCertificate })
	}
	limits := w.Limits
	if limits == (webhookserver.Limits{}) {
		limits = webhookserver.DefaultLimits()
	}
	pipelines, err := crd.Pipelines()
	if err != nil {
		return nil, err
	}
	srv, err := webhookserver.NewServer(opts, limits, webhookserver.ObjectShape(pipelines), reg)
	if err != nil {
		return nil, fmt.Errorf("create the webhook server: %w", err)
	}
	if w.ClientCAFile != "" {
		if err := srv.RequireClients(w.ClientCAFile, w.ClientNames); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

// setupWebhooks registers the conversion webhook and the admission webhooks as w says, the
// certificate's provisioning and their readiness checks.
func setupWebhooks(mgr ctrl.Manager, c certificates, w WebhookOptions) error {
	if !w.serves() {
		return nil
	}
	if w.ConversionCRD != "" {
		if err := pipelineadmission.SetupConversionWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	if w.Enabled {
		if err := pipelineadmission.SetupPipelineWebhookWithManager(mgr, mgr.GetCache(), ownServiceAccount(mgr.GetClient()), spellings); err != nil {
			return err
		}
		srv, ok := mgr.GetWebhookServer().(*webhookserver.Server)
		if !ok {
			return fmt.Errorf("the guard webhook needs the manager's bounded webhook server, not %T", mgr.GetWebhookServer())
		}
		// Services and volumes: no schema of this module bounds them, the review's limits do.
		srv.RegisterAdmission(guard.Path, nil, guard.NewWebhook(mgr))
	}
	// Ready only once the webhook server serves: the webhook Service routes to ready pods.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("add the webhook ready check: %w", err)
	}
	if c.local != nil {
		if err := mgr.Add(c.local); err != nil {
			return fmt.Errorf("add the local conversion webhook: %w", err)
		}
	}
	if c.selfSigned == nil {
		return nil
	}
	if err := c.selfSigned.SetupWithManager(context.Background(), mgr); err != nil {
		return err
	}
	// And only once the self-signed certificate is served and its CA injected.
	if err := mgr.AddReadyzCheck("webhook-certificate", c.selfSigned.Ready); err != nil {
		return fmt.Errorf("add the webhook certificate ready check: %w", err)
	}
	return nil
}

// setupOperatorCondition registers the controller of the operator's Upgradeable OperatorCondition
// when OLM runs the operator (it sets OPERATOR_CONDITION_NAME); otherwise the feature is off. The
// condition is found from POD_NAMESPACE when it is set, so a manager run outside a Pod keeps it too.
// direct reads and writes the OperatorCondition without the cache.
func setupOperatorCondition(mgr ctrl.Manager, direct client.Client) error {
	log := ctrl.Log.WithName("setup")
	cond, err := operatorcondition.New(direct, apiv2.ConditionType(apiv2.Upgradeable), os.Getenv)
	if err != nil {
		log.Info("OLM OperatorCondition off: the operator does not run under OLM", "reason", err.Error())
		return nil
	}
	log.Info("OLM OperatorCondition on: Upgradeable is False while a Pipeline rolls out")
	return (&operatorcondition.UpgradeableReconciler{Client: mgr.GetClient(), Condition: cond}).SetupWithManager(mgr)
}

// ownServiceAccount is the user name the manager acts as when that is a ServiceAccount (in a
// cluster), as the apiserver says it (a SelfSubjectReview, which every authenticated user may
// make); empty for any other user (make run, as its kubeconfig's), or when the apiserver does not
// answer. The Pipeline webhook refuses that identity a change of a Pipeline's spec.
func ownServiceAccount(c client.Client) string {
	log := ctrl.Log.WithName("setup")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		log.Info("The apiserver does not say which user the manager is (SelfSubjectReview): the Pipeline webhook does not "+
			"refuse it a change of a Pipeline's spec", "error", err.Error())
		return ""
	}
	if u := review.Status.UserInfo.Username; strings.HasPrefix(u, serviceAccountUserPrefix) {
		return u
	}
	return ""
}

// serviceAccountUserPrefix begins the user name of every ServiceAccount.
const serviceAccountUserPrefix = "system:serviceaccount:"
