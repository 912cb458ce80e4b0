package v1beta1

// StepAutoscaling makes a HorizontalPodAutoscaler scale a step's pods between minReplicas and
// maxReplicas on their CPU and memory utilization (a percentage of the container's requests).
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not exceed autoscaling.maxReplicas"
type StepAutoscaling struct {
	// minReplicas is the fewest pods the step scales down to. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Min Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most pods the step scales up to.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCPUUtilizationPercentage is the average CPU use of the step's pods, as a percentage
	// of their CPU request, that the autoscaler keeps them at. When neither this nor
	// targetMemoryUtilizationPercentage is set, the target is 80% CPU.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target CPU Utilization (%)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`

	// targetMemoryUtilizationPercentage is the average memory use of the step's pods, as a
	// percentage of their memory request, that the autoscaler keeps them at. With both targets
	// the autoscaler follows the one that asks for more pods.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Memory Utilization (%)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`
}

// StepAutoscalingStatus is what the HorizontalPodAutoscaler of an autoscaled step reports.
type StepAutoscalingStatus struct {
	// minReplicas is the fewest pods the autoscaler keeps.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Min Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	MinReplicas int32 `json:"minReplicas"`

	// maxReplicas is the most pods the autoscaler starts.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Max Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	MaxReplicas int32 `json:"maxReplicas"`

	// currentReplicas is the number of pods the autoscaler last saw.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Current Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	CurrentReplicas int32 `json:"currentReplicas"`

	// desiredReplicas is the number of pods the autoscaler last asked for.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Desired Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	DesiredReplicas int32 `json:"desiredReplicas"`

	// scalingActive is false while the autoscaler cannot compute a pod count, for instance
	// because the cluster serves no resource metrics API or the step's container requests no
	// CPU (memory) for a CPU (memory) target: the step keeps its pods and the Pipeline is not
	// failed. Absent until the autoscaler has reported.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Scaling Active",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	ScalingActive *bool `json:"scalingActive,omitempty"`

	// message is why the autoscaler is not scaling, when scalingActive is false.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Message",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Message string `json:"message,omitempty"`
}
