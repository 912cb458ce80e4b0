package manager

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/installcheck"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The check the chart's `helm test` runs (manager --check-install) passes where the manager
// serves its webhooks, storing nothing, and fails, saying which, where nothing answers for them.
func TestIntegrationInstallCheck(t *testing.T) {
	testenv.RequireAssets(t)
	t.Run("the manager serves the webhooks", func(t *testing.T) {
		env := testenv.New()
		ctx, c, _, _ := serveWebhooks(t, env, WebhookOptions{})
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "install-check-"}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		// As the chart's test pod: a ServiceAccount that may only create Pipelines there.
		for _, o := range []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "check", Namespace: ns.Name}, Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{pipelinev1.GroupVersion.Group}, Resources: []string{"pipelines"}, Verbs: []string{"create"}}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "check", Namespace: ns.Name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "check"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "check", Namespace: ns.Name}}},
		} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		asCheck := rest.CopyConfig(env.Config)
		asCheck.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns.Name + ":check",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns.Name, "system:authenticated"}}
		check, err := client.New(asCheck, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		// Until the manager's cache has synced, its webhooks may refuse.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if err = installcheck.Run(ctx, check, ns.Name); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("the check failed against a manager serving its webhooks: %v", err)
		}
		stored := &pipelinev1.PipelineList{}
		if err := c.List(ctx, stored, client.InNamespace(ns.Name)); err != nil {
			t.Fatal(err)
		}
		if len(stored.Items) != 0 {
			t.Errorf("the check stored %d Pipelines", len(stored.Items))
		}
	})
	t.Run("no webhook answers", func(t *testing.T) {
		env := testenv.New()
		cfg, err := env.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Stop() })
		c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = installcheck.Run(ctx, c, "default")
		if err == nil || err.Error() != "a valid Pipeline came back without the finalizer the defaulting webhook adds: the defaulting webhook did not answer" {
			t.Fatalf("the check without webhooks: %v", err)
		}
	})
}
