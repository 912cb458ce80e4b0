package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/config/kubeversion"
)

// The chart and the kustomize builds it is made from, with the helm and kustomize binaries the
// Makefile builds ($HELM, $KUSTOMIZE).
const (
	chartDir  = "../../charts/pipeline-operator"
	configDir = "../../config"
)

func tool(t *testing.T, env string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Fatalf("$%s names the %s binary: run make test-unit", env, strings.ToLower(env))
	}
	return bin
}

// helmTemplate is the chart rendered as helm install would into namespace, with values.
func helmTemplate(t *testing.T, namespace string, values ...string) map[string]object {
	t.Helper()
	return helmTemplateArgs(t, namespace, []string{"--skip-tests"}, values...)
}

// helmTemplateArgs is helmTemplate with the extra arguments of helm template given.
func helmTemplateArgs(t *testing.T, namespace string, extra []string, values ...string) map[string]object {
	t.Helper()
	args := append([]string{"template", "pipeline-operator", chartDir, "--namespace", namespace}, extra...)
	for _, v := range values {
		args = append(args, "--set", v)
	}
	out, err := exec.Command(tool(t, "HELM"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return byName(t, out)
}

func kustomizeBuild(t *testing.T, dirs ...string) map[string]object {
	t.Helper()
	var all []byte
	for _, dir := range dirs {
		out, err := exec.Command(tool(t, "KUSTOMIZE"), "build", filepath.Join(configDir, dir)).Output()
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		all = append(append(all, out...), "\n---\n"...)
	}
	return byName(t, all)
}

func byName(t *testing.T, data []byte) map[string]object {
	t.Helper()
	objs, err := parse(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]object{}
	for _, o := range objs {
		key := o.kind() + "/" + o.name()
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = o
	}
	return out
}

// releaseLabels are the labels a chart adds to what config/ writes.
var releaseLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// normalize drops what differs by design between the chart and config/: the labels of the
// release (and kustomize's managed-by), the resource policy that keeps the CRDs, and
// annotations or labels left empty.
func normalize(objs map[string]object) map[string]object {
	for _, o := range objs {
		m := o.meta()
		if annotations, ok := m["annotations"].(map[string]any); ok {
			delete(annotations, "helm.sh/resource-policy")
		}
		if labels, ok := m["labels"].(map[string]any); ok {
			for _, l := range releaseLabels {
				delete(labels, l)
			}
		}
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := m[k].(map[string]any); m[k] == nil || ok && len(v) == 0 {
				delete(m, k)
			}
		}
		if o.kind() == "Deployment" {
			// The release's instance on the pods (TestChartPodsNameTheirRelease).
			template := child(map[string]any(o), "spec", "template")
			delete(child(template, "metadata", "labels"), "app.kubernetes.io/instance")
		}
	}
	return objs
}

// The chart with its default values installs what make deploy does (config/default); with
// certificates.mode cert-manager what config/overlays/cert-manager does; with webhookClients what
// config/overlays/webhook-client-certificate does; with the metrics
// values config/prometheus too. config/default's Namespace is the release's namespace.
func TestChartRendersWhatConfigBuilds(t *testing.T) {
	for name, tc := range map[string]struct {
		values []string
		dirs   []string
	}{
		"defaults":     {dirs: []string{"default"}},
		"cert-manager": {values: []string{"certificates.mode=cert-manager"}, dirs: []string{"overlays/cert-manager"}},
		"webhook client certificate": {values: []string{"webhookClients.caConfigMap=pipeline-operator-webhook-client-ca",
			"webhookClients.names={kube-apiserver-webhook-client}"}, dirs: []string{"overlays/webhook-client-certificate"}},
		"monitoring": {values: []string{"metrics.serviceMonitor.enabled=true", "metrics.routerPodMonitor.enabled=true",
			"metrics.prometheusRule.enabled=true"}, dirs: []string{"default", "prometheus"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := normalize(helmTemplate(t, namespace, tc.values...))
			want := normalize(kustomizeBuild(t, tc.dirs...))
			delete(want, "Namespace/"+namespace)
			for key, w := range want {
				g, ok := got[key]
				switch {
				case !ok:
					t.Errorf("%s: built from config/, not rendered by the chart", key)
				case !reflect.DeepEqual(g, w):
					gy, _ := yaml.Marshal(g)
					wy, _ := yaml.Marshal(w)
					t.Errorf("%s differs from config/:\n--- chart\n%s\n--- config\n%s", key, gy, wy)
				}
			}
			for key := range got {
				if _, ok := want[key]; !ok {
					t.Errorf("%s: rendered by the chart, not in config/", key)
				}
			}
		})
	}
}

// managerSpec is the spec of the manager's Deployment.
func managerSpec(objs map[string]object) map[string]any {
	return objs["Deployment/pipeline-operator-controller-manager"]["spec"].(map[string]any)
}

// managerPod is the pod spec of the manager's Deployment.
func managerPod(objs map[string]object) map[string]any {
	return managerSpec(objs)["template"].(map[string]any)["spec"].(map[string]any)
}

// managerContainer is the manager's container.
func managerContainer(objs map[string]object) map[string]any {
	return managerPod(objs)["containers"].([]any)[0].(map[string]any)
}

// routerImage is the image the manager gives every Pipeline's router.
func routerImage(objs map[string]object) string {
	for _, e := range managerContainer(objs)["env"].([]any) {
		if e := e.(map[string]any); e["name"] == "RELATED_IMAGE_ROUTER" {
			return e["value"].(string)
		}
	}
	return ""
}

// Every object goes into the release's namespace and names it, not config/'s.
func TestChartUsesTheReleaseNamespace(t *testing.T) {
	for _, o := range helmTemplate(t, "ml-platform") {
		if ns, ok := o.meta()["namespace"]; ok && ns != "ml-platform" {
			t.Errorf("%s/%s in namespace %v, want the release's", o.kind(), o.name(), ns)
		}
		if strings.Contains(fmt.Sprint(o), namespace) {
			t.Errorf("%s/%s names %s, not the release's namespace", o.kind(), o.name(), namespace)
		}
	}
}

// The manager's values change what they say: the image (of the manager and of the routers),
// replicas, resources, flags, scheduling and labels.
func TestChartManagerValues(t *testing.T) {
	const ns = "ml-platform"
	if got := managerContainer(helmTemplate(t, ns))["image"]; got != "ghcr.io/ndsl-cn/pipeline-operator:v"+appVersion(t) {
		t.Errorf("default image %v, want the chart's appVersion", got)
	}

	objs := helmTemplate(t, ns, "image.tag=v9.9.9", "manager.replicas=3", "manager.resources.limits.memory=1Gi",
		"manager.extraArgs={--max-concurrent-reconciles=4}", "commonLabels.team=ml", "manager.nodeSelector.pool=system")
	if got := managerContainer(objs)["image"]; got != "ghcr.io/ndsl-cn/pipeline-operator:v9.9.9" || routerImage(objs) != got {
		t.Errorf("image %v, router image %v, want tag v9.9.9 for both", got, routerImage(objs))
	}
	if got := managerSpec(objs)["replicas"]; got != float64(3) {
		t.Errorf("replicas %v, want 3", got)
	}
	if got := managerContainer(objs)["resources"].(map[string]any)["limits"].(map[string]any)["memory"]; got != "1Gi" {
		t.Errorf("memory limit %v, want 1Gi", got)
	}
	if args := managerContainer(objs)["args"].([]any); !slices.Contains(args, any("--max-concurrent-reconciles=4")) {
		t.Errorf("args %v, want the extra one", args)
	}
	if sel := managerPod(objs)["nodeSelector"]; !reflect.DeepEqual(sel, map[string]any{"pool": "system"}) {
		t.Errorf("nodeSelector %v", sel)
	}
	for key, o := range objs {
		if o.meta()["labels"].(map[string]any)["team"] != "ml" {
			t.Errorf("%s has no commonLabels", key)
		}
	}

	digest := "sha256:" + strings.Repeat("ab", 32)
	objs = helmTemplate(t, ns, "image.digest="+digest)
	if got := managerContainer(objs)["image"]; got != "ghcr.io/ndsl-cn/pipeline-operator@"+digest || routerImage(objs) != got {
		t.Errorf("image %v, router image %v, want by digest", got, routerImage(objs))
	}
}

// The optional parts go when turned off, and only they; the CRDs are kept on uninstall unless
// crds.keep is false.
func TestChartOptionalParts(t *testing.T) {
	const ns = "ml-platform"
	base := helmTemplate(t, ns)
	objs := helmTemplate(t, ns, "admissionPolicies.enabled=false", "networkPolicies.enabled=false", "crds.install=false")
	for key := range objs {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") || strings.HasPrefix(key, "NetworkPolicy/") ||
			strings.HasPrefix(key, "CustomResourceDefinition/") || key == "ValidatingWebhookConfiguration/"+guardWebhook {
			t.Errorf("%s rendered while turned off", key)
		}
	}
	// Five policies and their bindings, the guard webhook, two NetworkPolicies and two CRDs.
	if want := len(base) - 5 - 5 - 1 - 2 - 2; len(objs) != want {
		t.Errorf("%d objects with policies and CRDs off, want %d", len(objs), want)
	}
	if _, ok := base["ValidatingWebhookConfiguration/"+guardWebhook]; !ok {
		t.Errorf("the guard webhook is not rendered with the admission policies")
	}
	// Without its configuration, the manager keeps its CA in no guard webhook.
	if args := managerContainer(objs)["args"].([]any); !slices.Contains(args, any("--guard-webhook-configuration=")) {
		t.Errorf("admission policies off: args %v, want the guard webhook's configuration empty", args)
	}
	if args := managerContainer(base)["args"].([]any); slices.Contains(args, any("--guard-webhook-configuration=")) {
		t.Errorf("admission policies on: args %v empty the guard webhook's configuration", args)
	}

	for _, keep := range []bool{true, false} {
		for key, o := range helmTemplate(t, ns, fmt.Sprintf("crds.keep=%t", keep)) {
			if !strings.HasPrefix(key, "CustomResourceDefinition/") {
				continue
			}
			policy, _ := o.meta()["annotations"].(map[string]any)["helm.sh/resource-policy"]
			if keep != (policy == "keep") {
				t.Errorf("crds.keep=%t: %s has resource policy %v", keep, key, policy)
			}
		}
	}
}

// networkPolicies.webhookFrom narrows the webhook port to its sources, as
// config/overlays/webhook-from-apiserver does; by default it admits any source, as config/default.
func TestChartWebhookFrom(t *testing.T) {
	const ns = "ml-platform"
	key := "NetworkPolicy/pipeline-operator-allow-webhook-traffic"
	rule := func(objs map[string]object) map[string]any {
		t.Helper()
		ingress, _ := objs[key]["spec"].(map[string]any)["ingress"].([]any)
		if len(ingress) != 1 {
			t.Fatalf("%s ingress %v, want one rule", key, ingress)
		}
		return ingress[0].(map[string]any)
	}
	if from, ok := rule(helmTemplate(t, ns))["from"]; ok {
		t.Errorf("by default the webhook port admits %v, want every source (no from)", from)
	}
	narrowed := rule(helmTemplate(t, ns, "networkPolicies.webhookFrom[0].ipBlock.cidr=10.0.0.0/28"))
	want := []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}}
	if !reflect.DeepEqual(narrowed["from"], want) {
		t.Errorf("webhookFrom set: the port admits %v, want %v", narrowed["from"], want)
	}
	overlay := kustomizeBuild(t, "overlays/webhook-from-apiserver")[key]
	if ports := overlay["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)["ports"]; !reflect.DeepEqual(narrowed["ports"], ports) {
		t.Errorf("webhookFrom set: ports %v, want the overlay's %v", narrowed["ports"], ports)
	}
}

// The manager's PodDisruptionBudget (one pod available) comes only with two replicas or more:
// over one replica it would block every drain of its node.
func TestChartDisruptionBudgetNeverBlocksADrain(t *testing.T) {
	const key = "PodDisruptionBudget/pipeline-operator-controller-manager"
	if _, ok := helmTemplate(t, "ml-platform", "manager.replicas=1")[key]; ok {
		t.Error("a budget of one pod available was rendered over one replica")
	}
	if _, ok := helmTemplate(t, "ml-platform", "manager.replicas=2")[key]; !ok {
		t.Error("no budget over two replicas")
	}
}

// image.pullPolicy sets the manager's; unset, Kubernetes' default for the tag applies.
func TestChartImagePullPolicy(t *testing.T) {
	if got, ok := managerContainer(helmTemplate(t, "ml-platform"))["imagePullPolicy"]; ok {
		t.Errorf("imagePullPolicy %v by default, want none", got)
	}
	if got := managerContainer(helmTemplate(t, "ml-platform", "image.pullPolicy=Always"))["imagePullPolicy"]; got != "Always" {
		t.Errorf("imagePullPolicy %v, want Always", got)
	}
}

// The manager's pod annotations, extra environment, volumes and mounts, and its ServiceAccount's
// annotations come from the values, beside what config/ gives them.
func TestChartExtraPodValues(t *testing.T) {
	objs := helmTemplate(t, "ml-platform", "manager.podAnnotations.team=vision",
		"manager.extraEnv[0].name=HTTPS_PROXY", "manager.extraEnv[0].value=http://proxy.example:3128",
		"manager.extraVolumes[0].name=corporate-ca", "manager.extraVolumes[0].configMap.name=corporate-ca",
		"manager.extraVolumeMounts[0].name=corporate-ca", "manager.extraVolumeMounts[0].mountPath=/etc/ssl/corporate",
		"serviceAccount.annotations.iam\\.example/role=operator")
	template := managerSpec(objs)["template"].(map[string]any)
	if got := template["metadata"].(map[string]any)["annotations"].(map[string]any)["team"]; got != "vision" {
		t.Errorf("pod annotation team = %v", got)
	}
	has := func(list any, key, value string) bool {
		items, _ := list.([]any)
		return slices.ContainsFunc(items, func(i any) bool { return i.(map[string]any)[key] == value })
	}
	c := managerContainer(objs)
	if !has(c["env"], "name", "HTTPS_PROXY") || !has(c["env"], "name", "RELATED_IMAGE_ROUTER") {
		t.Errorf("env %v, want HTTPS_PROXY beside the manager's own", c["env"])
	}
	if !has(c["volumeMounts"], "mountPath", "/etc/ssl/corporate") || !has(c["volumeMounts"], "mountPath", "/tmp") {
		t.Errorf("volumeMounts %v, want /etc/ssl/corporate beside the manager's own", c["volumeMounts"])
	}
	if !has(managerPod(objs)["volumes"], "name", "corporate-ca") {
		t.Errorf("volumes %v, want corporate-ca", managerPod(objs)["volumes"])
	}
	sa := objs["ServiceAccount/pipeline-operator-controller-manager"]
	if got := sa.meta()["annotations"].(map[string]any)["iam.example/role"]; got != "operator" {
		t.Errorf("ServiceAccount annotations %v", sa.meta()["annotations"])
	}
}

// The manager's pods carry the release's instance label.
func TestChartPodsNameTheirRelease(t *testing.T) {
	template := managerSpec(helmTemplate(t, "ml-platform"))["template"].(map[string]any)
	labels, _ := template["metadata"].(map[string]any)["labels"].(map[string]any)
	if got := labels["app.kubernetes.io/instance"]; got != "pipeline-operator" {
		t.Errorf("the manager's pod has app.kubernetes.io/instance %v, want the release's name", got)
	}
}

// The chart can be a subchart: a parent's global values are accepted (and not read).
func TestChartAcceptsGlobalValues(t *testing.T) {
	if len(helmTemplate(t, "ml-platform", "global.imageRegistry=registry.example.com")) == 0 {
		t.Error("nothing rendered")
	}
}

// Values the chart does not know, or cannot use, are refused before anything is installed.
func TestChartRefusesUnknownValues(t *testing.T) {
	for value, want := range map[string]string{
		"certificates.mode=vault":       "/certificates/mode': value must be one of 'self-signed', 'cert-manager'",
		"manager.replica=3":             "additional properties 'replica' not allowed",
		"image.digest=latest":           "/image/digest': 'latest' does not match",
		"manager.extraArgs={leader}":    "/manager/extraArgs/0'",
		"networkPolicies.enabled=maybe": "/networkPolicies/enabled': got string, want boolean",
		"image.pullPolicy=Sometimes":    "/image/pullPolicy': value must be one of",
	} {
		out, err := exec.Command(tool(t, "HELM"), "template", "pipeline-operator", chartDir, "--set", value).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: %v, output %s, want a refusal naming %s", value, err, out, want)
		}
	}
}

// The chart passes helm lint, strictly, with its defaults and with every option on.
func TestChartLint(t *testing.T) {
	for _, values := range [][]string{nil, {"certificates.mode=cert-manager", "metrics.serviceMonitor.enabled=true",
		"metrics.routerPodMonitor.enabled=true", "metrics.prometheusRule.enabled=true"}} {
		args := []string{"lint", "--strict", chartDir}
		for _, v := range values {
			args = append(args, "--set", v)
		}
		if out, err := exec.Command(tool(t, "HELM"), args...).CombinedOutput(); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// chartMetadata is the fields of Chart.yaml the tests read.
type chartMetadata struct {
	AppVersion  string `json:"appVersion"`
	KubeVersion string `json:"kubeVersion"`
}

func readChart(t *testing.T) chartMetadata {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartMetadata
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func appVersion(t *testing.T) string { t.Helper(); return readChart(t).AppVersion }

// The chart refuses a cluster older than the oldest Kubernetes the operator supports, and
// accepts that one (pre-releases included, as helm compares them).
func TestChartKubeVersion(t *testing.T) {
	if got, want := readChart(t).KubeVersion, ">="+kubeversion.Minimum+"-0"; got != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q (kubeversion.Minimum)", got, want)
	}
	major, minor, _ := strings.Cut(kubeversion.Minimum, ".")
	minor, _, _ = strings.Cut(minor, ".")
	n, _ := strconv.Atoi(minor)
	older := fmt.Sprintf("v%s.%d.0", major, n-1)
	out, err := exec.Command(tool(t, "HELM"), "template", "x", chartDir, "--kube-version", older).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "kubeVersion") {
		t.Errorf("rendered for Kubernetes %s: %v\n%s", older, err, out)
	}
	if out, err := exec.Command(tool(t, "HELM"), "template", "x", chartDir, "--kube-version", "v"+kubeversion.Minimum).CombinedOutput(); err != nil {
		t.Errorf("not rendered for Kubernetes %s: %v\n%s", kubeversion.Minimum, err, out)
	}
}

// helm test runs the manager's image with --check-install in the release's namespace, under a
// ServiceAccount that may only create Pipelines there, as a pod the restricted Pod Security level
// admits.
func TestChartTestChecksTheInstall(t *testing.T) {
	const ns = "ml-platform"
	all := helmTemplateArgs(t, ns, nil, "image.digest=sha256:"+strings.Repeat("a", 64))
	tests := 0
	for key, o := range all {
		if o.meta()["annotations"] == nil || o.meta()["annotations"].(map[string]any)["helm.sh/hook"] != "test" {
			continue
		}
		tests++
		if o.meta()["namespace"] != ns {
			t.Errorf("%s: in namespace %v, want the release's", key, o.meta()["namespace"])
		}
	}
	if tests != 4 {
		t.Errorf("%d objects of helm test, want its ServiceAccount, Role, RoleBinding and Pod", tests)
	}
	pod := all["Pod/pipeline-operator-check-install"]
	if pod == nil {
		t.Fatal("no test pod")
	}
	spec := pod["spec"].(map[string]any)
	c := spec["containers"].([]any)[0].(map[string]any)
	if c["image"] != "ghcr.io/ndsl-cn/pipeline-operator@sha256:"+strings.Repeat("a", 64) ||
		!reflect.DeepEqual(c["args"], []any{"--check-install"}) {
		t.Errorf("the test pod runs %v %v, want the manager's image with --check-install", c["image"], c["args"])
	}
	if spec["serviceAccountName"] != "pipeline-operator-check-install" || spec["restartPolicy"] != "Never" {
		t.Errorf("the test pod: ServiceAccount %v, restartPolicy %v", spec["serviceAccountName"], spec["restartPolicy"])
	}
	sc := c["securityContext"].(map[string]any)
	if spec["securityContext"].(map[string]any)["runAsNonRoot"] != true || sc["allowPrivilegeEscalation"] != false ||
		!reflect.DeepEqual(sc["capabilities"], map[string]any{"drop": []any{"ALL"}}) {
		t.Errorf("the test pod is not within the restricted level: %v %v", spec["securityContext"], sc)
	}
	role := all["Role/pipeline-operator-check-install"]
	want := []any{map[string]any{"apiGroups": []any{"distri-infer.ndsl.cn"}, "resources": []any{"pipelines"}, "verbs": []any{"create"}}}
	if role == nil || !reflect.DeepEqual(role["rules"], want) {
		t.Errorf("the test's Role: %v, want only the creation of Pipelines", role)
	}
}
