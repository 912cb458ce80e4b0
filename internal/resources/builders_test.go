package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestDesiredStepDeploymentOfTheSample(t *testing.T) {
	p := testenv.Sample(t, "vision")
	d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", ""))

	if d.Name != "facedetection-pipeline-step-1" || d.Namespace != "vision" {
		t.Errorf("deployment is %s/%s", d.Namespace, d.Name)
	}
	if len(d.OwnerReferences) != 1 || !ptr.Deref(d.OwnerReferences[0].Controller, false) || d.OwnerReferences[0].UID != p.UID {
		t.Errorf("owner references %+v do not make the Pipeline the controller", d.OwnerReferences)
	}
	wantLabels := map[string]string{
		"pipeline": "facedetection-pipeline", "step": "1",
		"app.kubernetes.io/name": "pipeline-step", "app.kubernetes.io/instance": "facedetection-pipeline",
		"app.kubernetes.io/component": "step-1", "app.kubernetes.io/part-of": "facedetection-pipeline",
		"app.kubernetes.io/managed-by": "pipeline-operator",
	}
	if diff := cmp.Diff(wantLabels, d.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLabels, d.Spec.Template.Labels); diff != "" {
		t.Errorf("pod labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"pipeline": "facedetection-pipeline", "app.kubernetes.io/component": "step-1"}, d.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}

	pod := d.Spec.Template.Spec
	if len(pod.NodeSelector) != 0 {
		t.Errorf("node selector %v: the step is pinned by node name, not by a label a kubelet can set", pod.NodeSelector)
	}
	if diff := cmp.Diff(nameAffinity("xx-test-node236"), pod.Affinity); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "nginx:latest" {
		t.Errorf("image %q", c.Image)
	}
	if len(c.Args) != 0 || len(c.Command) != 0 {
		t.Errorf("args must not become container arguments: command %q args %q", c.Command, c.Args)
	}
	wantEnv := map[string]string{
		"listenPort":    "9080",
		"MODEL_NAME":    "facedetection-1",
		"MODEL_PATH":    "/models/facedetection-1",
		"PIPELINE_NAME": "facedetection-pipeline",
		"STEP_NAME":     "step-1",
		"STEP_INDEX":    "1",
		"NEXT_STEP_URL": "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80",
	}
	if diff := cmp.Diff(wantEnv, testenv.EnvMap(c.Env)); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9080 {
		t.Errorf("ports %+v, want containerPort 9080 from listenPort", c.Ports)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/models" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volume mounts %+v, want /models read-only", c.VolumeMounts)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].PersistentVolumeClaim == nil ||
		pod.Volumes[0].PersistentVolumeClaim.ClaimName != ClaimName(p) || !pod.Volumes[0].PersistentVolumeClaim.ReadOnly {
		t.Errorf("volumes %+v, want claim %s read-only", pod.Volumes, ClaimName(p))
	}
}

func TestLastStepHasNoNextStep(t *testing.T) {
	p := testenv.Sample(t, "default")
	d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 1, "", "", ""))
	env := d.Spec.Template.Spec.Containers[0].Env
	found := false
	for _, e := range env {
		if e.Name == pipelinev1.EnvNextStepURL {
			found = true
			if e.Value != "" {
				t.Errorf("last step forwards to %q", e.Value)
			}
		}
	}
	if !found {
		t.Errorf("last step has no %s variable", pipelinev1.EnvNextStepURL)
	}
	if got := d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort; got != 80 {
		t.Errorf("step without listenPort listens on %d, want 80", got)
	}
}

func TestDesiredStepDeploymentExtensions(t *testing.T) {
	p := testenv.Sample(t, "default")
	s := &p.Spec.Steps[1]
	s.Name = "recognise"
	s.Replicas = ptr.To[int32](3)
	s.Port = ptr.To[int32](7000)
	s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	s.Env = []corev1.EnvVar{{Name: "EXTRA", Value: "1"}}
	s.NodeSelector = map[string]string{"accelerator": "npu"}
	s.Tolerations = []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpExists}}
	p.Spec.ModelStorage.MountPath = "/data"

	d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 1, "", "", ""))
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if d.Name != "facedetection-pipeline-recognise" || *d.Spec.Replicas != 3 {
		t.Errorf("deployment %s with %d replicas", d.Name, *d.Spec.Replicas)
	}
	if c.Ports[0].ContainerPort != 7000 {
		t.Errorf("port %d, want 7000", c.Ports[0].ContainerPort)
	}
	if !c.Resources.Limits.Cpu().Equal(resource.MustParse("500m")) {
		t.Errorf("resources %+v", c.Resources)
	}
	env := testenv.EnvMap(c.Env)
	if env["EXTRA"] != "1" || env["MODEL_PATH"] != "/data/facedetection-2" || env["STEP_NAME"] != "recognise" {
		t.Errorf("env %v", env)
	}
	if diff := cmp.Diff(map[string]string{"accelerator": "npu"}, pod.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
	if got := PinnedNode(&pod); got != "xx-test-node239" {
		t.Errorf("pinned to %q, want the location", got)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "edge" {
		t.Errorf("tolerations %+v", pod.Tolerations)
	}
	// A step failed over to another node is pinned there, its other node labels kept.
	moved := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 1, "", "edge-b", "")).Spec.Template.Spec
	if diff := cmp.Diff(map[string]string{"accelerator": "npu"}, moved.NodeSelector); diff != "" {
		t.Errorf("node selector of a moved step (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(nameAffinity("edge-b"), moved.Affinity); diff != "" {
		t.Errorf("affinity of a moved step (-want +got):\n%s", diff)
	}
	if c.VolumeMounts[0].MountPath != "/data" {
		t.Errorf("mount path %q", c.VolumeMounts[0].MountPath)
	}

	// The previous step now forwards to the renamed step's Service on its port.
	prev := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", ""))
	if got := testenv.EnvMap(prev.Spec.Template.Spec.Containers[0].Env)[pipelinev1.EnvNextStepURL]; got != "http://facedetection-pipeline-recognise.default.svc.cluster.local.:7000" {
		t.Errorf("step 1 forwards to %q", got)
	}
}

func TestDesiredStepService(t *testing.T) {
	p := testenv.Sample(t, "default")
	svc := testenv.Typed[corev1.Service](t, StepService(p, 0))
	if svc.Name != "facedetection-pipeline-step-1" || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service %s of type %s", svc.Name, svc.Spec.Type)
	}
	want := []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 9080, TargetPort: intstr.FromInt32(9080)}}
	if diff := cmp.Diff(want, svc.Spec.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", ""))
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, svc.Spec.Selector); diff != "" {
		t.Errorf("service does not select the deployment's pods (-deployment +service):\n%s", diff)
	}
	if svc.Labels["step"] != "1" || svc.Labels["pipeline"] != "facedetection-pipeline" || len(svc.OwnerReferences) != 1 {
		t.Errorf("labels %v owners %v", svc.Labels, svc.OwnerReferences)
	}

	// The port of a step of the Open Inference Protocol's gRPC service says it speaks HTTP/2
	// without TLS; a REST step's says nothing.
	p.Spec.Steps[0].Protocol = pipelinev1.StepProtocolOpenInferenceGRPC
	p.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInference
	svc = testenv.Typed[corev1.Service](t, StepService(p, 0))
	want[0].AppProtocol = ptr.To("kubernetes.io/h2c")
	if diff := cmp.Diff(want, svc.Spec.Ports); diff != "" {
		t.Errorf("gRPC step ports (-want +got):\n%s", diff)
	}
	if rest := testenv.Typed[corev1.Service](t, StepService(p, 1)); rest.Spec.Ports[0].AppProtocol != nil {
		t.Errorf("a REST step's port has appProtocol %q", *rest.Spec.Ports[0].AppProtocol)
	}
}

func TestDesiredStorage(t *testing.T) {
	tests := []struct {
		name    string
		storage pipelinev1.ModelStorage
		check   func(t *testing.T, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim)
	}{{
		name: "nfs",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
			NFS: &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/home/aiedge/csiTest"}},
		check: func(t *testing.T, pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
			want := &corev1.NFSVolumeSource{Server: "192.168.20.235", Path: "/home/aiedge/csiTest", ReadOnly: true}
			if diff := cmp.Diff(want, pv.Spec.NFS); diff != "" {
				t.Errorf("nfs source (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "csi with nfs.csi.k8s.io, the default driver",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver, VolumeAttributes: map[string]string{"server": "nfs.local", "share": "/models"}}},
		check: func(t *testing.T, pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
			if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != "nfs.csi.k8s.io" || pv.Spec.CSI.VolumeHandle != pv.Name {
				t.Fatalf("csi source %+v", pv.Spec.CSI)
			}
			if diff := cmp.Diff(map[string]string{"server": "nfs.local", "share": "/models"}, pv.Spec.CSI.VolumeAttributes); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "csi with its own driver",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: "smb.csi.k8s.io", VolumeAttributes: map[string]string{"source": "//smb/models"}}},
		check: func(t *testing.T, pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
			if pv.Spec.CSI.Driver != "smb.csi.k8s.io" {
				t.Errorf("driver %q", pv.Spec.CSI.Driver)
			}
			if diff := cmp.Diff(map[string]string{"source": "//smb/models"}, pv.Spec.CSI.VolumeAttributes); diff != "" {
				t.Errorf("attributes must not include the driver (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "storageClass with capacity and access modes",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{Name: "fast",
			Capacity: ptr.To(resource.MustParse("20Gi")), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}},
		check: func(t *testing.T, _ *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) {
			if ptr.Deref(pvc.Spec.StorageClassName, "") != "fast" || pvc.Spec.VolumeName != "" {
				t.Errorf("class %v volume %q", pvc.Spec.StorageClassName, pvc.Spec.VolumeName)
			}
			if !pvc.Spec.Resources.Requests.Storage().Equal(resource.MustParse("20Gi")) ||
				!cmp.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
				t.Errorf("claim spec %+v", pvc.Spec)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			p.Spec.ModelStorage = tt.storage
			pvc := testenv.Typed[corev1.PersistentVolumeClaim](t, PVC(p, ""))
			var pv *corev1.PersistentVolume
			if OwnsVolume(p) {
				pv = testenv.Typed[corev1.PersistentVolume](t, PV(p, "", InlineVolumeSource(p)))
				if pvc.Spec.VolumeName != pv.Name || ptr.Deref(pvc.Spec.StorageClassName, "x") != "" {
					t.Errorf("claim is not bound to the volume: volumeName %q class %v", pvc.Spec.VolumeName, pvc.Spec.StorageClassName)
				}
				if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != pvc.Name || pv.Spec.ClaimRef.Namespace != "default" {
					t.Errorf("volume is not reserved for the claim: %+v", pv.Spec.ClaimRef)
				}
				if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
					t.Errorf("reclaim policy %q would risk the models", pv.Spec.PersistentVolumeReclaimPolicy)
				}
				if pv.Labels[LabelPipelineNamespace] != "default" || pv.Labels[LabelPipeline] != p.Name || len(pv.OwnerReferences) != 0 {
					t.Errorf("volume labels %v owners %v", pv.Labels, pv.OwnerReferences)
				}
				if !pv.Spec.Capacity.Storage().Equal(capacity(p)) {
					t.Errorf("capacity %v", pv.Spec.Capacity)
				}
			}
			if len(pvc.OwnerReferences) != 1 || pvc.Labels[LabelManagedBy] != ManagedBy {
				t.Errorf("claim owners %v labels %v", pvc.OwnerReferences, pvc.Labels)
			}
			tt.check(t, pv, pvc)
		})
	}
}

// builtPods are the pod specs the builders give a step, a step in a restricted namespace and
// the router of the routed sample, by what they are.
func builtPods(t *testing.T) map[string]corev1.PodSpec {
	t.Helper()
	p := testenv.RoutedSample(t)
	config, err := RouterConfigJSON(p, "")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]corev1.PodSpec{
		"step":            testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", "")).Spec.Template.Spec,
		"restricted step": testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 1, PodSecurityRestricted, "", "")).Spec.Template.Spec,
		"router":          testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, config, "")).Spec.Template.Spec,
	}
}

// No step or router pod calls the Kubernetes API: none mounts a ServiceAccount token, which
// anyone who breaks into the step's image could otherwise use.
func TestPodsMountNoServiceAccountToken(t *testing.T) {
	for name, pod := range builtPods(t) {
		if got := pod.AutomountServiceAccountToken; got == nil || *got {
			t.Errorf("%s pods: automountServiceAccountToken %v, want false", name, got)
		}
	}
}

// No step or router pod gets the kubelet's variables for every Service of its namespace
// (enableServiceLinks): steps find each other by DNS, and a Service made in the namespace sets
// nothing in their containers.
func TestPodsEnableNoServiceLinks(t *testing.T) {
	for name, pod := range builtPods(t) {
		if got := pod.EnableServiceLinks; got == nil || *got {
			t.Errorf("%s pods: enableServiceLinks %v, want false", name, got)
		}
	}
}

func TestStorageUnderAnEarlierVolumeName(t *testing.T) {
	const kept = "default-facedetection-pipeline-1a2b3c4d"
	for _, typ := range []pipelinev1.ModelStorageType{pipelinev1.ModelStorageTypeNFS, pipelinev1.ModelStorageTypeCSI} {
		t.Run(string(typ), func(t *testing.T) {
			p := testenv.Sample(t, "default")
			if typ == pipelinev1.ModelStorageTypeCSI {
				// The sample's export, as csi storage with the default driver.
				nfs := p.Spec.ModelStorage.NFS
				p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: typ, CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver,
					VolumeAttributes: map[string]string{"server": nfs.Server, "share": nfs.Path}}}
			}
			for _, tt := range []struct{ given, want string }{{"", PVName(p)}, {kept, kept}} {
				pv := testenv.Typed[corev1.PersistentVolume](t, PV(p, tt.given, InlineVolumeSource(p)))
				pvc := testenv.Typed[corev1.PersistentVolumeClaim](t, PVC(p, tt.given))
				if pv.Name != tt.want || pvc.Spec.VolumeName != tt.want {
					t.Errorf("given %q: volume %q, claim bound to %q; want %q", tt.given, pv.Name, pvc.Spec.VolumeName, tt.want)
				}
				if pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle != tt.want {
					t.Errorf("given %q: volume handle %q, want the volume's name %q (a volume's source cannot change)",
						tt.given, pv.Spec.CSI.VolumeHandle, tt.want)
				}
				if pvc.Name != ClaimName(p) || pv.Spec.ClaimRef.Name != ClaimName(p) {
					t.Errorf("given %q: claim %q, claimRef %q; want %q", tt.given, pvc.Name, pv.Spec.ClaimRef.Name, ClaimName(p))
				}
			}
		})
	}
}

// With the router, the router calls every step: a step that also forwarded by itself would have
// the later steps run twice. One data path, never both.
func TestWithTheRouterNoStepForwards(t *testing.T) {
	p := testenv.RoutedSample(t)
	for i := range p.Spec.Steps {
		d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, i, "", "", ""))
		env := testenv.EnvMap(d.Spec.Template.Spec.Containers[0].Env)
		if next, ok := env[pipelinev1.EnvNextStepURL]; !ok || next != "" {
			t.Errorf("step %d: %s=%q (present %v), want present and empty", i+1, pipelinev1.EnvNextStepURL, next, ok)
		}
	}
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}
	d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", ""))
	if next := testenv.EnvMap(d.Spec.Template.Spec.Containers[0].Env)[pipelinev1.EnvNextStepURL]; next != StepURL(p, 1, "") {
		t.Errorf("without the router step 1 forwards to %q, want %q", next, StepURL(p, 1, ""))
	}
}
