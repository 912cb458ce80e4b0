package admission

import (
	"context"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// An allowing review is reused for its validity by the same requester only; a refusal never is.
func TestAccessCacheReusesAllowingAnswers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	allowed := map[string]bool{"admin": true, "ops": true}
	var asked []string
	reviews := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authorizationv1.SubjectAccessReview)
			asked = append(asked, r.Spec.User+"/"+r.Spec.Groups[0])
			r.Status.Allowed = allowed[r.Spec.User]
			return nil
		},
	}).Build()
	v := &Validator{Reviews: reviews, Access: &AccessCache{Validity: 10 * time.Second, Max: 3, Now: func() time.Time { return now }}}
	p := sampleV1(t)
	p.Default()
	check := func(user, group string) error {
		ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, UserInfo: authenticationv1.UserInfo{Username: user, Groups: []string{group}}}})
		return v.storageAccess(ctx, p, fieldNames{})
	}
	step := func(d time.Duration, user, group string, wantAllowed bool, wantAsked int) {
		t.Helper()
		now = now.Add(d)
		err := check(user, group)
		if wantAllowed != (err == nil) || (!wantAllowed && !apierrors.IsForbidden(err)) {
			t.Fatalf("%s/%s: %v", user, group, err)
		}
		if len(asked) != wantAsked {
			t.Fatalf("%s/%s: %d reviews asked (%v), want %d", user, group, len(asked), asked, wantAsked)
		}
	}
	step(0, "admin", "g1", true, 1)
	step(9*time.Second, "admin", "g1", true, 1) // reused
	step(0, "admin", "g2", true, 2)             // other groups: asked
	step(0, "tenant", "g1", false, 3)           // refused
	allowed["tenant"] = true
	step(0, "tenant", "g1", true, 4)            // a refusal is not kept
	step(2*time.Second, "admin", "g1", true, 5) // expired after 10 s; kept anew in place of the expired answer
	step(0, "ops", "g1", true, 6)               // full and none expired: all go
	step(0, "admin", "g2", true, 7)
	if len(v.Access.allowed) != 2 {
		t.Errorf("kept %d answers, want ops/g1 and admin/g2", len(v.Access.allowed))
	}

	v.Access = nil
	step(0, "admin", "g1", true, 8)
	step(0, "admin", "g1", true, 9)
}
