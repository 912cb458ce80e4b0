// Command prometheus-config writes the scrape configuration that the Prometheus Operator
// generates for the operator's ServiceMonitors and PodMonitors, with the Prometheus Operator's
// own code: its resource selector checks each monitor (one it would reject is an error here)
// and reads the Secrets they name from the cluster, and its configuration generator writes the
// Prometheus configuration, TLS material inline. The tests of the real nodes run a real
// Prometheus (hack/tools/prometheus, the release this generator is made for) on it.
//
//	prometheus-config -kubeconfig F -monitors F -namespace NS -prometheus-version V \
//	    -apiserver URL -apiserver-ca F -apiserver-cert F -apiserver-key F > prometheus.yaml
//
// -monitors holds the rendered monitors (kustomize build config/prometheus); those of
// -namespace are selected, as by a Prometheus resource in that namespace that selects every
// monitor of its own namespace. -apiserver and its files are how Prometheus's Kubernetes
// service discovery reaches the apiserver (spec.apiserverConfig), for a Prometheus that does
// not run in a pod.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus-operator/prometheus-operator/pkg/assets"
	"github.com/prometheus-operator/prometheus-operator/pkg/operator"
	prompkg "github.com/prometheus-operator/prometheus-operator/pkg/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster, to read the Secrets the monitors name.")
	flag.StringVar(&o.monitors, "monitors", "", "YAML documents holding the ServiceMonitors and PodMonitors (others are skipped).")
	flag.StringVar(&o.version, "prometheus-version", "", "Version of the Prometheus the configuration is for, as its --version says (3.13.1).")
	flag.StringVar(&o.namespace, "namespace", "", "Namespace of the Prometheus resource: it selects the monitors of this namespace.")
	flag.StringVar(&o.apiserver, "apiserver", "", "URL of the apiserver for the Kubernetes service discovery.")
	flag.StringVar(&o.tls.CAFile, "apiserver-ca", "", "CA file of the apiserver's certificate.")
	flag.StringVar(&o.tls.CertFile, "apiserver-cert", "", "Client certificate file for the apiserver.")
	flag.StringVar(&o.tls.KeyFile, "apiserver-key", "", "Client key file for the apiserver.")
	flag.StringVar(&o.scrapeInterval, "scrape-interval", "2s", "Scrape interval of the Prometheus resource.")
	flag.StringVar(&o.evaluationInterval, "evaluation-interval", "1s", "Rule evaluation interval of the Prometheus resource.")
	flag.Parse()
	if o.kubeconfig == "" || o.monitors == "" || o.namespace == "" || o.apiserver == "" || o.version == "" {
		fmt.Fprintln(os.Stderr, "prometheus-config: -kubeconfig, -monitors, -namespace, -apiserver and -prometheus-version are required")
		os.Exit(2)
	}
	out, err := o.generate(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "prometheus-config:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(out)
}

type options struct {
	kubeconfig, monitors, namespace, apiserver, version string
	tls                                                 monitoringv1.TLSFilesConfig
	scrapeInterval, evaluationInterval                  string
}

func (o *options) generate(ctx context.Context) ([]byte, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	sMons, pMons, err := readMonitors(o.monitors)
	if err != nil {
		return nil, err
	}

	p := &monitoringv1.Prometheus{}
	p.Name, p.Namespace = "k8s", o.namespace
	p.Spec.Version = o.version
	p.Spec.ServiceMonitorSelector = &metav1.LabelSelector{}
	p.Spec.PodMonitorSelector = &metav1.LabelSelector{}
	p.Spec.ScrapeInterval = monitoringv1.Duration(o.scrapeInterval)
	p.Spec.EvaluationInterval = monitoringv1.Duration(o.evaluationInterval)
	p.Spec.ServiceDiscoveryRole = ptr.To(monitoringv1.EndpointSliceRole)
	p.Spec.APIServerConfig = &monitoringv1.APIServerConfig{
		Host:      o.apiserver,
		TLSConfig: &monitoringv1.TLSConfig{TLSFilesConfig: o.tls},
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store := assets.NewStoreBuilder(cs.CoreV1(), cs.CoreV1())
	recorder := operator.NewFakeRecorder(64, p)
	rs, err := prompkg.NewResourceSelector(logger, p, store, nil, operator.NewMetrics(prometheus.NewRegistry()), recorder)
	if err != nil {
		return nil, err
	}
	selectedS, err := rs.SelectServiceMonitors(ctx, listFrom(sMons))
	if err != nil {
		return nil, err
	}
	selectedP, err := rs.SelectPodMonitors(ctx, listFrom(pMons))
	if err != nil {
		return nil, err
	}
	rejected := append(rejections(monitoringv1.ServiceMonitorsKind, selectedS), rejections(monitoringv1.PodMonitorsKind, selectedP)...)
	if len(rejected) > 0 {
		return nil, fmt.Errorf("the Prometheus Operator rejects: %w", errors.Join(rejected...))
	}
	if len(selectedS)+len(selectedP) == 0 {
		return nil, fmt.Errorf("no monitor of namespace %s in %s", o.namespace, o.monitors)
	}

	cg, err := prompkg.NewConfigGenerator(logger, p, prompkg.WithEndpointSliceSupport(), prompkg.WithInlineTLSConfig())
	if err != nil {
		return nil, err
	}
	return cg.GenerateServerConfiguration(p, selectedS.ValidResources(), selectedP.ValidResources(), nil, nil, store, nil, nil, nil, nil)
}

// readMonitors decodes the ServiceMonitors and PodMonitors of a multi-document YAML file.
func readMonitors(path string) (map[string]*monitoringv1.ServiceMonitor, map[string]*monitoringv1.PodMonitor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sMons := map[string]*monitoringv1.ServiceMonitor{}
	pMons := map[string]*monitoringv1.PodMonitor{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		var head struct{ APIVersion, Kind string }
		if err := json.Unmarshal(doc, &head); err != nil || head.APIVersion != monitoring.GroupName+"/v1" {
			continue
		}
		switch head.Kind {
		case monitoringv1.ServiceMonitorsKind:
			m := &monitoringv1.ServiceMonitor{}
			if err := strictJSON(doc, m); err != nil {
				return nil, nil, fmt.Errorf("%s: ServiceMonitor: %w", path, err)
			}
			sMons[m.Namespace+"/"+m.Name] = m
		case monitoringv1.PodMonitorsKind:
			m := &monitoringv1.PodMonitor{}
			if err := strictJSON(doc, m); err != nil {
				return nil, nil, fmt.Errorf("%s: PodMonitor: %w", path, err)
			}
			pMons[m.Namespace+"/"+m.Name] = m
		}
	}
	return sMons, pMons, nil
}

// listFrom lists, as the Prometheus Operator's informers would, the monitors of a namespace
// that a selector selects.
func listFrom[T interface {
	GetNamespace() string
	GetLabels() map[string]string
}](objs map[string]T) prompkg.ListAllByNamespaceFn {
	return func(namespace string, selector labels.Selector, appendFn cache.AppendFunc) error {
		for _, o := range objs {
			if o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
				appendFn(o)
			}
		}
		return nil
	}
}

// strictJSON decodes doc into v, refusing fields v does not have: a monitor the Prometheus
// Operator's API does not know is a mistake in the manifest.
func strictJSON(doc []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// rejections are the reasons the Prometheus Operator gives for the monitors it rejects.
func rejections[T operator.ConfigurationResource](kind string, selected operator.TypedResourcesSelection[T]) []error {
	var errs []error
	for key, r := range selected {
		for _, c := range r.Conditions() {
			if c.Status != monitoringv1.ConditionTrue {
				errs = append(errs, fmt.Errorf("%s %s: %s", kind, key, c.Message))
			}
		}
	}
	return errs
}
