// Package kubeversion holds the oldest Kubernetes release the operator supports: every shipped
// manifest (config/default and its overlays, the OLM bundle) uses only APIs that release serves,
// and so does the manager at run time. README.md states it and the ClusterServiceVersion carries
// it as spec.minKubeVersion (hack/bundle.sh writes it into bundle/); the tests of this package
// hold all of them to it.
package kubeversion

// Minimum is the oldest Kubernetes release the operator runs on, as major.minor.patch (the form
// of a ClusterServiceVersion's spec.minKubeVersion). It is 1.30 because the admission policies
// of config/policy are ValidatingAdmissionPolicies of admissionregistration.k8s.io/v1, served
// since Kubernetes 1.30.
const Minimum = "1.30.0"
