package plugin

import (
	"encoding/json"
	"io"
	"time"
)

// DocumentAPIVersion and DocumentKind identify the JSON document `kubectl pipeline status -o
// json` prints. A field is only ever added to a version of the document; a change that renames,
// removes or changes the meaning of a field makes a new version.
const (
	DocumentAPIVersion = "kubectl-pipeline.distri-infer.ndsl.cn/v1"
	DocumentKind       = "PipelineStatusList"
)

// Document is what `status -o json` prints: the Pipelines asked for, each as the summary the
// tree shows, whichever API version the cluster served it in.
type Document struct {
	// APIVersion is DocumentAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is DocumentKind.
	Kind string `json:"kind"`
	// Items are the Pipelines, by namespace and name.
	Items []Pipeline `json:"items"`
}

// NewDocument is the document of items.
func NewDocument(items []Pipeline) Document {
	if items == nil {
		items = []Pipeline{}
	}
	return Document{APIVersion: DocumentAPIVersion, Kind: DocumentKind, Items: items}
}

// WriteDocument writes the document of items to w as indented JSON, one line after it. Its
// strings are as the cluster holds them, with the characters a terminal acts on written as \u
// escapes (printableJSON), which a JSON decoder reads back as they were.
func WriteDocument(w io.Writer, items []Pipeline) error {
	data, err := json.MarshalIndent(NewDocument(items), "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(printableJSON(data), '\n'))
	return err
}

// Pipeline is what the plugin reads of one Pipeline, the same for both API versions.
type Pipeline struct {
	// Namespace and Name are the Pipeline's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ServedVersion is the API version it was read in: v1, or v1beta1 on a cluster that serves
	// only that.
	ServedVersion string `json:"servedVersion"`
	// Phase is status.phase, in PascalCase in both versions (Creating, Running, Failed,
	// Deleting); empty before the operator's first pass.
	Phase string `json:"phase,omitempty"`
	// Generation is metadata.generation; ObservedGeneration is status.observedGeneration.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	// Paused says whether the operator leaves the children alone; PausedBy says what paused it
	// (spec.paused, or the annotation distri-infer.ndsl.cn/paused).
	Paused   bool   `json:"paused"`
	PausedBy string `json:"pausedBy,omitempty"`
	// ReadySteps and TotalSteps are the counts of the status; absent before the first pass.
	ReadySteps *int32 `json:"readySteps,omitempty"`
	TotalSteps *int32 `json:"totalSteps,omitempty"`
	// URL is status.url, where the entry is reached from outside the cluster.
	URL string `json:"url,omitempty"`
	// OperatorVersion is status.operatorVersion, the release of the operator that wrote the
	// status; absent for a status written by a release that did not record it.
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// Conditions are status.conditions, in the order the operator wrote them.
	Conditions []Condition `json:"conditions,omitempty"`
	// Failover is spec.failover with its defaults.
	Failover Failover `json:"failover"`
	// Steps are the steps, in spec order.
	Steps []Step `json:"steps"`
	// Router is the router; absent unless the Pipeline runs one.
	Router *Router `json:"router,omitempty"`
}

// Condition is one of status.conditions.
type Condition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
}

// Failover is the Pipeline's failover policy.
type Failover struct {
	// Failback is Automatic or Manual.
	Failback string `json:"failback"`
	// AfterSeconds and FailbackAfterSeconds are the waits, with their defaults (60, 300).
	AfterSeconds         int32 `json:"afterSeconds"`
	FailbackAfterSeconds int32 `json:"failbackAfterSeconds"`
	// FailbackRequested says that a manual failback was asked for and the operator has not
	// acted on it yet (spec.failover.failbackNow, or the annotation distri-infer.ndsl.cn/failback).
	FailbackRequested bool `json:"failbackRequested"`
}

// Placement is where a step, or the router, is pinned.
type Placement struct {
	// Location and FallbackLocations are the spec's.
	Location          string   `json:"location,omitempty"`
	FallbackLocations []string `json:"fallbackLocations,omitempty"`
	// Node is the node it is pinned to now, as the status reports it: Location, or the fallback
	// location it failed over to. NodeReady says whether that node is ready for it.
	Node      string `json:"node,omitempty"`
	NodeReady *bool  `json:"nodeReady,omitempty"`
	// OnFallback says that Node is one of FallbackLocations, not Location.
	OnFallback bool `json:"onFallback"`
	// FallbackSince is when it moved to Node, from the operator's latest FailedOver or
	// Relocated event about it; absent when the cluster no longer keeps that event (events
	// expire, after an hour by default) or it could not be read.
	FallbackSince *time.Time `json:"fallbackSince,omitempty"`
}

// Step is the state of one step.
type Step struct {
	// Name is the step's name (v1beta1 steps without one are named step-<n>).
	Name string `json:"name"`
	// Deployment names the step's Deployment, which is also its Service's name.
	Deployment string `json:"deployment,omitempty"`
	Placement
	// Replicas is the number of pods the step should have; ReadyReplicas the ready ones.
	Replicas      *int32 `json:"replicas,omitempty"`
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`
	// State, Reason and Message say whether the step serves (Pending, Loading, Ready, Failed,
	// Stopped) and why; v1 only (a v1beta1 status does not carry them).
	State   string `json:"state,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// DeploymentState and ServiceState are the states of the step's Deployment (Pending,
	// Progressing, Available, Failed) and Service (Pending, Ready).
	DeploymentState string `json:"deploymentState,omitempty"`
	ServiceState    string `json:"serviceState,omitempty"`
	// URL is the in-cluster URL of the step's Service.
	URL string `json:"url,omitempty"`
}

// Router is the state of the Pipeline's router (dataPath.mode Router in v1, router.enabled in
// v1beta1).
type Router struct {
	// State is the state of the router's Deployment (Pending, Progressing, Available, Failed);
	// empty before the operator reports it.
	State string `json:"state,omitempty"`
	Placement
}
