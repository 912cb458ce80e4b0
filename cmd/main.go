// Command manager runs the pipeline-operator controller manager: it parses the command line
// and starts the manager that internal/manager wires.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/operatorcondition"
	"github.com/ndsl-cn/pipeline-operator/internal/installcheck"
	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
	"github.com/ndsl-cn/pipeline-operator/internal/manager"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/version"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

func main() {
	o := manager.Options{Lease: leaderelection.DefaultTimings()}
	var webhooks webhookFlags
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", "0",
		"Address of the metrics endpoint: :8443 for HTTPS, :8080 for HTTP, 0 to disable it.")
	flag.StringVar(&o.PprofAddr, "pprof-bind-address", "0",
		"Address of Go's profiling endpoints (/debug/pprof/, plain HTTP without authentication): 127.0.0.1:6060 to profile "+
			"the manager from its own machine or pod (kubectl port-forward), 0 to disable them. make bench profiles through it.")
	syncPeriod := flag.Duration("sync-period", 10*time.Hour,
		"How often every Pipeline is reconciled again even when nothing changed (the informers' resync). A pass over a "+
			"converged Pipeline writes nothing.")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&o.LeaderElect, "leader-elect", false,
		"Elect a leader through a Lease so that only one replica reconciles at a time (config/manager sets it). "+
			"The leader releases the Lease when it stops cleanly, so another replica takes over within the retry period; "+
			"after a crash the others wait for the lease duration.")
	flag.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease; defaults to the manager's own namespace (required outside a cluster).")
	flag.DurationVar(&o.Lease.LeaseDuration, "leader-elect-lease-duration", o.Lease.LeaseDuration,
		"How long the other replicas wait after the leader's last renewal before taking over: what a crash of the leader costs.")
	flag.DurationVar(&o.Lease.RenewDeadline, "leader-elect-renew-deadline", o.Lease.RenewDeadline,
		"How long the leader retries renewing before it stops reconciling and exits; shorter than the lease duration.")
	flag.DurationVar(&o.Lease.RetryPeriod, "leader-elect-retry-period", o.Lease.RetryPeriod,
		"How often the leader renews the Lease and the other replicas try to acquire it.")
	flag.BoolVar(&o.SecureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS with authentication and authorization.")
	flag.StringVar(&o.MetricsCertDir, "metrics-cert-dir", filepath.Join(os.TempDir(), "k8s-metrics-server", "serving-certs"),
		"Directory of the metrics serving certificate (tls.crt, tls.key), as mounted from cert-manager's Secret; "+
			"reloaded when it changes. When it holds none, the HTTPS metrics endpoint serves the manager's self-signed "+
			"webhook certificate (verified with the ca.crt of --webhook-secret-name) when the manager keeps one, "+
			"else a self-signed certificate made at start, which Prometheus cannot verify.")
	flag.StringVar(&o.MetricsServiceName, "metrics-service-name", "pipeline-operator-controller-manager-metrics-service",
		"Service of the metrics endpoint, in the manager's namespace: the self-signed webhook certificate names it too "+
			"(empty: it does not).")
	flag.BoolVar(&o.EnableHTTP2, "enable-http2", false,
		"Enable HTTP/2 for the metrics server (off: HTTP/2 stream cancellation and rapid reset CVEs).")
	flag.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "Pipelines reconciled in parallel (chosen by make bench: docs/performance.md).")
	flag.StringVar(&o.ClusterDomain, "cluster-domain", string(resources.DefaultClusterDomain),
		"DNS domain of the cluster's Services (the kubelets' --cluster-domain). The step URLs the operator hands out "+
			"(NEXT_STEP_URL, the router's configuration, status.steps[].url) name each Service by its absolute name, "+
			"<service>.<namespace>.svc.<domain>. with the trailing dot, so that no DNS search domain is tried first. "+
			"Changing it rolls every step and router once.")
	stepPolicies := flag.Bool("step-network-policies", true,
		"Give every Pipeline whose entry calls other steps a NetworkPolicy that admits to those steps only the Pipeline's "+
			"router (dataPath.mode Router) or its own steps (Chain); the entry stays open. Off: no such policy, and those "+
			"made before are deleted, so that any pod may call any step. Enforced only by a network plugin that enforces "+
			"NetworkPolicy (docs/security.md).")
	grace := flag.Duration("storage-revocation-grace", manager.DefaultStorageRevocationGrace,
		"How long the steps of a Pipeline keep modelStorageClass storage after its ModelStorageClass is deleted or stops "+
			"selecting the namespace (reported at once in the ModelStorageAuthorized condition). Then the operator withdraws it: "+
			"the steps are scaled to zero and the model volume and claim deleted (the data on the share is not touched); "+
			"they are made again when the class grants the storage again. 0 withdraws at once.")
	webhooks.bind(flag.CommandLine)
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the release of the manager and exit.")
	checkInstall := flag.Bool("check-install", false,
		"Check that the operator installed in the cluster answers, then exit (0: it does): server-side dry runs of "+
			"Pipelines in the namespace POD_NAMESPACE, which the defaulting webhook must default and the validating "+
			"webhook refuse when invalid. The Helm chart's test pod runs it (helm test).")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String("pipeline-operator manager"))
		return
	}
	if *checkInstall {
		if err := runInstallCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "install check failed:", err)
			os.Exit(1)
		}
		fmt.Println("install check passed: the operator's webhooks default and validate Pipelines")
		return
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if err := webhooks.applyEnv(flag.CommandLine, os.LookupEnv); err != nil {
		log.Error(err, "invalid environment")
		os.Exit(1)
	}
	o.Webhooks = webhooks.WebhookOptions
	o.StorageRevocationGrace = grace
	o.SyncPeriod = syncPeriod
	o.DisableStepNetworkPolicies = !*stepPolicies
	if limit, err := manager.SetMemoryLimit(os.LookupEnv); err != nil {
		log.Error(err, "invalid environment")
		os.Exit(1)
	} else if limit > 0 {
		log.Info("Go memory limit set from the container's", "bytes", limit)
	}
	// The router binary ships in the manager's image; config/manager names that image here.
	o.RouterImage = os.Getenv(resources.EnvRouterImage)

	mgr, err := manager.New(ctrl.GetConfigOrDie(), o)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	log.Info("starting manager", "version", version.Version, "goversion", runtime.Version())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// webhookFlags are the command line of the admission webhook server.
type webhookFlags struct {
	manager.WebhookOptions
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
	w.Enabled = enabled
	return nil
}

func (w *webhookFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&w.Enabled, enableWebhooksFlag, true,
		"Serve the Pipeline defaulting and validating webhooks (off for `make run`, where no webhook is registered; "+
			"the conversion webhook is served either way). "+
			"Without this flag, the environment variable "+enableWebhooksEnv+" (true or false) decides; the flag wins over it.")
	fs.BoolVar(&w.LocalConversion, "local-conversion", false,
		"For a manager run outside the cluster (make run, make demo) on the machine of the cluster's apiserver: serve the "+
			"webhooks on 127.0.0.1 with a certificate made at start, and point the conversion webhook of --conversion-crd "+
			"at that address (needs the right to patch the CRD). Without it, the conversion webhook is called through "+
			"--webhook-service-name, as the admission webhooks are.")
	fs.StringVar(&w.ConversionCRD, "conversion-crd", "pipelines.distri-infer.ndsl.cn",
		"CustomResourceDefinition whose conversion webhook the manager serves, and which receives the self-signed CA.")
	fs.IntVar(&w.Port, "webhook-port", webhook.DefaultPort, "Port of the webhook server.")
	fs.StringVar(&w.CertDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		"Directory of the webhook serving certificate (tls.crt, tls.key), as mounted by cert-manager or OLM. "+
			"When it holds none, the manager makes a self-signed CA and serving certificate, keeps them in "+
			"--webhook-secret-name, renews them before they expire and keeps the CA in the webhook configurations "+
			"while it runs.")
	fs.StringVar(&w.ServiceName, "webhook-service-name", "pipeline-operator-webhook-service",
		"Service through which the apiserver calls the webhooks (names in the self-signed certificate).")
	fs.StringVar(&w.SecretName, "webhook-secret-name", "pipeline-operator-webhook-server-cert",
		"Secret, in the manager's namespace, holding the self-signed webhook certificate.")
	fs.StringVar(&w.MutatingWebhookConfiguration, "mutating-webhook-configuration", "pipeline-operator-mutating-webhook-configuration",
		"MutatingWebhookConfiguration that receives the self-signed CA.")
	fs.StringVar(&w.ValidatingWebhookConfiguration, "validating-webhook-configuration", "pipeline-operator-validating-webhook-configuration",
		"ValidatingWebhookConfiguration that receives the self-signed CA.")
	fs.StringVar(&w.GuardWebhookConfiguration, "guard-webhook-configuration", "pipeline-operator-guard-webhook-configuration",
		"ValidatingWebhookConfiguration of the guard webhook (config/policy) that receives the self-signed CA; empty when "+
			"the guard is not installed.")
	w.Limits = webhookserver.DefaultLimits()
	fs.Int64Var(&w.Limits.MaxConversionBytes, "webhook-max-conversion-bytes", w.Limits.MaxConversionBytes,
		"Largest ConversionReview body the webhook server reads (413 above it): bounds the largest list of Pipelines "+
			"the apiserver can convert at once, which it does when a client lists in v1beta1. At most --webhook-max-body-bytes.")
	fs.Int64Var(&w.Limits.MaxBodyBytes, "webhook-max-body-bytes", w.Limits.MaxBodyBytes,
		"Request bodies the webhook server holds at once, over all requests, counted as they arrive (503 above it).")
	fs.IntVar(&w.Limits.MaxInFlight, "webhook-max-in-flight", w.Limits.MaxInFlight,
		"Webhook requests handled at once; the others wait their turn.")
	fs.StringVar(&w.ClientCAFile, "webhook-client-ca-file", "",
		"PEM file of the CA of the client certificate the kube-apiserver presents to admission webhooks, given by its "+
			"admission configuration: the admission webhooks then answer no other caller (403). The conversion webhook "+
			"stays open: the apiserver presents no certificate to it. Empty: no client is checked.")
	fs.Func("webhook-client-names", "Comma-separated names (common name or DNS name) of which the client certificate of "+
		"--webhook-client-ca-file must carry one; empty: any certificate of that CA.", func(v string) error {
		w.ClientNames = nil
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				w.ClientNames = append(w.ClientNames, n)
			}
		}
		return nil
	})
	fs.IntVar(&w.Limits.MaxConnections, "webhook-max-connections", w.Limits.MaxConnections,
		"Connections the webhook server serves at once; the others wait, unserved, until one closes.")
	fs.IntVar(&w.Limits.MaxConversionObjects, "webhook-max-conversion-objects", w.Limits.MaxConversionObjects,
		"Most Pipelines a ConversionReview may hold (400 above it): the largest page of a v1beta1 list the apiserver can convert "+
			"(kubectl reads 500 at a time).")
}

// runInstallCheck runs installcheck in the namespace of POD_NAMESPACE with the cluster's
// configuration, within a minute.
func runInstallCheck() error {
	ns := os.Getenv(operatorcondition.EnvPodNamespace)
	if ns == "" {
		return fmt.Errorf("%s names no namespace to check in", operatorcondition.EnvPodNamespace)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme := k8sruntime.NewScheme()
	if err := pipelinev1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return installcheck.Run(ctx, c, ns)
}
