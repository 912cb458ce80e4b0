// Package localpod plays, on this machine, the pods of a local control plane whose nodes kwok
// simulates, for the end-to-end tests that install the operator as a cluster would run it (the
// release manifest in test/install, OLM in test/olm): kwok marks the pods ready, and this
// package runs what they would run — the manager binary as the operator's Deployment describes
// it (OperatorPod), any other program (Process) — on loopback. kube-apiserver reaches their
// Services through EgressProxy, and the manager reaches the apiserver through APIFront, which
// records its requests. Nothing here dials a Service, Pod or node address.
package localpod

import (
	"os"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// MustEnv is the environment variable name, which make sets for these tests (make test-olm):
// the test fails when it is empty.
func MustEnv(name string) string {
	ginkgo.GinkgoHelper()
	v := os.Getenv(name)
	gomega.Expect(v).NotTo(gomega.BeEmpty(), "%s is not set (make test-olm sets it)", name)
	return v
}
