// Command helmchart writes the templates of the Helm chart (charts/pipeline-operator) from the
// kustomize builds of config/, so that the chart installs what make deploy does:
//
//	helmchart -kustomize KUSTOMIZE -config config -chart charts/pipeline-operator
//
// Every object of config/default is written as it is built, but for what the chart's values
// choose: the namespace (the release's), the labels (the chart's, and commonLabels), the
// manager's image, replicas, resources and scheduling, and which optional parts are installed
// (the CRDs and whether they are kept on uninstall, the admission policies, the NetworkPolicies).
// The objects config/overlays/cert-manager adds or changes come with certificates.mode
// cert-manager, and those of config/prometheus with the metrics values. The Namespace is not
// written: a release is installed into its namespace (helm install --create-namespace).
//
// make helm-chart runs it (make verify fails when the chart differs from what it writes), and
// chart_test.go checks that the chart renders to the kustomize builds it stands for.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/config/kubeversion"
)

// namespace is the namespace config/ deploys into; the chart uses the release's instead.
const namespace = "pipeline-operator-system"

func main() {
	kustomize := flag.String("kustomize", "kustomize", "the kustomize binary")
	config := flag.String("config", "config", "the config/ directory")
	chart := flag.String("chart", "charts/pipeline-operator", "the chart's directory, whose templates/ it writes")
	version := flag.String("version", "", "the operator's version (make's VERSION): the chart's version and appVersion")
	flag.Parse()
	if err := run(*kustomize, *config, *chart, *version); err != nil {
		fmt.Fprintln(os.Stderr, "helmchart:", err)
		os.Exit(1)
	}
}

// chartFields are the lines of Chart.yaml the generator keeps true: the versions, and the
// oldest Kubernetes the operator supports (kubeversion.Minimum).
var chartFields = regexp.MustCompile(`(?m)^(version|appVersion|kubeVersion): .*$`)

func writeChart(path, version string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out := chartFields.ReplaceAllStringFunc(string(data), func(line string) string {
		switch field, _, _ := strings.Cut(line, ": "); {
		case field == "kubeVersion":
			return fmt.Sprintf("kubeVersion: %q", ">="+kubeversion.Minimum+"-0")
		case version == "":
			return line
		case field == "version":
			return "version: " + version
		default: // appVersion
			return fmt.Sprintf("appVersion: %q", version)
		}
	})
	return os.WriteFile(path, []byte(out), 0o644)
}

func run(kustomize, config, chart, version string) error {
	if err := writeChart(filepath.Join(chart, "Chart.yaml"), version); err != nil {
		return err
	}
	build := func(dir string) ([]object, error) {
		out, err := exec.Command(kustomize, "build", filepath.Join(config, dir)).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return nil, fmt.Errorf("kustomize build %s: %w: %s", dir, err, ee.Stderr)
			}
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		return parse(out)
	}
	def, err := build("default")
	if err != nil {
		return err
	}
	certManager, err := build("overlays/cert-manager")
	if err != nil {
		return err
	}
	monitoring, err := build("prometheus")
	if err != nil {
		return err
	}
	files, err := templates(def, certManager, monitoring)
	if err != nil {
		return err
	}
	dir := filepath.Join(chart, "templates")
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

type object map[string]any

func parse(data []byte) ([]object, error) {
	var out []object
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out, nil
}

func (o object) kind() string { return o["kind"].(string) }

func (o object) name() string { return o.meta()["name"].(string) }

func (o object) meta() map[string]any { return o["metadata"].(map[string]any) }

// child is the map at path under o, made when missing.
func child(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		c, ok := m[p].(map[string]any)
		if !ok {
			c = map[string]any{}
			m[p] = c
		}
		m = c
	}
	return m
}

// A hook is a key or list item the generator puts into an object where the chart's template
// text goes: the line holding it is replaced by that text, indented as the line was.
const hookPrefix = "__chart_"

func hook(name string) string { return hookPrefix + name + "__" }

// hookText is what each hook becomes, one template line per element.
var hookText = map[string][]string{
	"labels": {`{{- include "pipeline-operator.labels" . | nindent 0 }}`},
	"crdAnnotations": {
		`{{- if .Values.crds.keep }}`, `helm.sh/resource-policy: keep`, `{{- end }}`,
	},
	"pipelineCRDAnnotations": {
		`{{- if .Values.crds.keep }}`, `helm.sh/resource-policy: keep`, `{{- end }}`,
		`{{- if eq .Values.certificates.mode "cert-manager" }}`,
		`cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/pipeline-operator-serving-cert`, `{{- end }}`,
	},
	"webhookAnnotations": {
		`{{- if eq .Values.certificates.mode "cert-manager" }}`,
		`cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/pipeline-operator-serving-cert`, `{{- end }}`,
	},
	"replicas":  {`replicas: {{ .Values.manager.replicas }}`},
	"resources": {`resources:`, `  {{- toYaml .Values.manager.resources | nindent 2 }}`},
	"image":     {`image: {{ include "pipeline-operator.image" . }}`, `{{- with .Values.image.pullPolicy }}`, `imagePullPolicy: {{ . }}`, `{{- end }}`},
	"routerImage": {
		`- name: RELATED_IMAGE_ROUTER`, `  value: {{ include "pipeline-operator.image" . }}`,
	},
	"args": {
		`{{- if eq .Values.certificates.mode "cert-manager" }}`, `- --metrics-cert-dir=/tmp/k8s-webhook-server/serving-certs`, `{{- end }}`,
		`{{- if .Values.webhookClients.caConfigMap }}`, `- --webhook-client-ca-file=/etc/pipeline-operator/webhook-clients/ca.crt`,
		`{{- with .Values.webhookClients.names }}`, `- --webhook-client-names={{ join "," . }}`, `{{- end }}`, `{{- end }}`,
		`{{- if not .Values.admissionPolicies.enabled }}`, `- --guard-webhook-configuration=`, `{{- end }}`,
		`{{- range .Values.manager.extraArgs }}`, `- {{ . | quote }}`, `{{- end }}`,
	},
	"volumeMounts": {
		`{{- if eq .Values.certificates.mode "cert-manager" }}`,
		`- mountPath: /tmp/k8s-webhook-server/serving-certs`, `  name: webhook-cert`, `  readOnly: true`, `{{- end }}`,
		`{{- if .Values.webhookClients.caConfigMap }}`,
		`- mountPath: /etc/pipeline-operator/webhook-clients`, `  name: webhook-client-ca`, `  readOnly: true`, `{{- end }}`,
		`{{- with .Values.manager.extraVolumeMounts }}`, `{{- toYaml . | nindent 0 }}`, `{{- end }}`,
	},
	"volumes": {
		`{{- if eq .Values.certificates.mode "cert-manager" }}`,
		`- name: webhook-cert`, `  secret:`, `    secretName: pipeline-operator-webhook-server-cert`, `{{- end }}`,
		`{{- with .Values.webhookClients.caConfigMap }}`,
		`- name: webhook-client-ca`, `  configMap:`, `    name: {{ . }}`, `{{- end }}`,
		`{{- with .Values.manager.extraVolumes }}`, `{{- toYaml . | nindent 0 }}`, `{{- end }}`,
	},
	"extraEnv":                  {`{{- with .Values.manager.extraEnv }}`, `{{- toYaml . | nindent 0 }}`, `{{- end }}`},
	"podAnnotations":            {`{{- with .Values.manager.podAnnotations }}`, `{{- toYaml . | nindent 0 }}`, `{{- end }}`},
	"serviceAccountAnnotations": {`{{- with .Values.serviceAccount.annotations }}`, `{{- toYaml . | nindent 0 }}`, `{{- end }}`},
	// The pods carry the release's instance, so that two releases' pods tell apart.
	"podLabels": {`app.kubernetes.io/instance: {{ .Release.Name }}`, `{{- with .Values.manager.podLabels }}`, `{{- toYaml . | nindent 0 }}`, `{{- end }}`},
	// Without it, as in config/default, the rule admits every source.
	"webhookFrom": {
		`{{- with .Values.networkPolicies.webhookFrom }}`, `from:`, `  {{- toYaml . | nindent 2 }}`, `{{- end }}`,
	},
	"pod": {
		`{{- with .Values.imagePullSecrets }}`, `imagePullSecrets:`, `  {{- toYaml . | nindent 2 }}`, `{{- end }}`,
		`{{- with .Values.manager.nodeSelector }}`, `nodeSelector:`, `  {{- toYaml . | nindent 2 }}`, `{{- end }}`,
		`{{- with .Values.manager.tolerations }}`, `tolerations:`, `  {{- toYaml . | nindent 2 }}`, `{{- end }}`,
		`{{- with .Values.manager.affinity }}`, `affinity:`, `  {{- toYaml . | nindent 2 }}`, `{{- end }}`,
		`{{- with .Values.manager.priorityClassName }}`, `priorityClassName: {{ . }}`, `{{- end }}`,
	},
}

// file is one template of the chart: the objects of the kinds it holds (those pick takes, when
// not nil), each wrapped in the condition of its kind (none when empty).
type file struct {
	name  string
	kinds []string
	pick  func(object) bool
	when  map[string]string
	from  []object
}

// guardWebhook is config/policy's webhook configuration: with the admission policies, not with
// the Pipeline webhooks.
const guardWebhook = "pipeline-operator-guard-webhook-configuration"

func isGuardWebhook(o object) bool { return o.name() == guardWebhook }

func templates(def, certManager, monitoring []object) (map[string][]byte, error) {
	// What the cert-manager overlay adds to config/default: its Issuer and Certificate.
	var certs []object
	for _, o := range certManager {
		if !slices.ContainsFunc(def, func(d object) bool { return d.kind() == o.kind() && d.name() == o.name() }) {
			certs = append(certs, o)
		}
	}
	files := []file{
		{name: "crds.yaml", kinds: []string{"CustomResourceDefinition"}, from: def,
			when: map[string]string{"CustomResourceDefinition": ".Values.crds.install"}},
		{name: "rbac.yaml", kinds: []string{"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}, from: def},
		// A budget of one pod available over a single replica would block every drain of its node.
		{name: "manager.yaml", kinds: []string{"Deployment", "PodDisruptionBudget", "Service"}, from: def,
			when: map[string]string{"PodDisruptionBudget": "gt (int .Values.manager.replicas) 1"}},
		{name: "webhooks.yaml", kinds: []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, from: def,
			pick: func(o object) bool { return !isGuardWebhook(o) }},
		{name: "admission-policies.yaml", kinds: []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
			"ValidatingWebhookConfiguration"}, from: def,
			pick: func(o object) bool { return o.kind() != "ValidatingWebhookConfiguration" || isGuardWebhook(o) },
			when: map[string]string{"ValidatingAdmissionPolicy": ".Values.admissionPolicies.enabled",
				"ValidatingAdmissionPolicyBinding": ".Values.admissionPolicies.enabled",
				"ValidatingWebhookConfiguration":   ".Values.admissionPolicies.enabled"}},
		{name: "network-policies.yaml", kinds: []string{"NetworkPolicy"}, from: def,
			when: map[string]string{"NetworkPolicy": ".Values.networkPolicies.enabled"}},
		{name: "certificates.yaml", kinds: []string{"Issuer", "Certificate"}, from: certs,
			when: map[string]string{"Issuer": `eq .Values.certificates.mode "cert-manager"`,
				"Certificate": `eq .Values.certificates.mode "cert-manager"`}},
		{name: "monitoring.yaml", kinds: []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}, from: monitoring,
			when: map[string]string{"ServiceMonitor": ".Values.metrics.serviceMonitor.enabled",
				"PodMonitor": ".Values.metrics.routerPodMonitor.enabled", "PrometheusRule": ".Values.metrics.prometheusRule.enabled"}},
	}
	out := map[string][]byte{}
	seen := map[string]bool{}
	for _, f := range files {
		var b bytes.Buffer
		b.WriteString("# Generated by make helm-chart from the kustomize builds of config/: do not edit.\n")
		for _, kind := range f.kinds {
			for _, o := range f.from {
				if o.kind() != kind || (f.pick != nil && !f.pick(o)) {
					continue
				}
				seen[o.kind()+"/"+o.name()] = true
				text, err := render(o)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", o.kind(), o.name(), err)
				}
				cond := f.when[kind]
				b.WriteString("---\n")
				if cond != "" {
					fmt.Fprintf(&b, "{{- if %s }}\n", cond)
				}
				b.WriteString(text)
				if cond != "" {
					b.WriteString("{{- end }}\n")
				}
			}
		}
		out[f.name] = b.Bytes()
	}
	for _, o := range slices.Concat(def, certs, monitoring) {
		if !seen[o.kind()+"/"+o.name()] && o.kind() != "Namespace" {
			return nil, fmt.Errorf("%s %s is in config/ but in no template of the chart: add its kind to a file", o.kind(), o.name())
		}
	}
	return out, nil
}

// render is o as template text: its hooks placed, every "{{" and "}}" of its own quoted, its
// namespace the release's.
func render(o object) (string, error) {
	m := o.meta()
	labels := child(m, "labels")
	delete(labels, "app.kubernetes.io/managed-by")
	labels[hook("labels")] = ""
	switch o.kind() {
	case "CustomResourceDefinition":
		if o.name() == "pipelines.distri-infer.ndsl.cn" {
			child(m, "annotations")[hook("pipelineCRDAnnotations")] = ""
		} else {
			child(m, "annotations")[hook("crdAnnotations")] = ""
		}
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		child(m, "annotations")[hook("webhookAnnotations")] = ""
	case "ServiceAccount":
		child(m, "annotations")[hook("serviceAccountAnnotations")] = ""
	case "Deployment":
		if err := deploymentHooks(o); err != nil {
			return "", err
		}
	case "NetworkPolicy":
		if o.name() == webhookPolicy {
			if err := webhookPolicyHooks(o); err != nil {
				return "", err
			}
		}
	}
	data, err := yaml.Marshal(o)
	if err != nil {
		return "", err
	}
	text := strings.NewReplacer("{{", `{{ "{{" }}`, "}}", `{{ "}}" }}`).Replace(string(data))
	text = strings.ReplaceAll(text, namespace, "{{ .Release.Namespace }}")
	return placeHooks(text)
}

// webhookPolicy is the NetworkPolicy that admits the apiserver's calls to the webhook port.
const webhookPolicy = "pipeline-operator-allow-webhook-traffic"

// webhookPolicyHooks puts the sources networkPolicies.webhookFrom names into the one rule of the
// webhook port's NetworkPolicy, which admits any source in config/default.
func webhookPolicyHooks(o object) error {
	spec, _ := o["spec"].(map[string]any)
	ingress, _ := spec["ingress"].([]any)
	if len(ingress) != 1 {
		return fmt.Errorf("%s has %d ingress rules, want the one for the webhook port", webhookPolicy, len(ingress))
	}
	rule, ok := ingress[0].(map[string]any)
	if !ok || rule["from"] != nil {
		return fmt.Errorf("%s's rule names its sources already: %v", webhookPolicy, ingress[0])
	}
	rule[hook("webhookFrom")] = ""
	return nil
}

// deploymentHooks puts the hooks of the manager's Deployment in place of what the values set.
func deploymentHooks(o object) error {
	spec := child(map[string]any(o), "spec")
	delete(spec, "replicas")
	spec[hook("replicas")] = ""
	tmpl := child(spec, "template")
	child(tmpl, "metadata", "labels")[hook("podLabels")] = ""
	child(tmpl, "metadata", "annotations")[hook("podAnnotations")] = ""
	pod := child(tmpl, "spec")
	pod[hook("pod")] = ""
	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 {
		return fmt.Errorf("%d containers, want the manager alone", len(containers))
	}
	c := containers[0].(map[string]any)
	delete(c, "image")
	c[hook("image")] = ""
	delete(c, "resources")
	c[hook("resources")] = ""
	c["args"] = append(c["args"].([]any), hook("args"))
	c["volumeMounts"] = append(c["volumeMounts"].([]any), hook("volumeMounts"))
	pod["volumes"] = append(pod["volumes"].([]any), hook("volumes"))
	env := c["env"].([]any)
	i := slices.IndexFunc(env, func(e any) bool { return e.(map[string]any)["name"] == "RELATED_IMAGE_ROUTER" })
	if i < 0 {
		return errors.New("the manager has no RELATED_IMAGE_ROUTER")
	}
	env[i] = hook("routerImage")
	c["env"] = append(env, hook("extraEnv"))
	return nil
}

var nindent = regexp.MustCompile(`nindent \d+`)

var hookLine = regexp.MustCompile(`^( *)(- )?` + hookPrefix + `([A-Za-z]+)__(: "")?$`)

func placeHooks(text string) (string, error) {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		m := hookLine.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, hookPrefix) {
				return "", fmt.Errorf("a hook inside a line: %q", line)
			}
			b.WriteString(line + "\n")
			continue
		}
		lines, ok := hookText[m[3]]
		if !ok {
			return "", fmt.Errorf("unknown hook %q", m[3])
		}
		indent, prefix := len(m[1]), strings.Repeat(" ", len(m[1]))
		if m[2] != "" && m[4] != "" {
			// A key hook first in a list item: its first line takes the item's dash, the rest
			// the item's indentation.
			b.WriteString(prefix + "- ")
			indent += 2
			prefix = ""
		}
		for _, l := range lines {
			// "nindent N" in a hook's text is relative to the hook's own indentation.
			l = nindent.ReplaceAllStringFunc(l, func(s string) string {
				n, _ := strconv.Atoi(strings.TrimPrefix(s, "nindent "))
				return "nindent " + strconv.Itoa(indent+n)
			})
			b.WriteString(prefix + l + "\n")
			prefix = strings.Repeat(" ", indent)
		}
	}
	return b.String(), nil
}
