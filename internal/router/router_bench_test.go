package router

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkRouterThreeSteps is one request through three echo steps and the router, all in
// this process on loopback (go test -bench Router -cpuprofile to see where the time goes).
func BenchmarkRouterThreeSteps(b *testing.B) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
	var steps []Step
	for _, name := range []string{"one", "two", "three"} {
		s := newStep(b, echo)
		steps = append(steps, Step{Name: name, URL: s.URL})
	}
	tr := newTestRouter(b, Config{Steps: steps})
	body := []byte(`{"items": ["` + strings.Repeat("x", 1000) + `"]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Post(tr.url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK || len(got) != len(body) {
				b.Fatalf("answer %d", res.StatusCode)
			}
		}
	})
}
