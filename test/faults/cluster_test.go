package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// auditPolicy records every request that changes something (who, what, when), and no read.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: Metadata
`

// stopGrace is how long kube-apiserver and etcd may take to stop before they are killed.
const stopGrace = 5 * time.Second

// controlPlane is the kube-apiserver and etcd of one case. Their certificates and data live in
// directories of the case's own, so that either process can be stopped and started again on
// the same state with the same credentials; the apiserver keeps an audit log of every write,
// which tells the writers apart by user.
type controlPlane struct {
	env   *envtest.Environment
	admin client.Client // non-cached: checks see the apiserver, not a cache
	audit string
	dir   string
}

// startControlPlane starts a kube-apiserver and etcd with the Pipeline CRD installed, room for
// thousands of Services, and namespace ns created.
func startControlPlane(r *run, ns string) *controlPlane {
	r.Helper()
	cp := &controlPlane{dir: r.TempDir()}
	certs, data := filepath.Join(cp.dir, "certs"), filepath.Join(cp.dir, "etcd")
	for _, d := range []string{certs, data} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			r.Fatalf("create %s: %v", d, err)
		}
	}
	policy := filepath.Join(cp.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		r.Fatalf("write the audit policy: %v", err)
	}
	cp.audit = filepath.Join(cp.dir, "audit.log")

	cp.env = testenv.New()
	cp.env.ControlPlaneStartTimeout = time.Minute
	cp.env.ControlPlaneStopTimeout = stopGrace
	api := cp.env.ControlPlane.GetAPIServer()
	api.CertDir = certs
	api.Configure().
		Set("service-cluster-ip-range", "10.0.0.0/16").
		Set("audit-log-path", cp.audit).
		Set("audit-policy-file", policy)
	cp.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: data}
	for name, out := range map[string]*io.Writer{"kube-apiserver": &api.Out, "etcd": &cp.env.ControlPlane.Etcd.Out} {
		f, err := os.Create(filepath.Join(cp.dir, name+".log"))
		if err != nil {
			r.Fatalf("create the log of %s: %v", name, err)
		}
		r.Cleanup(func() { _ = f.Close() })
		*out = f
	}
	api.Err, cp.env.ControlPlane.Etcd.Err = api.Out, cp.env.ControlPlane.Etcd.Out
	cfg, err := cp.env.Start()
	if err != nil {
		r.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	r.Cleanup(func() { _ = cp.env.Stop() })
	// The managers under test run with --conversion-crd= (they serve no webhook): this process
	// serves the conversion, across restarts of the apiserver, to whoever reads a Pipeline as
	// v1beta1. The cases write and read v1, the version the apiserver stores.
	if err := testenv.ServeConversion(r.Context(), cp.env); err != nil {
		r.Fatalf("serve the conversion webhook: %v", err)
	}
	if cp.admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		r.Fatalf("create the admin client: %v", err)
	}
	if err := cp.admin.Create(r.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		r.Fatalf("create namespace %s: %v", ns, err)
	}
	return cp
}

// user is the connection of a cluster administrator of that name: the audit log names the
// user of every write.
func (cp *controlPlane) user(name string) (*envtest.AuthenticatedUser, error) {
	return cp.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
}

// config is the REST config of user name, without client-side rate limits (as the manager's).
func (cp *controlPlane) config(r *run, name string) *rest.Config {
	r.Helper()
	u, err := cp.user(name)
	if err != nil {
		r.Fatalf("add user %s: %v", name, err)
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// kubeconfig writes a kubeconfig of user name and returns its path.
func (cp *controlPlane) kubeconfig(name string) (string, error) {
	u, err := cp.user(name)
	if err != nil {
		return "", err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// stopAPIServer stops kube-apiserver; etcd and its data stay. kube-apiserver stops listening at
// once on SIGTERM, but may drain its connections for longer than the case's outage: after
// stopGrace it is killed. It returns how it ended.
func (cp *controlPlane) stopAPIServer(r *run) string {
	r.Helper()
	err := cp.env.ControlPlane.APIServer.Stop()
	switch {
	case err == nil:
		return "exited on SIGTERM"
	case strings.Contains(err.Error(), "timeout waiting for process"):
		return fmt.Sprintf("SIGTERM, killed after %s of draining", stopGrace)
	}
	r.Fatalf("stop kube-apiserver: %v", err)
	return ""
}

// startAPIServer starts kube-apiserver again, on the same port, certificates and etcd, and
// returns once it is healthy.
func (cp *controlPlane) startAPIServer(r *run) {
	r.Helper()
	if err := cp.env.ControlPlane.APIServer.Start(); err != nil {
		r.Fatalf("start kube-apiserver again: %v", err)
	}
}

// stopEtcd stops etcd, killed when it takes longer than stopGrace; kube-apiserver keeps
// running without its storage. It returns how etcd ended.
func (cp *controlPlane) stopEtcd(r *run) string {
	r.Helper()
	err := cp.env.ControlPlane.Etcd.Stop()
	switch {
	case err == nil:
		return "exited on SIGTERM"
	case strings.Contains(err.Error(), "timeout waiting for process"):
		return fmt.Sprintf("SIGTERM, killed after %s", stopGrace)
	}
	r.Fatalf("stop etcd: %v", err)
	return ""
}

// startEtcd starts etcd again on the same data directory and client address.
func (cp *controlPlane) startEtcd(r *run) {
	r.Helper()
	if err := cp.env.ControlPlane.Etcd.Start(); err != nil {
		r.Fatalf("start etcd again: %v", err)
	}
}

// write is one completed write request from the audit log.
type write struct {
	user     string
	verb     string
	resource string // with its subresource: pipelines/status
	name     string
	code     int32
	sent     time.Time // received by the apiserver
	at       time.Time // completed
}

// writes reads the completed write requests of the audit log, in the order they completed.
func (cp *controlPlane) writes(r *run) []write {
	r.Helper()
	f, err := os.Open(cp.audit)
	if err != nil {
		r.Fatalf("open the audit log: %v", err)
	}
	defer func() { _ = f.Close() }()
	var out []write
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			r.Fatalf("audit log: %v", err)
		}
		if e.Stage != auditv1.StageResponseComplete || e.ObjectRef == nil {
			continue
		}
		w := write{user: e.User.Username, verb: e.Verb, resource: e.ObjectRef.Resource, name: e.ObjectRef.Name,
			sent: e.RequestReceivedTimestamp.Time, at: e.StageTimestamp.Time}
		if e.ObjectRef.Subresource != "" {
			w.resource += "/" + e.ObjectRef.Subresource
		}
		if e.ResponseStatus != nil {
			w.code = e.ResponseStatus.Code
		}
		out = append(out, w)
	}
	if err := s.Err(); err != nil {
		r.Fatalf("read the audit log: %v", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// by reports whether w was written by one of users, or by one of their processes (user.1,
// user.2, … for the processes of a supervised manager).
func (w write) by(users ...string) bool {
	for _, u := range users {
		if w.user == u || strings.HasPrefix(w.user, u+".") {
			return true
		}
	}
	return false
}

// operatorWrites are the writes of the given users other than events and leader election: the
// writes to Pipelines and their children.
func operatorWrites(all []write, users ...string) []write {
	var out []write
	for _, w := range all {
		if w.by(users...) && w.resource != "events" && w.resource != "leases" {
			out = append(out, w)
		}
	}
	return out
}

// countEvents counts the events the given users recorded.
func countEvents(all []write, users ...string) int {
	n := 0
	for _, w := range all {
		if w.by(users...) && w.resource == "events" {
			n++
		}
	}
	return n
}

// describeWrites summarises writes: how many, how many the apiserver refused, and by verb and
// resource.
func describeWrites(ws []write) string {
	by := map[string]int{}
	refused := 0
	for _, w := range ws {
		by[w.verb+" "+w.resource]++
		if w.code >= 400 {
			refused++
		}
	}
	return fmt.Sprintf("%d, of which %d refused (%s)", len(ws), refused, describeCounts(by, "%s %d"))
}

// describeCounts lists counts by key, sorted by key, each formatted with format (key, count).
func describeCounts(counts map[string]int, format string) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf(format, k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
