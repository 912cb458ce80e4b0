package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		// Step 2's location names a node that joins only later: until then it runs on its
		// fallback node (as in the failback case of README's commands).
		preferred, fallback := "plugin-"+ns, "xx-test-node239"
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Location = preferred
			p.Spec.Steps[1].FallbackLocations = []string{fallback}
			p.Spec.Steps[1].Tolerations = []corev1.Toleration{joinedNodeToleration}
			p.Spec.Failover = &pipelinev1.Failover{Failback: pipelinev1.FailbackManual}
		})
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(func() string { return statusJSON(p).Steps[1].Node }).Should(Equal(fallback))

		By("status -o json: the v1 status, step 2 on its fallback node")
		st := statusJSON(p)
		Expect(st).To(And(HaveField("ServedVersion", "v1"), HaveField("Phase", "Running"), HaveField("Paused", false),
			HaveField("ReadySteps", HaveValue(BeEquivalentTo(2))), HaveField("TotalSteps", HaveValue(BeEquivalentTo(2))),
			HaveField("Failover.Failback", "Manual"), HaveField("Router", BeNil())))
		Expect(st.Steps).To(HaveLen(2))
		Expect(st.Steps[0]).To(And(HaveField("Name", "step-1"), HaveField("State", "Ready"), HaveField("Node", "xx-test-node236"),
			HaveField("NodeReady", HaveValue(BeTrue())), HaveField("OnFallback", false), HaveField("ReadyReplicas", HaveValue(BeEquivalentTo(1)))))
		Expect(st.Steps[1]).To(And(HaveField("Location", preferred), HaveField("Node", fallback), HaveField("OnFallback", true),
			HaveField("Deployment", deploymentName(p, 2))))

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
})
