package localpod

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookCertMountPath is where OLM and cert-manager mount the webhook serving certificate into
// the operator's pod, the manager's default --webhook-cert-dir.
const webhookCertMountPath = "/tmp/k8s-webhook-server/serving-certs"

// OperatorPod plays, on this machine, the pod of the operator's Deployment (made by OLM, or
// applied from the release manifest): kwok marks the Deployment's pod ready in the cluster, and
// this runs the manager binary as that pod would — the Deployment's arguments and environment
// (POD_NAMESPACE from the downward API, OLM's OPERATOR_CONDITION_NAME), a token of its
// ServiceAccount, the Secrets it mounts, an empty directory for each emptyDir (TMPDIR for the one
// at /tmp) — and serves its webhook port on loopback. Without a certificate mounted the manager
// makes its own, as in its pod. When the pod template changes (an upgrade, a new certificate) it
// starts the new manager and stops the old one once the new one serves its webhook port, as a
// rolling update of the Deployment's two replicas keeps one serving; when the Deployment goes, it
// stops it.
type OperatorPod struct {
	// Admin reads the Deployment and its Secrets; Clientset asks for the ServiceAccount's tokens.
	Admin     client.Client
	Clientset kubernetes.Interface
	// Front is the apiserver front the manager talks to the apiserver through.
	Front *APIFront
	// Manager is the manager binary the pod runs; Managers, by the image of the pod's
	// container, the binaries of other releases.
	Manager  string
	Managers map[string]string
	// Namespace and Name are the Deployment's.
	Namespace string
	Name      string
	// Dir holds the files of each start (kubeconfig, volumes); LogDir the manager's logs,
	// pipeline-operator-<n>.log for the n-th start.
	Dir    string
	LogDir string

	mu       sync.Mutex
	proc     *Process
	template *corev1.PodTemplateSpec
	hash     string
	ports    map[int32]int // container port → loopback port
	starts   int
	lastEnv  map[string]string
	cancel   context.CancelFunc
	finished chan struct{}
}

// Run follows the Deployment until stop.
func (o *OperatorPod) Run() {
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel, o.finished = cancel, make(chan struct{})
	go func() {
		defer close(o.finished)
		for ctx.Err() == nil {
			if err := o.sync(ctx); err != nil && ctx.Err() == nil {
				ginkgo.GinkgoWriter.Printf("operator pod: %v\n", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		o.stopManager()
	}()
}

// Stop stops following the Deployment, and the manager.
func (o *OperatorPod) Stop() {
	if o.cancel != nil {
		o.cancel()
		<-o.finished
	}
}

func (o *OperatorPod) sync(ctx context.Context) error {
	d := &appsv1.Deployment{}
	err := o.Admin.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, d)
	if apierrors.IsNotFound(err) || (err == nil && !d.DeletionTimestamp.IsZero()) {
		o.stopManager()
		return nil
	}
	if err != nil {
		return err
	}
	data, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	o.mu.Lock()
	same := hash == o.hash
	o.mu.Unlock()
	if same {
		return nil
	}
	next, err := o.startManager(ctx, d.Spec.Template.DeepCopy())
	if err != nil {
		o.stopManager()
		return err
	}
	// Until the new manager serves, the old one does (a manager that never serves is swapped in
	// after a while all the same, for the test to see it fail).
	for wait := time.Now().Add(2 * time.Minute); !serving(next.ports[9443]) && time.Now().Before(wait) && ctx.Err() == nil; {
		time.Sleep(100 * time.Millisecond)
	}
	o.mu.Lock()
	old := o.proc
	o.proc, o.hash, o.template, o.ports, o.lastEnv = next.proc, hash, next.template, next.ports, next.env
	o.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	return nil
}

// managerRun is one start of the manager: its process and what it was started with.
type managerRun struct {
	proc     *Process
	template *corev1.PodTemplateSpec
	ports    map[int32]int
	env      map[string]string
}

// Container is the manager's container of the pod template it last started, or nil when it
// does not run.
func (o *OperatorPod) Container() *corev1.Container {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.proc == nil || !o.proc.Running() || o.template == nil {
		return nil
	}
	return o.template.Spec.Containers[0].DeepCopy()
}

func (o *OperatorPod) stopManager() {
	o.mu.Lock()
	p := o.proc
	o.proc, o.hash, o.template, o.ports = nil, "", nil, nil
	o.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

func (o *OperatorPod) startManager(ctx context.Context, tmpl *corev1.PodTemplateSpec) (*managerRun, error) {
	if len(tmpl.Spec.Containers) != 1 {
		return nil, fmt.Errorf("the operator's pod has %d containers, want 1", len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	o.mu.Lock()
	o.starts++
	dir := filepath.Join(o.Dir, "pod-"+strconv.Itoa(o.starts))
	o.mu.Unlock()

	kubeconfig, err := o.writeKubeconfig(ctx, dir, tmpl.Spec.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	mounts, err := o.writeVolumes(ctx, dir, tmpl, c)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	vars := []string{"KUBECONFIG=" + kubeconfig}
	if tmp, ok := mounts["/tmp"]; ok {
		vars = append(vars, "TMPDIR="+tmp)
	}
	for _, e := range c.Env {
		value, err := downwardValue(e, c, o.Namespace)
		if err != nil {
			return nil, err
		}
		env[e.Name] = value
		vars = append(vars, e.Name+"="+value)
	}

	ports := map[int32]int{}
	for _, p := range c.Ports {
		ports[p.ContainerPort] = FreePort()
	}
	webhookPort, ok := ports[9443]
	if !ok {
		return nil, fmt.Errorf("the operator's container has no port 9443 (webhook-server): %v", c.Ports)
	}
	// The mounted certificate's local copy or, with none mounted, a directory without one: the
	// manager then makes its own.
	certDir, ok := mounts[webhookCertMountPath]
	if !ok {
		certDir = filepath.Join(dir, "no-mounted-certificate")
	}
	// The Deployment's arguments, then what differs out of the pod: loopback addresses, the
	// certificate's directory, and the Lease's namespace (in a pod, its own).
	args := append([]string{}, c.Args...)
	args = append(args,
		"--leader-election-namespace="+o.Namespace,
		"--health-probe-bind-address=127.0.0.1:0",
		"--metrics-bind-address=0",
		"--webhook-port="+strconv.Itoa(webhookPort),
		"--webhook-cert-dir="+certDir,
	)
	bin := o.Manager
	if other, ok := o.Managers[c.Image]; ok {
		bin = other
	}
	p := &Process{
		Name:    "pipeline-operator",
		Path:    bin,
		Args:    args,
		Env:     Environ(vars...),
		LogFile: filepath.Join(o.LogDir, fmt.Sprintf("pipeline-operator-%d.log", o.starts)),
	}
	ginkgo.GinkgoWriter.Printf("operator pod %s/%s: starting the manager %s (%s), log %s\n",
		o.Namespace, o.Name, bin, envSummary(env), p.LogFile)
	p.Start()
	return &managerRun{proc: p, template: tmpl, ports: ports, env: env}, nil
}

// writeKubeconfig writes a kubeconfig with a token of the ServiceAccount, through the apiserver front.
func (o *OperatorPod) writeKubeconfig(ctx context.Context, dir, serviceAccount string) (string, error) {
	tr, err := o.Clientset.CoreV1().ServiceAccounts(o.Namespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s: %w", serviceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["olm"] = &clientcmdapi.Cluster{Server: o.Front.URL(), CertificateAuthorityData: o.Front.caPEM}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["olm"] = &clientcmdapi.Context{Cluster: "olm", AuthInfo: "operator", Namespace: o.Namespace}
	cfg.CurrentContext = "olm"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "kubeconfig")
	return file, clientcmd.WriteToFile(*cfg, file)
}

// writeVolumes writes the Secrets the container mounts into dir, makes an empty directory for
// each emptyDir it mounts, and returns the local directory of each mount path.
func (o *OperatorPod) writeVolumes(ctx context.Context, dir string, tmpl *corev1.PodTemplateSpec, c corev1.Container) (map[string]string, error) {
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		var source *corev1.SecretVolumeSource
		empty := false
		for _, v := range tmpl.Spec.Volumes {
			if v.Name == m.Name {
				source, empty = v.Secret, v.EmptyDir != nil
			}
		}
		if empty {
			local := filepath.Join(dir, "volumes", m.Name)
			if err := os.MkdirAll(local, 0o700); err != nil {
				return nil, err
			}
			mounts[m.MountPath] = local
			continue
		}
		if source == nil {
			continue
		}
		secret := &corev1.Secret{}
		if err := o.Admin.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: source.SecretName}, secret); err != nil {
			return nil, fmt.Errorf("secret %s of volume %s: %w", source.SecretName, m.Name, err)
		}
		local := filepath.Join(dir, "volumes", m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		items := source.Items
		if len(items) == 0 {
			for k := range secret.Data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			if err := os.WriteFile(filepath.Join(local, it.Path), secret.Data[it.Key], 0o600); err != nil {
				return nil, err
			}
		}
		mounts[m.MountPath] = local
	}
	return mounts, nil
}

// serves returns the loopback address of the container port svc's port leads to, when svc
// selects this pod.
func (o *OperatorPod) serves(svc *corev1.Service, port int32) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.template == nil || svc.Namespace != o.Namespace || len(svc.Spec.Selector) == 0 ||
		!labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(o.template.Labels)) {
		return "", false
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port != port {
			continue
		}
		target := sp.TargetPort
		for _, cp := range o.template.Spec.Containers[0].Ports {
			if (target.Type == intstr.Int && cp.ContainerPort == target.IntVal) ||
				(target.Type == intstr.String && cp.Name == target.StrVal) {
				if local, ok := o.ports[cp.ContainerPort]; ok {
					return net.JoinHostPort("127.0.0.1", strconv.Itoa(local)), true
				}
			}
		}
	}
	return "", false
}

// Env is the manager's environment as last started, or nil when it does not run.
func (o *OperatorPod) Env() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.proc == nil || !o.proc.Running() {
		return nil
	}
	return o.lastEnv
}

// WebhookReady reports whether the manager's webhook server accepts connections.
func (o *OperatorPod) WebhookReady() bool {
	o.mu.Lock()
	port, ok := o.ports[9443]
	o.mu.Unlock()
	return ok && serving(port)
}

// serving reports whether a process accepts connections on the loopback port.
func serving(port int) bool {
	if port == 0 {
		return false
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// downwardValue is the value the kubelet would give the environment variable e of container c
// in namespace ns: its value, the pod's namespace, or a resource of the container (in the
// divisor's units, bytes and cores by default, rounded up, as the kubelet does).
func downwardValue(e corev1.EnvVar, c corev1.Container, ns string) (string, error) {
	switch from := e.ValueFrom; {
	case from == nil:
		return e.Value, nil
	case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.namespace":
		return ns, nil
	case from.ResourceFieldRef != nil:
		ref := from.ResourceFieldRef
		if ref.ContainerName != "" && ref.ContainerName != c.Name {
			return "", fmt.Errorf("env %s: resource of another container %q", e.Name, ref.ContainerName)
		}
		var q resource.Quantity
		switch ref.Resource {
		case "limits.memory":
			q = c.Resources.Limits[corev1.ResourceMemory]
		case "limits.cpu":
			q = c.Resources.Limits[corev1.ResourceCPU]
		case "requests.memory":
			q = c.Resources.Requests[corev1.ResourceMemory]
		case "requests.cpu":
			q = c.Resources.Requests[corev1.ResourceCPU]
		default:
			return "", fmt.Errorf("env %s: resource %s is not supported here", e.Name, ref.Resource)
		}
		divisor := ref.Divisor
		if divisor.IsZero() {
			divisor = resource.MustParse("1")
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	default:
		return "", fmt.Errorf("env %s: only values, metadata.namespace and container resources are supported here", e.Name)
	}
}

// envSummary names the variables that tell one start of the manager from another: OLM's
// OperatorCondition and the manager's namespace.
func envSummary(env map[string]string) string {
	var parts []string
	for _, k := range []string{"OPERATOR_CONDITION_NAME", "POD_NAMESPACE"} {
		if v, ok := env[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}
