package webhookserver

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/config/crd"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver/jsonshape"
)

// Every sample Pipeline passes the shape of both reviews, in both versions, with room to spare:
// the bounds refuse what the CRD refuses, never what users write.
func TestReviewShapesAdmitTheSamples(t *testing.T) {
	pipelines, err := crd.Pipelines()
	if err != nil {
		t.Fatal(err)
	}
	object := ObjectShape(pipelines)
	if got := object.Properties["spec"].Properties["steps"].MaxItems; got != 32 {
		t.Fatalf("the shape's steps are bounded to %d, want the CRD's 32", got)
	}
	limits := DefaultLimits()
	admission := admissionReview(object, limits.MaxUserInfoBytes)
	conversion := conversionReview(object, limits.MaxConversionObjects)
	files, err := samples.Files()
	if err != nil {
		t.Fatal(err)
	}
	var objects []json.RawMessage
	for _, f := range files {
		if !strings.Contains(f.Name, "_pipeline") {
			continue
		}
		data, err := yaml.YAMLToJSON(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, data)
		review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"UPDATE",` +
			`"userInfo":{"username":"system:serviceaccount:ns:sa","groups":["system:serviceaccounts","system:authenticated"],` +
			`"extra":{"authentication.kubernetes.io/pod-name":["p"]}},"object":` + string(data) + `,"oldObject":` + string(data) + `}}`
		if _, err := jsonshape.Check([]byte(review), admission, limits.Review); err != nil {
			t.Errorf("%s in an AdmissionReview: %v", f.Name, err)
		}
	}
	list, _ := json.Marshal(objects)
	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"distri-infer.ndsl.cn/v1beta1","objects":` +
		string(list) + `}}`
	conv := limits.Review
	conv.MaxValues = 0
	if _, err := jsonshape.Check([]byte(review), conversion, conv); err != nil {
		t.Errorf("the samples in a ConversionReview: %v", err)
	}
}
