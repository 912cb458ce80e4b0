package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve is a server with the shipped model name loaded from models/.
func serve(t *testing.T, name string) *httptest.Server {
	t.Helper()
	m, err := loadModel("models/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{name: name}
	s.model.Store(m)
	srv := httptest.NewServer(s.routes())
	t.Cleanup(srv.Close)
	return srv
}

func infer(t *testing.T, url, model, body string) map[string]json.RawMessage {
	t.Helper()
	resp, err := http.Post(url+"/v2/models/"+model+"/infer", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Outputs []struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		} `json:"outputs"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("infer %s: %s %v %s", model, resp.Status, err, out.Error)
	}
	got := map[string]json.RawMessage{}
	for _, o := range out.Outputs {
		got[o.Name] = o.Data
	}
	return got
}

// The shipped models, chained, name the species of three flowers of the iris data set, one of
// each species, and the scaler's answer is what its weights say.
func TestShippedModelsClassifyIrises(t *testing.T) {
	scaler, classifier := serve(t, "iris-scaler"), serve(t, "iris-classifier")
	flowers := `[[5.1, 3.5, 1.4, 0.2], [6.0, 2.7, 4.5, 1.5], [6.9, 3.1, 5.8, 2.2]]`
	scaled := infer(t, scaler.URL, "iris-scaler",
		`{"inputs":[{"name":"features","datatype":"FP32","shape":[3,4],"data":`+flowers+`}]}`)["scaled"]
	var values []float64
	if err := json.Unmarshal(scaled, &values); err != nil || len(values) != 12 {
		t.Fatalf("scaled = %s (%v)", scaled, err)
	}
	if want := round((5.1 - 5.843) / 0.825); values[0] != want {
		t.Errorf("first scaled value = %v, want %v", values[0], want)
	}
	out := infer(t, classifier.URL, "iris-classifier",
		`{"inputs":[{"name":"scaled","datatype":"FP32","shape":[3,4],"data":`+string(scaled)+`}]}`)
	if got, want := string(out["label"]), `["setosa","versicolor","virginica"]`; got != want {
		t.Errorf("labels = %s, want %s", got, want)
	}
}

func TestRefusals(t *testing.T) {
	srv := serve(t, "iris-scaler")
	for _, tc := range []struct{ path, body, want string }{
		{"/v2/models/other/infer", `{}`, "serves model iris-scaler"},
		{"/v2/models/iris-scaler/infer", `{"inputs":[]}`, "no input features"},
		{"/v2/models/iris-scaler/infer", `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`, "shape [n, 4]"},
		{"/v2/models/iris-scaler/infer", `{"inputs":[{"name":"features","datatype":"FP32","shape":[2,4],"data":[1,2,3,4]}]}`, "has 4 numbers"},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode < 400 || !strings.Contains(body.Error, tc.want) {
			t.Errorf("%s %s: %s %q, want an error with %q", tc.path, tc.body, resp.Status, body.Error, tc.want)
		}
	}
}

func TestNotReadyWhileLoading(t *testing.T) {
	srv := httptest.NewServer((&server{name: "iris-scaler"}).routes())
	defer srv.Close()
	for _, path := range []string{"/v2/health/ready", "/v2/models/iris-scaler/ready", "/v2/models/iris-scaler"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET %s while loading: %s, want 503", path, resp.Status)
		}
	}
	resp, err := http.Get(srv.URL + "/v2/health/live")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("live while loading: %s", resp.Status)
	}
}
