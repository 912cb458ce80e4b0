package pipeline

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// crdAdmission checks a Pipeline the way the apiserver does before the validating webhook:
// structural defaulting, the OpenAPI schema and the CEL rules of the generated CRD, with the
// apiserver's own code, in process, so that fuzzing is fast.
type crdAdmission struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func loadCRDAdmission(t testing.TB) *crdAdmission {
	t.Helper()
	crd := testenv.PipelineCRD(t)
	// The Pipelines here are v1, the version the operator reads and the apiserver stores: the
	// schema of that version admits them.
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == pipelinev1.GroupVersion.Version
	})
	if i < 0 {
		t.Fatalf("the Pipeline CRD has no %s", pipelinev1.GroupVersion.Version)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[i].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	return &crdAdmission{structural: structural, schema: validator, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
}

// admit returns the Pipeline as the apiserver would store it, or the errors it would refuse it with.
func (a *crdAdmission) admit(p *pipelinev1.Pipeline) (*pipelinev1.Pipeline, field.ErrorList) {
	return a.admitUpdate(nil, p)
}

// admitUpdate is admit for an update of the stored Pipeline old (nil: a create), so that the
// CEL rules comparing with oldSelf run too.
func (a *crdAdmission) admitUpdate(old, p *pipelinev1.Pipeline) (*pipelinev1.Pipeline, field.ErrorList) {
	raw, err := a.defaulted(p)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	var oldRaw any
	if old != nil {
		if oldRaw, err = a.defaulted(old); err != nil {
			return nil, field.ErrorList{field.InternalError(nil, err)}
		}
	}
	errs := apivalidation.NameIsDNSSubdomain(p.Name, false)
	var nameErrs field.ErrorList
	for _, msg := range errs {
		nameErrs = append(nameErrs, field.Invalid(field.NewPath("metadata", "name"), p.Name, msg))
	}
	if all := append(nameErrs, apiservervalidation.ValidateCustomResource(nil, raw, a.schema)...); len(all) > 0 {
		return nil, all
	}
	if celErrs, _ := a.cel.Validate(context.Background(), nil, a.structural, raw, oldRaw, celconfig.RuntimeCELCostBudget); len(celErrs) > 0 {
		return nil, celErrs
	}
	out := &pipelinev1.Pipeline{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, out); err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	return out, nil
}

// defaulted is p as unstructured content with the CRD's defaults applied.
func (a *crdAdmission) defaulted(p *pipelinev1.Pipeline) (map[string]any, error) {
	p = p.DeepCopy()
	p.APIVersion, p.Kind = pipelinev1.GroupVersion.String(), "Pipeline"
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return nil, err
	}
	structuraldefaulting.Default(raw, a.structural)
	return raw, nil
}

const fuzzNamespace = "fuzz"

// startFuzzAPI starts a real apiserver for the seed run and stops it when f ends.
func startFuzzAPI(f *testing.F) client.Client {
	env := testenv.New()
	cfg, err := env.Start()
	if err != nil {
		f.Fatalf("start the apiserver: %v", err)
	}
	f.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	if err := testenv.ServeConversion(ctx, env); err != nil {
		f.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fuzzNamespace}}); err != nil {
		f.Fatal(err)
	}
	return c
}

// fuzzing is true in a `go test -fuzz` run, false when only the seeds run.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// FuzzPipeline drives defaulting, validation and the child builders with generated Pipelines.
// What the apiserver (CRD schema and CEL) and the validating webhook accept must default
// without change of meaning, and every child the operator would build from it must have a
// valid name and be accepted by the apiserver (dry run). Nothing may panic.
//
// The Pipelines are generated in v1, the version users write now and the operator reads, so
// that the fuzzer reaches every v1 spec it can build, not only those a v1beta1 Pipeline
// converts to (the conversion has fuzz tests of its own in api/v1beta1). The inputs are those
// of the v1beta1 fuzzer it replaces, mapped to their v1 fields, so that the seeds stay the same
// Pipelines: the argument is an env entry (v1beta1's args are env entries in v1), a step
// without a name is named step-<position> as the conversion names it, the seeds give the port
// their listenPort argument set, and the storage's server and share are the fields of its type.
//
// The CRD's own schema and CEL rules run in process (crdAdmission). Without -fuzz (the seeds,
// in make test-integration) the Pipeline and its children also go to a real apiserver. make
// test-fuzz fuzzes 5 000 inputs; longer: FUZZTIME=10m make test-fuzz.
func FuzzPipeline(f *testing.F) {
	admission := loadCRDAdmission(f)
	var apiserver client.Client
	if !fuzzing() && os.Getenv("KUBEBUILDER_ASSETS") != "" {
		apiserver = startFuzzAPI(f)
	}
	// The seeds with a listenPort variable give the port it set in v1beta1: the design's
	// sample, and the largest port.
	f.Add("facedetection-pipeline", "", "nginx:latest", "xx-test-node236", "facedetection-1", "listenPort", "9080", uint16(9080), uint16(0), uint8(1), uint8(0), "192.168.20.235", "/home/aiedge/csiTest", "", "")
	f.Add("p", "detect", "registry.example.com:5000/team/face@sha256:"+strings.Repeat("ab", 32), "node-1", "models/v2/face", "BATCH", "8", uint16(8080), uint16(3), uint8(3), uint8(1), "nfs.example.com", "/exports", "/data", "infer.example.com")
	f.Add(strings.Repeat("a", 63), strings.Repeat("b", 40), "busybox", "", "m", "listenPort", "65535", uint16(65535), uint16(1000), uint8(31), uint8(2), "", "", "/models", "")
	f.Add("x", "step-1", "nginx", "n.o.d.e", "a.b", "k", strings.Repeat("v", 300), uint16(1), uint16(1), uint8(0), uint8(3), "", "", "/m", "a.b.c")

	f.Fuzz(func(t *testing.T, name, stepName, image, location, model, envName, envValue string,
		port, replicas uint16, steps, storage uint8, server, share, mountPath, host string) {
		for _, v := range []string{name, stepName, image, location, model, envName, server, share, mountPath, host} {
			if len(v) > 512 {
				return // longer than any field allows: the schema refuses it, fuzzing it is slow
			}
		}
		if len(envValue) > 2*4096 {
			return
		}
		p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fuzzNamespace}}
		for i := range int(steps%32) + 1 {
			s := pipelinev1.Step{Name: fmt.Sprintf("step-%d", i+1), Image: image, Location: location, Model: model,
				Env: []corev1.EnvVar{{Name: envName, Value: envValue}}}
			if i == 0 && stepName != "" {
				s.Name = stepName
			}
			if port != 0 {
				pp := int32(port)
				s.Port = &pp
			}
			if replicas != 0 {
				r := int32(replicas)
				s.Replicas = &r
			}
			p.Spec.Steps = append(p.Spec.Steps, s)
		}
		m := &p.Spec.ModelStorage
		m.MountPath = mountPath
		switch storage % 4 {
		case 0:
			m.Type, m.NFS = pipelinev1.ModelStorageTypeNFS, &pipelinev1.NFSStorage{Server: server, Path: share}
		case 1:
			m.Type, m.CSI = pipelinev1.ModelStorageTypeCSI, &pipelinev1.CSIStorage{Driver: server, VolumeAttributes: map[string]string{"share": share}}
		case 2:
			m.Type, m.StorageClass = pipelinev1.ModelStorageTypeStorageClass, &pipelinev1.StorageClassStorage{Name: server}
		case 3:
			m.Type, m.ExistingClaim = pipelinev1.ModelStorageTypeExistingClaim, &pipelinev1.ExistingClaimStorage{Name: server}
		}
		if host != "" {
			p.Spec.Expose = &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort,
				Ingress: &pipelinev1.IngressExpose{Host: host}}
		}

		// The admission chain: defaulting webhook, CRD schema and CEL, validating webhook.
		// Defaulting must be idempotent and must not change what the operator builds.
		before := p.DeepCopy()
		p.Default()
		again := p.DeepCopy()
		again.Default()
		if !equality.Semantic.DeepEqual(again.Spec, p.Spec) {
			t.Fatalf("defaulting twice differs from once:\n%+v\n%+v", p.Spec, again.Spec)
		}
		p, errs := admission.admit(p)
		if len(errs) > 0 {
			return // refused by the CRD
		}
		if pipelineadmission.ValidatePipeline(p) != nil {
			return // refused by the validating webhook
		}
		if before, errs = admission.admit(before); len(errs) > 0 {
			t.Fatalf("accepted with the defaults written but refused without them: %v", errs)
		}
		// Accepted: the operator must build valid children, the same with and without defaults.
		p.UID = types.UID("fuzz-uid")
		before.UID = p.UID
		for i := range p.Spec.Steps {
			if got, want := resources.StepObjectName(p, i), resources.StepObjectName(before, i); got != want {
				t.Fatalf("step %d: defaulting renamed its objects from %s to %s", i, want, got)
			}
		}
		if resources.PVName(p) != resources.PVName(before) || resources.ClaimName(p) != resources.ClaimName(before) {
			t.Fatalf("defaulting renamed the storage: %s/%s, was %s/%s", resources.PVName(p), resources.ClaimName(p), resources.PVName(before), resources.ClaimName(before))
		}
		var children []runtime.ApplyConfiguration
		if resources.OwnsVolume(p) {
			children = append(children, resources.PV(p, "", resources.InlineVolumeSource(p)))
		}
		if resources.OwnsStorage(p) {
			children = append(children, resources.PVC(p, ""))
		}
		for i := range p.Spec.Steps {
			for _, msg := range validation.IsDNS1035Label(resources.StepObjectName(p, i)) {
				t.Fatalf("step %d: object name %q: %s", i, resources.StepObjectName(p, i), msg)
			}
			children = append(children, resources.StepDeployment(p, i, resources.PodSecurityRestricted, "", ""), resources.StepService(p, i))
		}
		if resources.IngressSpec(p) != nil {
			children = append(children, resources.Ingress(p))
		}
		if apiserver == nil {
			return
		}
		ctx := context.Background()
		c := apiserver
		if err := c.Create(ctx, p.DeepCopy(), client.DryRunAll); err != nil {
			t.Fatalf("the apiserver refuses a Pipeline the in-process admission accepted: %v", err)
		}
		for _, child := range children {
			if err := c.Apply(ctx, child, client.FieldOwner(apply.FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
				t.Fatalf("the apiserver refuses a child of an accepted Pipeline %+v: %v", p.Spec, err)
			}
		}
	})
}
