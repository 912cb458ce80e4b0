package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/plugin"
)

// The kubectl plugin (cmd/kubectl-pipeline), built by the spec and run as a user runs it: as
// kubectl-pipeline, and as `kubectl pipeline` found by kubectl on PATH.
var _ = Describe("The kubectl plugin", Ordered, func() {
	var bin string
	BeforeAll(func() {
		bin = os.Getenv("KUBECTL_PIPELINE")
		if bin == "" {
			By("building kubectl-pipeline")
			bin = filepath.Join(GinkgoT().TempDir(), "kubectl-pipeline")
			build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-pipeline")
			build.Dir = filepath.Join("..", "..")
			out, err := build.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "go build ./cmd/kubectl-pipeline: %s", out)
		}
	})

	// run runs kubectl-pipeline args against the local control plane.
	run := func(args ...string) (string, error) {
		GinkgoHelper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", os.Getenv("E2E_KUBECONFIG")}, args...)...)
		out, err := cmd.CombinedOutput()
		By("kubectl-pipeline " + strings.Join(args, " ") + ":\n" + string(out))
		return string(out), err
	}
	mustRun := func(args ...string) string {
		GinkgoHelper()
		out, err := run(args...)
		Expect(err).NotTo(HaveOccurred(), out)
		return out
	}
	statusJSON := func(p *pipelinev1.Pipeline) plugin.Pipeline {
		GinkgoHelper()
		cmd := exec.Command(bin, "--kubeconfig", os.Getenv("E2E_KUBECONFIG"), "-n", p.Namespace, "status", p.Name, "-o", "json")
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		var doc plugin.Document
		Expect(json.Unmarshal(out, &doc)).To(Succeed(), string(out))
		Expect(doc.APIVersion).To(Equal(plugin.DocumentAPIVersion))
		Expect(doc.Items).To(HaveLen(1))
		return doc.Items[0]
	}

	It("shows a Pipeline on v1, pauses, resumes and fails it back with README's patches, and the operator follows", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		// As in the failback case of README's commands.
		preferred := "plugin-" + ns
		p, fallback := createOnFallback(ctx, ns, preferred)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(func() string { return statusJSON(p).Steps[1].Node }).Should(Equal(fallback))

		By("status -o json: the v1 status, step 2 on its fallback node")
		st := statusJSON(p)
		Expect(st).To(And(HaveField("ServedVersion", "v1"), HaveField("Phase", "Running"), HaveField("Paused", false),
			HaveField("ReadySteps", HaveValue(BeEquivalentTo(2))), HaveField("TotalSteps", HaveValue(BeEquivalentTo(2))),
			HaveField("Failover.Failback", "Manual"), HaveField("Router", BeNil())))
		Expect(st.OperatorVersion).NotTo(BeEmpty(), "the operator signs the status with its release")
		Expect(st.Steps).To(HaveLen(2))
		Expect(st.Steps[0]).To(And(HaveField("Name", "step-1"), HaveField("State", "Ready"), HaveField("Node", "xx-test-node236"),
			HaveField("NodeReady", HaveValue(BeTrue())), HaveField("OnFallback", false), HaveField("ReadyReplicas", HaveValue(BeEquivalentTo(1)))))
		Expect(st.Steps[1]).To(And(HaveField("Location", preferred), HaveField("Node", fallback), HaveField("OnFallback", true),
			HaveField("Deployment", deploymentName(p, 2))))

		By("version: the plugin's release, and the operator's that wrote the status of the namespace's Pipelines")
		Expect(mustRun("-n", ns, "version")).To(MatchRegexp(`^kubectl-pipeline \S+\noperator ` + regexp.QuoteMeta(st.OperatorVersion) +
			`: wrote the status of 1 Pipeline of namespace ` + regexp.QuoteMeta(ns) + `\n$`))
		Expect(mustRun("version", "--client")).To(MatchRegexp(`^kubectl-pipeline \S+\n$`), "--client asks no cluster")

		By("kubectl finds the plugin on PATH: `kubectl pipeline status` prints the tree, without colours off a terminal")
		kubectlCmd := exec.Command(os.Getenv("KUBECTL"), "pipeline", "status", "--kubeconfig", os.Getenv("E2E_KUBECONFIG"), "-n", ns)
		kubectlCmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		tree, err := kubectlCmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(tree))
		By("kubectl pipeline status -n " + ns + ":\n" + string(tree))
		Expect(string(tree)).To(And(
			ContainSubstring(ns+"/"+p.Name+"  Running  2/2 steps ready  (v1)"),
			ContainSubstring("failover  failback Manual"),
			ContainSubstring("2 step-2  Ready  1/1 ready  node "+fallback+" (ready)"),
			ContainSubstring("on fallback node "+fallback+", location "+preferred),
			Not(ContainSubstring("│   "+"└── ")), // no condition of the running Pipeline is listed as a problem
			Not(ContainSubstring("\x1b["))))

		By("pause: spec.paused as README's pause command sets it; the operator reports Reconciled False, Paused")
		readme, err := readmeCommands(readmePath)
		Expect(err).NotTo(HaveOccurred())
		for kind, action := range map[string]plugin.Action{commandPause: plugin.ActionPause, commandResume: plugin.ActionResume, commandFailback: plugin.ActionFailback} {
			want, err := readme[kind].patch()
			Expect(err).NotTo(HaveOccurred())
			got, err := plugin.Patch(action, "v1")
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(MatchJSON(want), "the plugin's %s patch is README's", kind)
		}
		Expect(mustRun("-n", ns, "pause", p.Name)).To(ContainSubstring("paused: the operator leaves its children as they are"))
		Expect(mustRun("-n", ns, "pause", p.Name)).To(ContainSubstring("is already paused (by spec.paused)"))
		Expect(get(ctx, p).Spec.Paused).To(HaveValue(BeTrue()))
		expectPausedNow(ctx, p)
		Eventually(func() plugin.Pipeline { return statusJSON(p) }).Should(And(HaveField("Paused", true), HaveField("PausedBy", "spec.paused")))

		By("resume: spec.paused removed; the operator reconciles again")
		Expect(mustRun("-n", ns, "resume", p.Name)).To(ContainSubstring("resumed (was paused by spec.paused)"))
		Expect(get(ctx, p).Spec.Paused).To(BeNil())
		Eventually(reconciled(ctx, p)).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", Not(Equal(pipelinev1.ReasonPaused)))))
		Expect(mustRun("-n", ns, "resume", p.Name)).To(ContainSubstring("is not paused: nothing to resume"))

		By("resume also removes v1beta1's annotation, written on the v1 object as kubectl annotate does")
		latest := get(ctx, p)
		unpaused := latest.DeepCopy()
		metav1.SetMetaDataAnnotation(&latest.ObjectMeta, pipelinev1.PausedAnnotation, "true")
		Expect(admin.Patch(ctx, latest, client.MergeFrom(unpaused))).To(Succeed())
		expectPausedNow(ctx, p)
		Expect(mustRun("-n", ns, "resume", p.Name)).To(ContainSubstring("resumed (was paused by annotation " + pipelinev1.PausedAnnotation + ")"))
		Expect(get(ctx, p).Annotations).NotTo(HaveKey(pipelinev1.PausedAnnotation))
		Eventually(reconciled(ctx, p)).Should(HaveField("Status", metav1.ConditionTrue))

		By("failback: once the preferred node is ready, spec.failover.failbackNow; the operator moves the step back and clears it")
		joinNode(ctx, preferred, p)
		Expect(mustRun("-n", ns, "failback", p.Name)).To(ContainSubstring("failback requested"))
		Eventually(runningPodNodes(ctx, p, 2)).Should(ConsistOf(preferred))
		Eventually(func() *bool { return get(ctx, p).Spec.Failover.FailbackNow }).Should(BeNil(), "the operator clears the request")
		Eventually(func() plugin.Step { return statusJSON(p).Steps[1] }).Should(And(HaveField("Node", preferred), HaveField("OnFallback", false)))

		By("errors a user can act on: a Pipeline that does not exist, a failback under failback Automatic")
		out, err := run("-n", ns, "pause", "nope")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring(`pipeline "nope" not found in namespace "` + ns + `"`))
		automatic := get(ctx, p)
		manual := automatic.DeepCopy()
		automatic.Spec.Failover.Failback = pipelinev1.FailbackAutomatic
		Expect(admin.Patch(ctx, automatic, client.MergeFrom(manual))).To(Succeed())
		out, err = run("-n", ns, "failback", p.Name)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("spec.failover.failback is Automatic"))
		Expect(get(ctx, p).Spec.Failover.FailbackNow).To(BeNil())

		By("status -A -o json lists it among every namespace's Pipelines")
		all := mustRun("status", "-A", "-o", "json")
		var doc plugin.Document
		Expect(json.Unmarshal([]byte(all), &doc)).To(Succeed())
		Expect(doc.Items).To(ContainElement(And(HaveField("Namespace", ns), HaveField("Name", p.Name))))
	})

	// logs and trace on the local control plane: kube-apiserver reads the pods' logs from kwok's
	// server on loopback, which serves for each container the file its kwok Logs object
	// (kwok.x-k8s.io/v1alpha1) names, in the kubelet's CRI log format.
	It("prints a step's logs per pod and traces a request id through the router pods' logs, oldest first", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Replicas = ptr.To[int32](2)
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
		})
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(func() []corev1.Pod { return runningPods(stepPods(ctx, p, 1)) }).Should(HaveLen(2))
		Eventually(func() []corev1.Pod { return runningPods(routerPods(ctx, p)) }).Should(HaveLen(2))
		steps, routers := runningPods(stepPods(ctx, p, 1)), runningPods(routerPods(ctx, p))
		sortPods(steps)
		sortPods(routers)

		By("giving each pod's container a log file through a kwok Logs object")
		dir := GinkgoT().TempDir()
		at := func(s string) time.Time {
			t, err := time.Parse(time.RFC3339Nano, s)
			Expect(err).NotTo(HaveOccurred())
			return t
		}
		writeLogs(ctx, dir, steps[0], "step", []criLine{
			{at("2026-11-20T10:00:00Z"), `10.0.3.7 - - [20/Nov/2026:10:00:00 +0000] "POST / HTTP/1.1" 200 512`},
			{at("2026-11-20T10:00:01Z"), `10.0.3.7 - - [20/Nov/2026:10:00:01 +0000] "POST / HTTP/1.1" 200 498`},
		})
		writeLogs(ctx, dir, steps[1], "step", []criLine{
			{at("2026-11-20T10:00:01Z"), `10.0.3.7 - - [20/Nov/2026:10:00:01 +0000] "POST / HTTP/1.1" 200 506`},
		})
		// The router's lines as it writes them (log/slog's text format, the router's call), the
		// first pod's later than the second's: trace orders by the kubelet's time, not by pod.
		failed := func(t time.Time, requestID, reason string, status int) criLine {
			var b strings.Builder
			r := slog.NewRecord(t, slog.LevelWarn, "pipeline request failed", 0)
			r.Add("pipeline", ns+"/"+p.Name, "step", "step-2", "stepIndex", 2,
				"url", "http://"+p.Name+"-step-2."+ns+".svc.cluster.local.:9080/",
				"reason", reason, "status", status, "requestID", requestID, "error", "connection refused")
			Expect(slog.NewTextHandler(&b, nil).Handle(ctx, r)).To(Succeed())
			return criLine{t, strings.TrimSuffix(b.String(), "\n")}
		}
		late := failed(at("2026-11-20T10:00:03.5Z"), "req-42", "timeout", 504)
		early := failed(at("2026-11-20T10:00:02.25Z"), "req-42", "connection", 502)
		other := failed(at("2026-11-20T10:00:01Z"), "req-420", "connection", 502)
		writeLogs(ctx, dir, routers[0], "router", []criLine{other, late})
		writeLogs(ctx, dir, routers[1], "router", []criLine{early})

		By("logs: each pod's lines one pod after another, prefixed with its name")
		want := "[" + steps[0].Name + `] 10.0.3.7 - - [20/Nov/2026:10:00:00 +0000] "POST / HTTP/1.1" 200 512` + "\n" +
			"[" + steps[0].Name + `] 10.0.3.7 - - [20/Nov/2026:10:00:01 +0000] "POST / HTTP/1.1" 200 498` + "\n" +
			"[" + steps[1].Name + `] 10.0.3.7 - - [20/Nov/2026:10:00:01 +0000] "POST / HTTP/1.1" 200 506` + "\n"
		// kwok learns of the Logs objects through its watch: the first reads may come before.
		Eventually(func() (string, error) { return run("-n", ns, "logs", p.Name, "step-1") }).Should(Equal(want))
		By("logs --tail 1: the last line of each pod")
		Expect(mustRun("-n", ns, "logs", p.Name, "1", "--tail", "1")).To(Equal(
			"[" + steps[0].Name + `] 10.0.3.7 - - [20/Nov/2026:10:00:01 +0000] "POST / HTTP/1.1" 200 498` + "\n" +
				"[" + steps[1].Name + `] 10.0.3.7 - - [20/Nov/2026:10:00:01 +0000] "POST / HTTP/1.1" 200 506` + "\n"))

		By("trace: the lines naming req-42 from both router pods, oldest first, each with its time and pod; not req-420's")
		Eventually(func() (string, error) { return run("-n", ns, "trace", p.Name, "req-42") }).Should(Equal(
			"2026-11-20T10:00:02.25Z " + routers[1].Name + " " + early.text + "\n" +
				"2026-11-20T10:00:03.5Z " + routers[0].Name + " " + late.text + "\n"))

		By("trace of a request id no line names: the not-found message, naming the router pods")
		Expect(mustRun("-n", ns, "trace", p.Name, "req-7")).To(ContainSubstring(
			"nothing found: no line of the logs of the router pods (" + routers[0].Name + ", " + routers[1].Name + ") names requestID=req-7."))
	})
})

// criLine is a line of a container's log as the kubelet stores it: when it was written, and
// what.
type criLine struct {
	time time.Time
	text string
}

// writeLogs writes lines to a file in dir in the CRI log format and creates the kwok Logs object
// that makes kwok serve it as the log of pod's container.
func writeLogs(ctx context.Context, dir string, pod corev1.Pod, container string, lines []criLine) {
	GinkgoHelper()
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", l.time.UTC().Format(time.RFC3339Nano), l.text)
	}
	file := filepath.Join(dir, pod.Name+"-"+container+".log")
	Expect(os.WriteFile(file, []byte(b.String()), 0o644)).To(Succeed())
	logs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata":   map[string]any{"namespace": pod.Namespace, "name": pod.Name},
		"spec": map[string]any{"logs": []any{
			map[string]any{"containers": []any{container}, "logsFile": file},
		}},
	}}
	Expect(admin.Create(ctx, logs)).To(Succeed(), "localcluster up installs kwok's Logs CRD: restart an older local control plane (make local-down local-up)")
}

// runningPods are the pods that run and are not terminating.
func runningPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
			out = append(out, pod)
		}
	}
	return out
}

func sortPods(pods []corev1.Pod) {
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
}
