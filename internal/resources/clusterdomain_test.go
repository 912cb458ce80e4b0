package resources

import (
	"net/url"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestParseClusterDomain(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{in: "cluster.local", want: "cluster.local"},
		{in: "cluster.local.", want: "cluster.local"},
		{in: "k8s.corp.example", want: "k8s.corp.example"},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "cluster..local", wantErr: true},
		{in: "Cluster.Local", wantErr: true},
		{in: "cluster.local/x", wantErr: true},
	} {
		got, err := ParseClusterDomain(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseClusterDomain(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("ParseClusterDomain(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// Every URL the operator hands out names a Service by its absolute name in the cluster's domain:
// with the trailing dot, a resolver asks for that name alone, before and instead of any search
// domain (name.ns.svc would first be tried as name.ns.svc.svc.<domain>, a Service of a namespace
// named svc).
func TestStepURLsAreAbsoluteNamesInTheClusterDomain(t *testing.T) {
	for _, tc := range []struct {
		domain ClusterDomain
		want   string
	}{
		{"", "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80"},
		{DefaultClusterDomain, "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80"},
		{"k8s.corp.example", "http://facedetection-pipeline-step-2.vision.svc.k8s.corp.example.:80"},
	} {
		p := testenv.Sample(t, "vision")
		if got := StepURL(p, 1, tc.domain); got != tc.want {
			t.Errorf("domain %q: StepURL = %q, want %q", tc.domain, got, tc.want)
		}
		u, err := url.Parse(StepURL(p, 1, tc.domain))
		if err != nil || !strings.HasSuffix(u.Hostname(), ".") || u.Port() != "80" {
			t.Errorf("domain %q: %q parses to host %q port %q (%v), want an absolute name and port 80", tc.domain, tc.want, u.Hostname(), u.Port(), err)
		}

		d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", tc.domain))
		if got := testenv.EnvMap(d.Spec.Template.Spec.Containers[0].Env)[pipelinev1.EnvNextStepURL]; got != tc.want {
			t.Errorf("domain %q: %s = %q, want %q", tc.domain, pipelinev1.EnvNextStepURL, got, tc.want)
		}

		routed := testenv.RoutedSample(t)
		data, err := RouterConfigJSON(routed, tc.domain)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := routerconfig.ParseConfig([]byte(data))
		if err != nil {
			t.Fatalf("domain %q: the router refuses the configuration: %v\n%s", tc.domain, err, data)
		}
		if got, want := cfg.Steps[1].URL, tc.want+"/"; got != want {
			t.Errorf("domain %q: the router calls step 2 at %q, want %q", tc.domain, got, want)
		}
	}
}
