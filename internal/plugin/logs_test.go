package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// logServer plays, on loopback, the three endpoints of kube-apiserver the logs and trace
// commands read after the Pipeline: a Deployment, a list of pods by label selector and the log of
// a pod's container (what kube-apiserver fetches from the kubelet). It is not a cluster: it
// checks what the plugin asks for and answers as the apiserver's API says, so that the
// selection of pods, the prefixes, following, --tail and the request-id filter are tested; the
// real path through kube-apiserver and kwok's kubelet is test/e2e/plugin_test.go's.
type logServer struct {
	t          *testing.T
	deployment *appsv1.Deployment
	pods       []corev1.Pod
	// logs are the lines of each pod, with the kubelet's timestamp in front.
	logs map[string][]string

	mu       sync.Mutex
	requests []string // the log requests: pod?query
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	const ns = "/api/v1/namespaces/team-a/pods"
	switch {
	case r.URL.Path == "/apis/apps/v1/namespaces/team-a/deployments/"+s.deployment.Name:
		_ = json.NewEncoder(w).Encode(s.deployment)
	case r.URL.Path == ns:
		sel := r.URL.Query().Get("labelSelector")
		var items []corev1.Pod
		for _, p := range s.pods {
			if matches(p.Labels, sel) {
				items = append(items, p)
			}
		}
		_ = json.NewEncoder(w).Encode(&corev1.PodList{Items: items})
	case strings.HasPrefix(r.URL.Path, ns+"/") && strings.HasSuffix(r.URL.Path, "/log"):
		pod := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, ns+"/"), "/log")
		s.mu.Lock()
		s.requests = append(s.requests, pod+"?"+r.URL.RawQuery)
		s.mu.Unlock()
		q := r.URL.Query()
		lines := s.logs[pod]
		if tail := q.Get("tailLines"); tail != "" {
			var n int
			_, _ = fmt.Sscan(tail, &n)
			lines = lines[max(0, len(lines)-n):]
		}
		w.Header().Set("Content-Type", "text/plain")
		for _, l := range lines {
			if q.Get("timestamps") != "true" {
				_, l, _ = strings.Cut(l, " ")
			}
			_, _ = fmt.Fprintln(w, l)
			if q.Get("follow") == "true" {
				w.(http.Flusher).Flush()
			}
		}
	default:
		s.t.Errorf("unexpected request %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
}

// matches says whether labels match the selector sel of key=value pairs.
func matches(labels map[string]string, sel string) bool {
	for req := range strings.SplitSeq(sel, ",") {
		k, v, _ := strings.Cut(req, "=")
		if labels[k] != v {
			return false
		}
	}
	return true
}

func pod(name string, labels map[string]string, containers ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: labels}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

func newLogServer(t *testing.T) (*logServer, *Server) {
	stepLabels := map[string]string{"pipeline": "faces", "app.kubernetes.io/component": "detect"}
	routerLabels := map[string]string{"pipeline": "faces", "app.kubernetes.io/name": "pipeline-router", "app.kubernetes.io/component": "router"}
	ls := &logServer{
		t: t,
		deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "faces-detect"},
			Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: stepLabels}},
		},
		pods: []corev1.Pod{
			pod("faces-detect-b", stepLabels, "step"),
			pod("faces-detect-a", stepLabels, "step"),
			pod("faces-recognise-a", map[string]string{"pipeline": "faces", "app.kubernetes.io/component": "recognise"}, "step"),
			pod("faces-router-a", routerLabels, "router"),
			pod("faces-router-b", routerLabels, "router"),
		},
		logs: map[string][]string{
			"faces-detect-a": {"2026-11-20T10:00:00.1Z a1", "2026-11-20T10:00:00.2Z a2", "2026-11-20T10:00:00.3Z a3"},
			"faces-detect-b": {"2026-11-20T10:00:00.1Z b1", "2026-11-20T10:00:00.2Z b2"},
			"faces-router-a": {
				`2026-11-20T10:00:02.000000001Z time=2026-11-20T10:00:02Z level=WARN msg="pipeline request failed" pipeline=team-a/faces step=recognise stepIndex=2 reason=timeout status=504 requestID=req-42 error="timeout"`,
				`2026-11-20T10:00:03Z time=2026-11-20T10:00:03Z level=WARN msg="pipeline request failed" pipeline=team-a/faces step=detect stepIndex=1 reason=connection status=502 requestID=req-420 error="refused"`,
			},
			"faces-router-b": {
				`2026-11-20T10:00:01Z {"time":"2026-11-20T10:00:01Z","level":"WARN","msg":"pipeline request refused","requestID":"req-42","error":"read the request body: unexpected EOF"}`,
				`2026-11-20T10:00:04Z time=2026-11-20T10:00:04Z level=WARN msg="pipeline request failed" requestID=req-43`,
			},
		},
	}
	srv := httptest.NewServer(ls)
	t.Cleanup(srv.Close)
	core, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return ls, &Server{Core: core, Version: VersionV1}
}

func TestStepLogs(t *testing.T) {
	ls, s := newLogServer(t)
	ctx := context.Background()
	p := mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	step, err := FindStep(p, "detect")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := s.StepPods(ctx, p, step)
	if err != nil {
		t.Fatal(err)
	}
	if names := podNames(pods); names != "faces-detect-a, faces-detect-b" {
		t.Fatalf("the step's pods are %s, want those its Deployment selects, by name", names)
	}

	var out, errOut bytes.Buffer
	if err := s.StepLogs(ctx, &out, &errOut, pods, LogOptions{Tail: 2}); err != nil {
		t.Fatal(err)
	}
	if want := "[faces-detect-a] a2\n[faces-detect-a] a3\n[faces-detect-b] b1\n[faces-detect-b] b2\n"; out.String() != want {
		t.Errorf("logs of two pods:\n%s\nwant\n%s", out.String(), want)
	}
	if !slices.Equal(ls.requests, []string{"faces-detect-a?container=step&tailLines=2", "faces-detect-b?container=step&tailLines=2"}) {
		t.Errorf("log requests %q", ls.requests)
	}

	// One pod: no prefix.
	out.Reset()
	if err := s.StepLogs(ctx, &out, &errOut, pods[:1], LogOptions{Tail: -1}); err != nil {
		t.Fatal(err)
	}
	if want := "a1\na2\na3\n"; out.String() != want {
		t.Errorf("logs of one pod:\n%s\nwant\n%s", out.String(), want)
	}

	// Following streams both pods together, each line whole and prefixed.
	out.Reset()
	ls.requests = nil
	if err := s.StepLogs(ctx, &out, &errOut, pods, LogOptions{Follow: true, Tail: -1}); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(got)
	if want := []string{"[faces-detect-a] a1", "[faces-detect-a] a2", "[faces-detect-a] a3", "[faces-detect-b] b1", "[faces-detect-b] b2"}; !slices.Equal(got, want) {
		t.Errorf("followed logs %q, want %q", got, want)
	}
	slices.Sort(ls.requests)
	if !slices.Equal(ls.requests, []string{"faces-detect-a?container=step&follow=true", "faces-detect-b?container=step&follow=true"}) {
		t.Errorf("log requests %q", ls.requests)
	}
	if errOut.Len() != 0 {
		t.Errorf("errors: %s", errOut.String())
	}

	if _, err := FindStep(p, "2"); err != nil {
		t.Errorf("step by position: %v", err)
	}
	if _, err := FindStep(p, "nope"); err == nil || !strings.Contains(err.Error(), "its steps are detect, recognise") {
		t.Errorf("unknown step: %v", err)
	}
}

func TestTrace(t *testing.T) {
	_, s := newLogServer(t)
	ctx := context.Background()
	p := mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	pods, err := s.RouterPods(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if names := podNames(pods); names != "faces-router-a, faces-router-b" {
		t.Fatalf("router pods %s", names)
	}
	var errOut bytes.Buffer
	lines, err := s.Trace(ctx, &errOut, pods, "req-42")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteTrace(&out, lines); err != nil {
		t.Fatal(err)
	}
	// The line of pod b comes first (earlier), the JSON one included; req-420 is another request.
	want := `2026-11-20T10:00:01Z faces-router-b {"time":"2026-11-20T10:00:01Z","level":"WARN","msg":"pipeline request refused","requestID":"req-42","error":"read the request body: unexpected EOF"}
2026-11-20T10:00:02.000000001Z faces-router-a time=2026-11-20T10:00:02Z level=WARN msg="pipeline request failed" pipeline=team-a/faces step=recognise stepIndex=2 reason=timeout status=504 requestID=req-42 error="timeout"
`
	if out.String() != want {
		t.Errorf("trace:\n%s\nwant\n%s", out.String(), want)
	}

	lines, err = s.Trace(ctx, &errOut, pods, "req-7")
	if err != nil || len(lines) != 0 {
		t.Fatalf("trace of an unknown id: %v, %v", lines, err)
	}
	out.Reset()
	if err := WriteNothingFound(&out, pods, "req-7"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nothing found", "faces-router-a, faces-router-b", "requestID=req-7", "only failed requests"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("nothing-found message lacks %q:\n%s", want, out.String())
		}
	}
}

func TestNamesRequest(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`level=WARN msg="pipeline request failed" requestID=req-42 error="x"`, true},
		{`level=WARN requestID=req-42`, true},
		{`level=WARN requestID=req-420`, false},
		{`level=WARN xrequestID=req-42`, false},
		{`level=WARN requestID="req-42"`, true},
		{`{"level":"WARN","requestID":"req-42","error":"x"}`, true},
		{`{"requestID":"req-42"}`, true},
		{`{"requestID":"req-421"}`, false},
		{`msg="requestID=req-42 in a message"`, false},
		{`level=INFO msg="router ready"`, false},
	} {
		if got := NamesRequest(tc.line, "req-42"); got != tc.want {
			t.Errorf("NamesRequest(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
	if NamesRequest("requestID=", "") {
		t.Error("an empty id matched")
	}
}

func TestSortTrace(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	lines := []TraceLine{{at(3), "a", "3"}, {at(1), "b", "1"}, {at(3), "b", "3b"}, {at(2), "a", "2"}}
	SortTrace(lines)
	var got []string
	for _, l := range lines {
		got = append(got, l.Line)
	}
	if want := []string{"1", "2", "3", "3b"}; !slices.Equal(got, want) {
		t.Errorf("sorted %q, want %q", got, want)
	}
	if ts, rest := splitTimestamp("not-a-time line"); !ts.IsZero() || rest != "not-a-time line" {
		t.Errorf("splitTimestamp of a line without a timestamp: %v %q", ts, rest)
	}
}
