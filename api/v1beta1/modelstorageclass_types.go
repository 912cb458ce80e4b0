package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NFSModelStorageSource is an NFS export that holds models.
type NFSModelStorageSource struct {
	// server is the NFS server: an IP address or a DNS name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$') || isIP(self)",message="nfs.server must be an IP address or a DNS name of the NFS server"
	Server string `json:"server"`

	// path is the exported directory on the server, an absolute path.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="nfs.path must be an absolute path on the NFS server"
	Path string `json:"path"`
}

// CSIModelStorageSource is a volume that a CSI driver mounts.
type CSIModelStorageSource struct {
	// driver is the name of the CSI driver, e.g. nfs.csi.k8s.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="csi.driver must be a CSI driver name: a DNS name of at most 63 characters, e.g. nfs.csi.k8s.io"
	Driver string `json:"driver"`

	// volumeAttributes are handed to the driver as the volume's attributes (for nfs.csi.k8s.io,
	// server and share).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 4096)",message="csi.volumeAttributes keys must be at most 253 characters and values at most 4096"
	VolumeAttributes map[string]string `json:"volumeAttributes,omitempty"`

	// volumeHandle identifies the volume to the driver. Without it every Pipeline's volume gets
	// its own handle, the PersistentVolume's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	VolumeHandle string `json:"volumeHandle,omitempty"`
}

// ModelStorageClassSpec is the storage an administrator publishes, and where it may be used.
// +kubebuilder:validation:XValidation:rule="has(self.nfs) != has(self.csi)",message="a ModelStorageClass needs exactly one source: set either nfs or csi"
// +kubebuilder:validation:XValidation:rule="has(self.nfs) == has(oldSelf.nfs) && (!has(self.nfs) || self.nfs == oldSelf.nfs)",message="nfs cannot change: the volumes of Pipelines were made from it; create a new ModelStorageClass for another source"
// +kubebuilder:validation:XValidation:rule="has(self.csi) == has(oldSelf.csi) && (!has(self.csi) || self.csi == oldSelf.csi)",message="csi cannot change: the volumes of Pipelines were made from it; create a new ModelStorageClass for another source"
// +kubebuilder:validation:XValidation:rule="(has(self.mountOptions) ? self.mountOptions : []) == (has(oldSelf.mountOptions) ? oldSelf.mountOptions : [])",message="mountOptions cannot change: the volumes of Pipelines were made with them; create a new ModelStorageClass for other options"
// +kubebuilder:validation:XValidation:rule="(has(self.readOnly) ? self.readOnly : true) == (has(oldSelf.readOnly) ? oldSelf.readOnly : true)",message="readOnly cannot change: the volumes of Pipelines were made with it; create a new ModelStorageClass instead"
type ModelStorageClassSpec struct {
	// nfs is an NFS export. Exactly one of nfs and csi is set. It cannot change: create a new
	// class for another source.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="NFS Export"
	NFS *NFSModelStorageSource `json:"nfs,omitempty"`

	// csi is a volume a CSI driver mounts. Exactly one of nfs and csi is set. It cannot change:
	// create a new class for another source.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="CSI Volume"
	CSI *CSIModelStorageSource `json:"csi,omitempty"`

	// mountOptions are the mount options of the PersistentVolumes made from the class (e.g.
	// nfsvers=4.1). They cannot change: create a new class for other options.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Mount Options",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	MountOptions []string `json:"mountOptions,omitempty"`

	// readOnly makes the volume source read-only (the NFS or CSI source of every
	// PersistentVolume made from the class). Defaults to true. Steps always mount the claim
	// read-only, but any pod of a selected namespace may mount the claim the operator makes
	// there: false lets every such pod, in every namespace the class selects, write the same
	// export, and change the models of all the others. Set false only for storage that every
	// selected namespace may change for all of them. It cannot change: create a new class
	// instead.
	// +optional
	// +kubebuilder:default=true
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Read Only",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	ReadOnly *bool `json:"readOnly,omitempty"`

	// namespaceSelector selects the namespaces whose Pipelines may use the class, by the
	// namespaces' labels: {} selects every namespace. An administrator may change it at any
	// time; a namespace it no longer selects gets no new volume from the class.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Namespace Selector",xDescriptors="urn:alm:descriptor:com.tectonic.ui:selector:core:v1:Namespace"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
}

// ModelStorageClassStatus is the observed state of a ModelStorageClass. A class has no state of
// its own (the Pipelines that use it report theirs), so it is empty; it is there so that
// catalogs (the OLM ClusterServiceVersion) can describe the kind like every other.
type ModelStorageClassStatus struct{}

// ModelStorageClass is storage a cluster administrator publishes to tenants: Pipelines in the
// namespaces its namespaceSelector selects use it with modelStorage.type modelStorageClass, and
// the operator makes their PersistentVolume from it, without the Pipeline's author needing the
// right to create PersistentVolumes.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=msc
// +kubebuilder:printcolumn:name="NFS Server",type=string,JSONPath=`.spec.nfs.server`
// +kubebuilder:printcolumn:name="NFS Path",type=string,JSONPath=`.spec.nfs.path`
// +kubebuilder:printcolumn:name="CSI Driver",type=string,JSONPath=`.spec.csi.driver`
// +kubebuilder:printcolumn:name="Read Only",type=boolean,JSONPath=`.spec.readOnly`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Model Storage Class",resources={{PersistentVolume,v1}}
type ModelStorageClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the published storage and the namespaces that may use it.
	// +required
	Spec ModelStorageClassSpec `json:"spec"`

	// status is empty: see ModelStorageClassStatus.
	// +optional
	Status ModelStorageClassStatus `json:"status,omitzero"`
}

// ModelStorageClassList is a list of ModelStorageClasses.
// +kubebuilder:object:root=true
type ModelStorageClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelStorageClass `json:"items"`
}
