package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStringAndBuildInfo(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "1.2.3"
	if got := String("manager"); !strings.HasPrefix(got, "manager 1.2.3 (") || !strings.Contains(got, runtime.Version()) {
		t.Errorf("String = %q", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(BuildInfo("pipeline_router"))
	want := `# HELP pipeline_router_build_info Always 1: the release (version) and Go release (goversion) the binary was built with.
# TYPE pipeline_router_build_info gauge
pipeline_router_build_info{goversion="` + runtime.Version() + `",version="1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
