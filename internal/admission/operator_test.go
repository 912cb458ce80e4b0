package admission

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// A stolen operator token may patch Pipelines (the operator writes its finalizer and clears
// failbackNow by patches); the validating webhook keeps what a Pipeline asks for its author's.
var _ = Describe("The operator's own identity", func() {
	It("changes no Pipeline's spec but clearing failbackNow; its metadata patches pass, as others' spec patches do", func(ctx SpecContext) {
		p := testenv.Sample(GinkgoT(), newNamespace(ctx))
		p.Spec.Failover = &pipelinev1.Failover{FailbackNow: new(true)}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		// The operator's user name, with an administrator's rights: only the webhook stands in
		// the way.
		asOperator := rest.CopyConfig(cfg)
		asOperator.Impersonate = rest.ImpersonationConfig{UserName: operatorUser, Groups: []string{"system:masters"}}
		operator, err := client.New(asOperator, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		patch := func(c client.Client, json string) error {
			return c.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(json)))
		}
		const refused = "the operator's identity changes no Pipeline's spec"
		for what, json := range map[string]string{
			"an exposure":     `{"spec":{"expose":{"serviceType":"LoadBalancer"}}}`,
			"a storage":       `{"spec":{"modelStorage":{"nfs":{"server":"10.0.0.9","path":"/tenant-b"}}}}`,
			"a step's image":  `{"spec":{"steps":[{"name":"x","image":"attacker/image","location":"node-a","model":"m"}]}}`,
			"failbackNow set": `{"spec":{"failover":{"failbackNow":false}}}`,
		} {
			err := patch(operator, json)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
			Expect(err).To(MatchError(ContainSubstring(refused)), what)
		}

		Expect(patch(operator, `{"metadata":{"labels":{"team":"a"},"finalizers":["example.com/hold"]}}`)).To(Succeed(), "metadata")
		Expect(patch(operator, `{"spec":{"failover":{"failbackNow":null}}}`)).To(Succeed(), "failbackNow cleared")
		Expect(patch(k8sClient, `{"spec":{"expose":{"serviceType":"NodePort"}}}`)).To(Succeed(), "the author's change")
		Expect(patch(k8sClient, `{"metadata":{"finalizers":null}}`)).To(Succeed())
	})
})
