package router

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/celjson"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// BenchmarkRouterThreeSteps is one request through three echo steps and the router, all in
// this process on loopback (go test -bench Router -cpuprofile to see where the time goes), with
// make bench-router's document, without stopWhen and with its stopWhen on every step.
func BenchmarkRouterThreeSteps(b *testing.B) {
	b.Run("no stopWhen", func(b *testing.B) { benchRouterThreeSteps(b, "") })
	b.Run("stopWhen on every step", func(b *testing.B) { benchRouterThreeSteps(b, "size(response.items) == 0") })
}

func benchRouterThreeSteps(b *testing.B, stopWhen string) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
	var steps []config.Step
	for _, name := range []string{"one", "two", "three"} {
		s := newStep(b, echo)
		steps = append(steps, config.Step{Name: name, URL: s.URL, StopWhen: stopWhen})
	}
	tr := newTestRouter(b, config.Config{Steps: steps})
	body := benchDocument()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Post(tr.url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK || len(got) != len(body) || res.Header.Get(config.HeaderLastStep) != "three" {
				b.Fatalf("answer %d from %q", res.StatusCode, res.Header.Get(config.HeaderLastStep))
			}
		}
	})
}

// benchDocument is the document make bench-router sends (hack/bench-router): 1083 bytes,
// {"items": [16 strings of 64 bytes]}.
func benchDocument() []byte {
	items := make([]string, 16)
	for i := range items {
		items[i] = strings.Repeat("x", 64)
	}
	b, _ := json.Marshal(map[string][]string{"items": items})
	return b
}

// benchResponse is an echo step's answer to the benchmark's document, with the headers a Go
// HTTP server sends.
func benchResponse(b *testing.B) *stepResponse {
	b.Helper()
	doc := benchDocument()
	if len(doc) != 1083 {
		b.Fatalf("the document is %d bytes, want 1083", len(doc))
	}
	// Read with its length known, the document is one slice of its own, as an echo step's
	// answer of that length is.
	body, err := bodies.Read(bytes.NewReader(doc), int64(len(doc)), int64(len(doc)), bodies.NewBudget(int64(len(doc))))
	if err != nil {
		b.Fatal(err)
	}
	return &stepResponse{
		payload: payload{body: body, contentType: "application/json"},
		status:  http.StatusOK,
		header: http.Header{
			"Content-Type":   {"application/json"},
			"Content-Length": {"1083"},
			"Date":           {"Tue, 25 Nov 2026 16:44:00 GMT"},
		},
	}
}

// BenchmarkStopWhen is the stopWhen of make bench-router on one step's answer, whole and in its
// parts (go test -bench StopWhen -cpuprofile to see where the time goes).
func BenchmarkStopWhen(b *testing.B) {
	sw, err := stopwhen.Compile("size(response.items) == 0")
	if err != nil {
		b.Fatal(err)
	}
	resp := benchResponse(b)
	doc := resp.body.Bytes()
	b.Run("stops", func(b *testing.B) {
		s := &step{name: "bench", index: 1, stopWhen: sw}
		bg := bodies.NewBudget(1 << 30)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if stop, f := s.stops(ctx, resp, oip.Reader{Budget: bg}); stop || f != nil {
				b.Fatalf("stops: %v, %v", stop, f)
			}
		}
	})
	b.Run("cost", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = celjson.DecodeCost(doc)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := celjson.Decode(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("eval", func(b *testing.B) {
		decoded, err := celjson.Decode(doc)
		if err != nil {
			b.Fatal(err)
		}
		in := stopwhen.Input{Response: decoded, Status: http.StatusOK, Header: resp.header}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if stop, err := sw.Eval(ctx, in); stop || err != nil {
				b.Fatalf("eval: %v, %v", stop, err)
			}
		}
	})
}
