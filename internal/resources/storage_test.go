package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// classPipeline is the sample Pipeline with storage of type ModelStorageClass naming class.
func classPipeline(t *testing.T, class string) *pipelinev1.Pipeline {
	t.Helper()
	p := testenv.Sample(t, "team-a")
	p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
		ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: class, Capacity: ptr.To(resource.MustParse("5Gi")),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}}}
	return p
}

func TestVolumeFromModelStorageClass(t *testing.T) {
	tests := []struct {
		name  string
		class pipelinev1.ModelStorageClassSpec
		// want is the volume's spec without capacity, access modes and claimRef, which the
		// Pipeline gives; a CSI VolumeHandle "" stands for the volume's own name.
		want corev1.PersistentVolumeSpec
	}{{
		name:  "nfs, read-only by default",
		class: pipelinev1.ModelStorageClassSpec{NFS: &pipelinev1.NFSModelStorageSource{Server: "nfs.example.com", Path: "/exports/models"}},
		want: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports/models", ReadOnly: true}}},
	}, {
		name: "nfs, writable, with mount options",
		class: pipelinev1.ModelStorageClassSpec{NFS: &pipelinev1.NFSModelStorageSource{Server: "10.0.0.5", Path: "/m"},
			MountOptions: []string{"nfsvers=4.1", "hard"}, ReadOnly: ptr.To(false)},
		want: corev1.PersistentVolumeSpec{MountOptions: []string{"nfsvers=4.1", "hard"}, PersistentVolumeSource: corev1.PersistentVolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: "10.0.0.5", Path: "/m"}}},
	}, {
		name: "csi without a volume handle: each volume is its own",
		class: pipelinev1.ModelStorageClassSpec{CSI: &pipelinev1.CSIModelStorageSource{Driver: "nfs.csi.k8s.io",
			VolumeAttributes: map[string]string{"server": "nfs.example.com", "share": "/models"}}, ReadOnly: ptr.To(true)},
		want: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: "nfs.csi.k8s.io", ReadOnly: true, VolumeAttributes: map[string]string{"server": "nfs.example.com", "share": "/models"}}}},
	}, {
		name: "csi with the class's volume handle and mount options",
		class: pipelinev1.ModelStorageClassSpec{CSI: &pipelinev1.CSIModelStorageSource{Driver: "smb.csi.k8s.io",
			VolumeHandle: "models-share", VolumeAttributes: map[string]string{"source": "//smb/models"}}, MountOptions: []string{"ro"}},
		want: corev1.PersistentVolumeSpec{MountOptions: []string{"ro"}, PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: "smb.csi.k8s.io", VolumeHandle: "models-share", ReadOnly: true, VolumeAttributes: map[string]string{"source": "//smb/models"}}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := classPipeline(t, "shared")
			class := &pipelinev1.ModelStorageClass{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: tt.class}
			pv := testenv.Typed[corev1.PersistentVolume](t, PV(p, "", ClassVolumeSource(class)))
			pvc := testenv.Typed[corev1.PersistentVolumeClaim](t, PVC(p, ""))

			want := tt.want.DeepCopy()
			if want.CSI != nil && want.CSI.VolumeHandle == "" {
				want.CSI.VolumeHandle = pv.Name
			}
			want.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}
			want.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}
			want.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			want.StorageClassName = ""
			want.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "team-a", Name: pvc.Name}
			if diff := cmp.Diff(*want, pv.Spec); diff != "" {
				t.Errorf("volume spec (-want +got):\n%s", diff)
			}
			if pvc.Spec.VolumeName != pv.Name || ptr.Deref(pvc.Spec.StorageClassName, "x") != "" {
				t.Errorf("claim is not bound to the volume: volumeName %q class %v", pvc.Spec.VolumeName, pvc.Spec.StorageClassName)
			}
			if pv.Labels[LabelPipelineNamespace] != "team-a" || pv.Labels[LabelPipeline] != p.Name || len(pv.OwnerReferences) != 0 {
				t.Errorf("volume labels %v owners %v", pv.Labels, pv.OwnerReferences)
			}
		})
	}
}

func TestInlineVolumeSourceIsReadOnlyWithoutMountOptions(t *testing.T) {
	p := testenv.Sample(t, "default")
	want := VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "192.168.20.235", Path: "/home/aiedge/csiTest", ReadOnly: true}}
	if diff := cmp.Diff(want, InlineVolumeSource(p)); diff != "" {
		t.Errorf("source of the sample (-want +got):\n%s", diff)
	}
}

func TestStorageNamesOfModelStorageClass(t *testing.T) {
	sample := testenv.Sample(t, "default")
	// The names of the other types do not depend on the new field: an upgrade renames nothing
	// (the claim keeps its name, and with it the volume it is bound to).
	if got := ClaimName(sample); got != "facedetection-pipeline-models-1b5df996" {
		t.Errorf("the sample's claim is now %q: existing claims would be replaced", got)
	}
	if got := LegacyPVName(sample); got != "default-facedetection-pipeline-1b5df996" {
		t.Errorf("the sample's volume as earlier versions named it is now %q: upgraded Pipelines would lose it", got)
	}
	if got := PVName(sample); got != "default-facedetection-pipeline-0f0888c56431f7876a54a7e92ecac5160cd8961c9108a891e974f8a4be85ea4b" {
		t.Errorf("the sample's new volume name is now %q", got)
	}
	if ModelStorageClassName(sample) != "" {
		t.Errorf("nfs storage names class %q", ModelStorageClassName(sample))
	}

	a, b := classPipeline(t, "shared"), classPipeline(t, "other")
	if ModelStorageClassName(a) != "shared" || !OwnsVolume(a) || !OwnsStorage(a) {
		t.Errorf("class %q, owns volume %v, owns storage %v", ModelStorageClassName(a), OwnsVolume(a), OwnsStorage(a))
	}
	if PVName(a) == PVName(b) || ClaimName(a) == ClaimName(b) {
		t.Errorf("another class keeps the names %q, %q: the volume's source cannot change in place", PVName(a), ClaimName(a))
	}
}
