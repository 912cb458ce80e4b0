package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// kubectlWaitReady runs `kubectl wait --for=condition=Ready` on p against the local control
// plane.
func kubectlWaitReady(p *pipelinev1.Pipeline) {
	GinkgoHelper()
	kubectl("wait", "--for=condition=Ready", "--timeout=60s", "-n", p.Namespace, "pipeline/"+p.Name)
}

// kubectl runs $KUBECTL (the binary the Makefile builds) against the local control plane and
// returns its standard output.
func kubectl(args ...string) string {
	GinkgoHelper()
	bin := os.Getenv("KUBECTL")
	Expect(bin).NotTo(BeEmpty(), "KUBECTL names the kubectl binary: run `make test-e2e`")
	cmd := exec.Command(bin, append([]string{"--kubeconfig", os.Getenv("E2E_KUBECONFIG")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, stderr.String())
	return string(out)
}

// kstatusOf is what kstatus (Flux, kpt) makes of p as the apiserver serves it.
func kstatusOf(ctx context.Context, p *pipelinev1.Pipeline) func() kstatus.Status {
	return func() kstatus.Status {
		GinkgoHelper()
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(get(ctx, p))
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(pipelinev1.GroupVersion.WithKind("Pipeline"))
		res, err := kstatus.Compute(u)
		Expect(err).NotTo(HaveOccurred())
		return res.Status
	}
}
