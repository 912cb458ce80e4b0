package admission

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// Every sample config/samples ships is applied as it is, through the CRD's schema and CEL rules
// and the webhooks: the ModelStorageClasses first (the v1beta1 one of release 0.2.0, read back
// in v1, then the v1 one, which the Pipeline of ModelStorageClass storage uses), then every
// Pipeline in a namespace of its own that the class selects, each v1 one reading back with
// the tensor mapping (steps[].inputs) it was written with.
var _ = Describe("The samples", func() {
	It("are all admitted as they are written", func(ctx context.Context) {
		files, err := samples.Files()
		Expect(err).NotTo(HaveOccurred())
		var classes, pipelines []*unstructured.Unstructured
		for _, f := range files {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(f.Data, &u.Object)).To(Succeed(), f.Name)
			switch u.GetKind() {
			case "ModelStorageClass":
				// The v1beta1 class first: the v1 class of the same name stays for the Pipelines.
				if u.GetAPIVersion() == pipelinev1.GroupVersion.String() {
					classes = append(classes, u)
				} else {
					classes = append([]*unstructured.Unstructured{u}, classes...)
				}
			case "Pipeline":
				pipelines = append(pipelines, u)
			default:
				Fail(f.Name + " is a " + u.GetKind())
			}
		}
		Expect(classes).To(HaveLen(2))
		Expect(len(pipelines)).To(BeNumerically(">=", 10))

		for i, c := range classes {
			By("creating the ModelStorageClass " + c.GetAPIVersion() + " " + c.GetName())
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			stored := &pipelinev1.ModelStorageClass{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(c), stored)).To(Succeed())
			Expect(stored.Spec.NFS).NotTo(BeNil(), "read in v1")
			if i < len(classes)-1 {
				Expect(k8sClient.Delete(ctx, stored)).To(Succeed())
				Eventually(func() bool {
					return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(c), &pipelinev1.ModelStorageClass{}))
				}).Should(BeTrue())
				continue
			}
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, stored))).To(Succeed()) })
		}

		for _, u := range pipelines {
			By("creating the Pipeline " + u.GetAPIVersion() + " " + u.GetName())
			ns := newNamespace(ctx)
			labelNamespace(ctx, ns, publishedLabel, "true")
			u.SetNamespace(ns)
			written := &pipelinev1.Pipeline{} // as the file says, before the apiserver answers into u
			if u.GetAPIVersion() == pipelinev1.GroupVersion.String() {
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, written)).To(Succeed())
			}
			Expect(k8sClient.Create(ctx, u)).To(Succeed())
			p := &pipelinev1.Pipeline{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), p)).To(Succeed())
			Expect(p.Spec.Steps).NotTo(BeEmpty())
			for _, s := range p.Spec.Steps {
				Expect(s.Name).NotTo(BeEmpty(), "every step is named once admitted")
			}
			for i, s := range written.Spec.Steps {
				Expect(p.Spec.Steps[i].Inputs).To(Equal(s.Inputs), "the tensor mapping of step %s is stored as written", s.Name)
			}
		}
	})
})
