package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The configuration as docs/router.md shows it: its names are an interface.
const documentedConfig = `{
  "pipeline": "namespace/name",
  "steps": [
    {"name": "step-1", "url": "http://facedetection-pipeline-step-1.default.svc.cluster.local.:9080/infer",
     "timeoutSeconds": 5, "retries": 2, "stopWhen": "size(response.faces) == 0"},
    {"name": "step-2", "url": "http://facedetection-pipeline-step-2.default.svc.cluster.local.:80/",
     "timeoutSeconds": 10, "retries": 0}
  ],
  "propagateHeaders": ["X-User"],
  "maxBodyBytes": 67108864
}`

func TestParseConfigReadsTheDocumentedConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(documentedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pipeline != "namespace/name" || len(cfg.Steps) != 2 || cfg.PropagateHeaders[0] != "X-User" ||
		cfg.MaxBodyBytes != 64<<20 {
		t.Fatalf("config read as %+v", cfg)
	}
	s := cfg.Steps[0]
	if s.Name != "step-1" || s.Timeout() != 5*time.Second || s.Retries != 2 || s.StopWhen != "size(response.faces) == 0" ||
		s.URL != "http://facedetection-pipeline-step-1.default.svc.cluster.local.:9080/infer" {
		t.Fatalf("step 1 read as %+v", s)
	}
	if cfg.Steps[1].Timeout() != 10*time.Second || cfg.Steps[1].StopWhen != "" {
		t.Fatalf("step 2 read as %+v", cfg.Steps[1])
	}
}

// TestDocsShowTheDocumentedConfig keeps docs/router.md's example and this test's in step.
func TestDocsShowTheDocumentedConfig(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/router.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Configuration\n\n```json\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/router.md has no JSON example under ## Configuration")
	}
	fromDoc, err := ParseConfig(m[1])
	if err != nil {
		t.Fatalf("the example of docs/router.md: %v", err)
	}
	want, _ := ParseConfig([]byte(documentedConfig))
	if !reflect.DeepEqual(fromDoc, want) {
		t.Fatalf("docs/router.md shows %+v, the test %+v", fromDoc, want)
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"steps": [{"name": "a", "url": "http://127.0.0.1:1/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.BodyLimit(); got != 64<<20 {
		t.Errorf("maxBodyBytes default %d, want 64 MiB", got)
	}
	if got := cfg.BufferLimit(); got != 4*64<<20 {
		t.Errorf("maxBufferedBytes default %d, want 4 × maxBodyBytes", got)
	}
	if got := cfg.TensorLimit(); got != 1024 {
		t.Errorf("maxTensors default %d, want 1024", got)
	}
	if got := cfg.RankLimit(); got != 32 {
		t.Errorf("maxTensorRank default %d, want 32", got)
	}
	if got := (Config{MaxTensors: 8, MaxTensorRank: 4}); got.TensorLimit() != 8 || got.RankLimit() != 4 {
		t.Errorf("maxTensors 8 and maxTensorRank 4 are %d and %d", got.TensorLimit(), got.RankLimit())
	}
	if got := cfg.Steps[0].Timeout(); got != DefaultTimeoutSeconds*time.Second {
		t.Errorf("timeoutSeconds default %s", got)
	}
	if got := (Step{TimeoutSeconds: 0.25}).Timeout(); got != 250*time.Millisecond {
		t.Errorf("timeoutSeconds 0.25 is %s", got)
	}
	if !cfg.Steps[0].IsIdempotent() {
		t.Error("a step without idempotent is not idempotent")
	}
	no := false
	if (Step{Idempotent: &no}).IsIdempotent() {
		t.Error("idempotent: false is idempotent")
	}
	two := Config{Steps: []Step{{TimeoutSeconds: 5, Retries: 2}, {}}}
	if got, want := two.RequestTimeout(), 3*5*time.Second+2*1500*time.Millisecond+30*time.Second; got != want {
		t.Errorf("requestTimeoutSeconds default %s, want %s", got, want)
	}
	two.RequestTimeoutSeconds = 7.5
	if got := two.RequestTimeout(); got != 7500*time.Millisecond {
		t.Errorf("requestTimeoutSeconds 7.5 is %s", got)
	}
}

func TestParseConfigRefusesWhatCannotWork(t *testing.T) {
	for name, tc := range map[string]struct{ json, want string }{
		"unknown field": {`{"steps": [{"name": "a", "url": "http://h/", "timeout": 3}]}`, `unknown field "timeout"`},
		"no steps":      {`{"steps": []}`, "at least one step"},
		"no name":       {`{"steps": [{"url": "http://h/"}]}`, "steps[0]: name: required"},
		"duplicate name": {`{"steps": [{"name": "a", "url": "http://h/"}, {"name": "a", "url": "http://h/"}]}`,
			`steps[1].name: "a" is used by an earlier step`},
		"relative url": {`{"steps": [{"name": "a", "url": "/infer"}]}`, "the scheme must be http or https"},
		"no host":      {`{"steps": [{"name": "a", "url": "http:///infer"}]}`, "a host is required"},
		"credentials in url": {`{"steps": [{"name": "a", "url": "http://user:s3cret@h/infer"}]}`,
			`http://h: credentials (user:password@) are not allowed in a step URL`},
		"credentials in metadataURL": {`{"steps": [{"name": "a", "url": "http://h/v2/models/m/infer", "protocol": "OpenInferenceProtocol", "metadataURL": "https://token@h/v2/models/m"}]}`,
			"metadataURL: https://h: credentials"},
		"negative timeout": {`{"steps": [{"name": "a", "url": "http://h/", "timeoutSeconds": -1}]}`, "timeoutSeconds"},
		"too many retries": {`{"steps": [{"name": "a", "url": "http://h/", "retries": 11}]}`, "retries: must be between 0 and 10"},
		"bad stopWhen": {`{"steps": [{"name": "a", "url": "http://h/", "stopWhen": "size(response.faces) =="}]}`,
			"steps[0]: stopWhen: ERROR: <input>:1:"},
		"stopWhen not a bool": {`{"steps": [{"name": "a", "url": "http://h/", "stopWhen": "status + 1"}]}`,
			"must be a bool, it is int"},
		"bad header":      {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["X User"]}`, "is not a header name"},
		"reserved header": {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["content-type"]}`, "set by the router"},
		"negative body":   {`{"steps": [{"name": "a", "url": "http://h/"}], "maxBodyBytes": -1}`, "maxBodyBytes: must not be negative"},
		"small buffer": {`{"steps": [{"name": "a", "url": "http://h/"}], "maxBodyBytes": 100, "maxBufferedBytes": 150}`,
			"at least twice maxBodyBytes"},
		"request timeout too long": {`{"steps": [{"name": "a", "url": "http://h/"}], "requestTimeoutSeconds": 86401}`,
			"requestTimeoutSeconds: must be between 0 and 86400"},
		"expect header": {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["expect"]}`, `"expect" is set by the router`},
		"open inference header length": {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["Inference-Header-Content-Length"]}`,
			"set by the router"},
		"proxy header": {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["Proxy-Authorization"]}`,
			`"Proxy-Authorization" belongs to one connection`},
		"hop-by-hop header": {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["TE"]}`, "belongs to one connection"},
		"content-encoding header": {`{"steps": [{"name": "a", "url": "http://h/"}], "propagateHeaders": ["Content-Encoding"]}`,
			"set by the router"},
		"negative maxTensors": {`{"steps": [{"name": "a", "url": "http://h/"}], "maxTensors": -1}`,
			"maxTensors: must be between 0 and 16384, got -1"},
		"too many tensors": {`{"steps": [{"name": "a", "url": "http://h/"}], "maxTensors": 16385}`,
			"maxTensors: must be between 0 and 16384, got 16385"},
		"too high a rank": {`{"steps": [{"name": "a", "url": "http://h/"}], "maxTensorRank": 65}`,
			"maxTensorRank: must be between 0 and 64, got 65"},
		"two documents": {`{"steps": [{"name": "a", "url": "http://h/"}]} {}`, "more than one JSON document"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			for _, secret := range []string{"s3cret", "user:s", "token@"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows the credentials (%q): %v", secret, err)
				}
			}
		})
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	_, err := LoadConfig(t.TempDir() + "/missing.json")
	if err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("error %v", err)
	}
}
