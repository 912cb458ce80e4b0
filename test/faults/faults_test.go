// Package faults breaks things around the operator while it works, against a real
// kube-apiserver and etcd (envtest), and checks that it comes back to the truth: kube-apiserver
// and etcd restarted in a burst, the manager killed, errors injected into its writes, children
// deleted and edited by others, Pipelines deleted while they are being created, the leader
// killed. Every case checks that nothing is lost, left behind or duplicated, with generous
// deadlines, and measures how long the operator takes to converge; the figures are printed and
// written to $FAULTS_OUTPUT (make test-faults FAULTS_OUTPUT=docs/reliability.md).
package faults

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

var scheme = testenv.Scheme()

// run is the testing.T of a case, which also keeps the case's figures and its failures for
// the report.
type run struct {
	*testing.T
	res *result
}

// Fatalf records the failure for the report and ends the case.
func (r *run) Fatalf(format string, args ...any) {
	r.Helper()
	r.res.failures = append(r.res.failures, fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}

// Errorf records the failure for the report and fails the case.
func (r *run) Errorf(format string, args ...any) {
	r.Helper()
	r.res.failures = append(r.res.failures, fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

// figure adds a line to the case's figures and prints it.
func (r *run) figure(format string, args ...any) {
	r.Helper()
	line := fmt.Sprintf(format, args...)
	r.res.details = append(r.res.details, line)
	r.Log(line)
}

// faultCase is one case of the suite.
type faultCase struct {
	name  string // of the subtest
	title string // in the report
	run   func(*run)
}

var cases = []faultCase{
	{"apiserver-restart", "kube-apiserver stopped in a burst", apiserverRestart},
	{"manager-killed", "manager killed (SIGKILL) in a burst", managerKilled},
	{"write-errors", "conflicts and server errors on the operator's writes", writeErrors},
	{"drift", "children deleted, edited and relabelled by someone else", drift},
	{"delete-while-creating", "Pipelines deleted while being created", deleteWhileCreating},
	{"leader-failover", "the leader killed, a standby takes over", leaderFailover},
	{"etcd-restart", "etcd stopped in a burst", etcdRestart},
}

func TestFaults(t *testing.T) {
	testenv.RequireAssets(t)
	ctrl.SetLogger(logr.Discard())
	managerBinary.dir = t.TempDir()
	rep := &report{started: time.Now(), load: loadAverage()}
	for _, c := range cases {
		res := &result{title: c.title, lost: -1}
		start := time.Now()
		ran := false
		ok := t.Run(c.name, func(t *testing.T) {
			ran = true
			c.run(&run{T: t, res: res})
		})
		if !ran {
			continue // not selected by -run
		}
		res.duration = time.Since(start)
		res.passed = ok && len(res.failures) == 0
		rep.results = append(rep.results, res)
	}
	rep.ended, rep.endLoad = time.Now(), loadAverage()
	text := rep.markdown()
	t.Log("\n" + text)
	if out := os.Getenv("FAULTS_OUTPUT"); out != "" {
		if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
