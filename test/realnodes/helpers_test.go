package realnodes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/test/netns"
)

// dnsServer is the cluster's DNS server (hack/localcluster).
const dnsServer = "172.30.0.53:53"

func mustDecodeFile(path string, into any) {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		panic(fmt.Sprintf("%s: %v", path, err))
	}
}

// namespace makes a namespace for one test, deleted when it ends.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// resolver asks the cluster's DNS server, inside the cluster's network namespace.
func resolver() *net.Resolver {
	dial := netns.Dialer(netnsPath)
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, dnsServer)
	}}
}

// clusterHTTP is an HTTP client inside the cluster's network namespace that finds hosts by
// the cluster's DNS, as a pod would.
func clusterHTTP() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: clusterDialer(), DisableKeepAlives: true}}
}

// clusterDialer dials inside the cluster's network namespace, finding hosts by the cluster's DNS.
func clusterDialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := netns.Dialer(netnsPath)
	r := resolver()
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if net.ParseIP(host) == nil {
			ips, err := r.LookupHost(ctx, host)
			if err != nil {
				return nil, err
			}
			host = ips[0]
		}
		return dial(ctx, network, net.JoinHostPort(host, port))
	}
}

// eventually polls f every half second until it returns nil, failing the test with f's last
// error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = f(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// errorsf is an error for eventually.
func errorsf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// joined lists values for a message.
func joined[T any](values []T, f func(T) string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = f(v)
	}
	return strings.Join(parts, ", ")
}

// documents decodes the YAML documents of a file.
func documents(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeDocuments(t, path, data)
}

// decodeDocuments decodes the YAML documents of data, read from source.
func decodeDocuments(t *testing.T, source string, data []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for part := range strings.SplitSeq(string(data), "\n---\n") {
		doc := map[string]any{}
		if err := yaml.Unmarshal([]byte(part), &doc); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if len(doc) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
