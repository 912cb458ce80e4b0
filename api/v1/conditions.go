package v1

// Condition types of a Pipeline.
const (
	// ConditionAvailable is True when the storage is bound and every step is available.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the storage or a step is still being rolled out.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when something needs a person's attention; the reason says what.
	ConditionDegraded = "Degraded"
	// ConditionReconciled carries the outcome of the operator's last pass: False with the
	// error when it could not make the cluster match the spec.
	ConditionReconciled = "Reconciled"
	// ConditionReady is True when the Pipeline runs (phase Running): the condition generic
	// tools wait for (`kubectl wait --for=condition=Ready`).
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator rolls the spec out (phase Creating), the
	// kstatus convention for work in progress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the Pipeline cannot go on without a person (phase Failed),
	// the kstatus convention for a failure.
	ConditionStalled = "Stalled"
	// ConditionModelStorageAuthorized says, for modelStorageClass storage only, whether the
	// ModelStorageClass exists and selects the Pipeline's namespace. It turns False the moment
	// the class is deleted or stops selecting the namespace, with the reason of the Degraded
	// condition; its lastTransitionTime starts the grace after which the operator withdraws the
	// storage (stops the steps, deletes the model volume and claim).
	ConditionModelStorageAuthorized = "ModelStorageAuthorized"
)

// Reasons of the ModelStorageAuthorized condition; when False, it carries
// ReasonModelStorageClassNotFound or ReasonModelStorageClassNotPermitted.
const (
	// ReasonModelStorageClassSelects means the ModelStorageClass exists and selects the
	// Pipeline's namespace.
	ReasonModelStorageClassSelects = "ModelStorageClassSelects"
)

// Reasons of the Ready condition; when False, it carries the reason of the Degraded condition
// (Failed) or of the Available condition (still rolling out).
const (
	ReasonRunning = "Running"
)

// Reasons of the Available condition.
const (
	ReasonAllStepsAvailable = "AllStepsAvailable"
	ReasonStorageNotBound   = "StorageNotBound"
	ReasonStepsUnavailable  = "StepsUnavailable"
)

// Reasons of the Progressing condition.
const (
	ReasonRollingOut      = "RollingOut"
	ReasonRolloutComplete = "RolloutComplete"
	ReasonRolloutFailed   = "RolloutFailed"
	// ReasonFailingOver means a step is moving to a fallback node because its node is not ready.
	ReasonFailingOver = "FailingOver"
	// ReasonFailingBack means a step is moving back to a more preferred node that is ready again.
	ReasonFailingBack = "FailingBack"
	// ReasonStorageIdentityPending means the identity that names the Pipeline's model storage
	// is not recorded yet (see Pipeline.StorageIdentityPending): the operator changes nothing
	// until it is, so that the Pipeline keeps its claim.
	ReasonStorageIdentityPending = "StorageIdentityPending"
)

// Reasons of the Degraded condition.
const (
	ReasonAsExpected   = "AsExpected"
	ReasonStepFailed   = "StepFailed"
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonNodeNotReady means the node a step is pinned to is NotReady, Unknown, cordoned or
	// tainted against the step's pods.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonNodeAmbiguous means a location names no node but is the kubernetes.io/hostname
	// label of several nodes: the operator pins to none of them, since a node can give itself
	// any hostname label.
	ReasonNodeAmbiguous = "NodeAmbiguous"
	ReasonStorageFailed = "StorageFailed"
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonModelStorageClassNotFound means the ModelStorageClass that modelStorage
	// .modelStorageClass.name names does not exist: the operator creates no volume or claim for
	// the storage, and withdraws those it made once the revocation grace has passed.
	ReasonModelStorageClassNotFound = "ModelStorageClassNotFound"
	// ReasonModelStorageClassNotPermitted means the namespaceSelector of the ModelStorageClass
	// that modelStorage.modelStorageClass.name names does not select the Pipeline's namespace: the
	// operator creates no volume or claim for the storage, keeps those it made during the
	// revocation grace, and then withdraws them (the steps are stopped).
	ReasonModelStorageClassNotPermitted = "ModelStorageClassNotPermitted"
	ReasonNameConflict                  = "NameConflict"
	// ReasonRouterFailed means the router's Deployment exceeded its progress deadline or
	// cannot create pods.
	ReasonRouterFailed = "RouterFailed"
	// ReasonRouterImageUnknown means spec.dataPath.mode is Router but the operator knows no router
	// image (RELATED_IMAGE_ROUTER is not set): it creates none of the router's objects.
	ReasonRouterImageUnknown = "RouterImageUnknown"
	// ReasonRouterConfigInvalid means the router would refuse the configuration the spec gives
	// (a stopWhen that does not compile, stored without the validating webhook): the router is
	// left as it is.
	ReasonRouterConfigInvalid = "RouterConfigInvalid"
	// ReasonApplyRefused means the apiserver refuses to create or update a child for what it
	// is (an admission policy or webhook, a quota, RBAC, an invalid field), not for the moment
	// it was sent: the pass is retried with back-off, but a person must change the spec or the
	// cluster. It is also the Reconciled reason of such a pass.
	ReasonApplyRefused = "ApplyRefused"
)

// Reasons of the Reconciled condition.
const (
	ReasonReconcileSucceeded = "ReconcileSucceeded"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonDeleteFailed       = "DeleteFailed"
	ReasonReconcileFailed    = "ReconcileFailed"
	// ReasonPaused means the Pipeline is paused (spec.paused): its children are left as they are.
	ReasonPaused = "Paused"
)

// ConditionUpgradeable is the condition the operator sets on its OLM OperatorCondition: False
// while a Pipeline is rolling out, so that OLM does not replace the operator in the middle of it.
const ConditionUpgradeable = "Upgradeable"

// Reasons of the operator's Upgradeable OperatorCondition.
const (
	// ReasonPipelinesRollingOut means at least one Pipeline is rolling out: an upgrade of the
	// operator waits until it is done.
	ReasonPipelinesRollingOut = "PipelinesRollingOut"
	// ReasonNoRollouts means no Pipeline is rolling out: the operator may be upgraded.
	ReasonNoRollouts = "NoRollouts"
)

// Reasons of the events recorded when a step changes node.
const (
	// EventFailedOver is recorded when a step's Deployment was moved to a fallback node.
	EventFailedOver = "FailedOver"
	// EventFailedBack is recorded when a step's Deployment was moved back to a more preferred node.
	EventFailedBack = "FailedBack"
	// EventRelocated is recorded when a step's Deployment was moved off a node that its location
	// and fallbackLocations no longer name.
	EventRelocated = "Relocated"
)
