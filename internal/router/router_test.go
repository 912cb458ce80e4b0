package router

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

func TestRouterCallsTheStepsInOrder(t *testing.T) {
	var got1, got2, got3 atomic.Value
	s1 := appendStep(t, "|1", "text/x-one", &got1)
	s2 := appendStep(t, "|2", "text/x-two", &got2)
	s3 := appendStep(t, "|3", "application/x-three", &got3)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "one", URL: s1.URL}, {Name: "two", URL: s2.URL + "/infer"}, {Name: "three", URL: s3.URL},
	}})

	a := post(t, tr.url+"/any/path", "text/x-input", "in", nil)
	if a.status != http.StatusOK || a.body != "in|1|2|3" {
		t.Fatalf("answer %d %q, want 200 %q", a.status, a.body, "in|1|2|3")
	}
	if got := a.header.Get(config.HeaderLastStep); got != "three" {
		t.Errorf("%s: %q, want three", config.HeaderLastStep, got)
	}
	if got := a.header.Get("Content-Type"); got != "application/x-three" {
		t.Errorf("Content-Type of the answer: %q, want the last step's", got)
	}
	// Each step gets the content type of what it is given.
	for i, c := range []struct {
		got  *atomic.Value
		want string
	}{{&got1, "text/x-input"}, {&got2, "text/x-one"}, {&got3, "text/x-two"}} {
		if got := c.got.Load(); got != c.want {
			t.Errorf("step %d received Content-Type %v, want %q", i+1, got, c.want)
		}
	}
}

func TestRouterEndsEarlyWhenStopWhenHolds(t *testing.T) {
	for _, tc := range []struct {
		name, detected, want, wantLast string
		recognizerCalls                int32
	}{
		{"no face: the detector's answer", `{"faces": []}`, `{"faces": []}`, "detect", 0},
		{"a face: the recognizer's answer", `{"faces": [{"x": 1}]}`, `{"faces": [{"x": 1}]}|recognized`, "recognize", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			detect := jsonStep(t, tc.detected)
			recognize := appendStep(t, "|recognized", "application/json", nil)
			tr := newTestRouter(t, config.Config{Steps: []config.Step{
				{Name: "detect", URL: detect.URL, StopWhen: "size(response.faces) == 0"},
				{Name: "recognize", URL: recognize.URL},
			}})
			a := post(t, tr.url, "image/jpeg", "jpeg bytes", nil)
			if a.status != http.StatusOK || a.body != tc.want || a.header.Get(config.HeaderLastStep) != tc.wantLast {
				t.Fatalf("answer %d %q from %q, want 200 %q from %q", a.status, a.body, a.header.Get(config.HeaderLastStep), tc.want, tc.wantLast)
			}
			if got := recognize.calls.Load(); got != tc.recognizerCalls {
				t.Errorf("recognizer called %d times, want %d", got, tc.recognizerCalls)
			}
		})
	}
}

func TestRouterStopWhenSeesStatusAndHeaders(t *testing.T) {
	first := newStep(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Faces", "0")
		w.WriteHeader(http.StatusAccepted)
	})
	second := appendStep(t, "never", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "first", URL: first.URL, StopWhen: `status == 202 && headers["x-faces"] == "0" && response == null`},
		{Name: "second", URL: second.URL},
	}})
	a := post(t, tr.url, "", "", nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "first" || second.calls.Load() != 0 {
		t.Fatalf("answer %d from %q, second step called %d times", a.status, a.header.Get(config.HeaderLastStep), second.calls.Load())
	}
}

// TestRouterStopWhenReadsTheAnswerHoweverItIsNamed checks that every way of reading response
// sees the decoded answer: none may be mistaken for an expression that does not read it.
func TestRouterStopWhenReadsTheAnswerHoweverItIsNamed(t *testing.T) {
	detect := jsonStep(t, `{"faces": [], "label": "background", "x": {"y": 1}}`)
	recognize := appendStep(t, "|recognized", "application/json", nil)
	for _, expr := range []string{
		"size(response.faces) == 0",
		"has(response.faces)",
		`response["label"] == "background"`,
		".response.x.y == 1",
		"dyn(response).x.y == 1",
		"[response][0].label.startsWith('back')",
		"response.exists(k, k == 'label')",
		"[1].exists(x, response.x.y == x)",
		"response != null && status == 200",
	} {
		tr := newTestRouter(t, config.Config{Steps: []config.Step{
			{Name: "detect", URL: detect.URL, StopWhen: expr},
			{Name: "recognize", URL: recognize.URL},
		}})
		if a := post(t, tr.url, "", "in", nil); a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "detect" {
			t.Errorf("%s: answer %d %q from %q, want the detector's", expr, a.status, a.body, a.header.Get(config.HeaderLastStep))
		}
	}
}

func TestRouterAnswers502WhenStopWhenFailsAtRunTime(t *testing.T) {
	detect := statusStep(t, http.StatusOK, "not json")
	recognize := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "detect", URL: detect.URL, StopWhen: "size(response.faces) == 0"},
		{Name: "recognize", URL: recognize.URL},
	}})
	a := post(t, tr.url, "", "x", nil)
	if a.status != http.StatusBadGateway {
		t.Fatalf("answer %d %q, want 502", a.status, a.body)
	}
	if e := a.errorBody(t); e.Step != "detect" || !strings.Contains(e.Error, "stopWhen") {
		t.Errorf("error body %+v, want one naming the step and stopWhen", e)
	}
	if recognize.calls.Load() != 0 {
		t.Error("the next step was called")
	}
	if got := tr.counter(t, "errors", "detect", ReasonStopWhen); got != 1 {
		t.Errorf("stop_when errors: %v", got)
	}
}

func TestRouterPassesClientErrorsBackWithoutRetry(t *testing.T) {
	bad := statusStep(t, http.StatusUnprocessableEntity, "no image in the body")
	next := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "bad", URL: bad.URL, Retries: 3}, {Name: "next", URL: next.URL}}})
	a := post(t, tr.url, "", "x", nil)
	if a.status != http.StatusUnprocessableEntity || a.body != "no image in the body" || a.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("answer %d %q (%s), want the step's 422", a.status, a.body, a.header.Get("Content-Type"))
	}
	if a.header.Get(config.HeaderLastStep) != "bad" {
		t.Errorf("%s: %q", config.HeaderLastStep, a.header.Get(config.HeaderLastStep))
	}
	if got := bad.calls.Load(); got != 1 {
		t.Errorf("the step was called %d times, want once", got)
	}
	if next.calls.Load() != 0 {
		t.Error("the next step was called")
	}
	if got := tr.counter(t, "requests", "422"); got != 1 {
		t.Errorf("requests_total{code=422}: %v", got)
	}
}

func TestRouterRetriesServerErrors(t *testing.T) {
	var fails atomic.Int32
	fails.Store(2)
	flaky := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if fails.Add(-1) >= 0 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(append(b, "|ok"...))
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "flaky", URL: flaky.URL, Retries: 2}}})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusOK || a.body != "in|ok" {
		t.Fatalf("answer %d %q, want 200 %q", a.status, a.body, "in|ok")
	}
	if got := flaky.calls.Load(); got != 3 {
		t.Errorf("step called %d times, want 3", got)
	}
	if got := tr.counter(t, "retries", "flaky"); got != 2 {
		t.Errorf("retries_total: %v, want 2", got)
	}
	if got := tr.counter(t, "errors", "flaky", ReasonServerError); got != 2 {
		t.Errorf("errors_total{reason=server_error}: %v, want 2", got)
	}
}

func TestRouterAnswers502WhenRetriesRunOut(t *testing.T) {
	down := statusStep(t, http.StatusServiceUnavailable, "down")
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "down", URL: down.URL, Retries: 1}}})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusBadGateway {
		t.Fatalf("answer %d %q, want 502", a.status, a.body)
	}
	if e := a.errorBody(t); e.Step != "down" || !strings.Contains(e.Error, "503") {
		t.Errorf("error body %+v", e)
	}
	if got := down.calls.Load(); got != 2 {
		t.Errorf("step called %d times, want 2 (1 + 1 retry)", got)
	}
}

func TestRouterAnswers502WhenTheStepIsUnreachable(t *testing.T) {
	gone := newStep(t, func(http.ResponseWriter, *http.Request) {})
	url := gone.URL
	gone.Close()
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "gone", URL: url, Retries: 2}}})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusBadGateway || a.errorBody(t).Step != "gone" {
		t.Fatalf("answer %d %q, want 502 naming the step", a.status, a.body)
	}
	if got := tr.counter(t, "errors", "gone", ReasonConnection); got != 3 {
		t.Errorf("errors_total{reason=connection}: %v, want 3", got)
	}
}

func TestRouterAnswers504WhenTheStepTimesOut(t *testing.T) {
	// The server sees the router hang up once it has read the body.
	hung := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "hung", URL: hung.URL, TimeoutSeconds: 0.2, Retries: 1}}})
	start := time.Now()
	a := post(t, tr.url, "", "in", nil)
	elapsed := time.Since(start)
	if a.status != http.StatusGatewayTimeout || a.errorBody(t).Step != "hung" {
		t.Fatalf("answer %d %q, want 504 naming the step", a.status, a.body)
	}
	// Two attempts of 0.2 s each; the bound leaves room for a loaded machine.
	if elapsed < 400*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("answered after %s, want two deadlines of 0.2 s", elapsed)
	}
	if got := hung.calls.Load(); got != 2 {
		t.Errorf("step called %d times, want 2", got)
	}
	if got := tr.counter(t, "errors", "hung", ReasonTimeout); got != 2 {
		t.Errorf("errors_total{reason=timeout}: %v, want 2", got)
	}
}

func TestRouterCancelsTheStepCallWhenTheCallerGoesAway(t *testing.T) {
	entered, canceled := make(chan struct{}), make(chan struct{})
	slow := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(entered)
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(30 * time.Second):
		}
	})
	next := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "slow", URL: slow.URL, Retries: 3}, {Name: "next", URL: next.URL}}})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tr.url, strings.NewReader("in"))
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = res.Body.Close()
		}
		done <- err
	}()
	<-entered
	cancel()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the step call was not canceled after the caller went away")
	}
	if err := <-done; err == nil {
		t.Error("the canceled call got an answer")
	}
	// The router counts the request once it has seen the cancellation.
	deadline := time.Now().Add(10 * time.Second)
	for tr.counter(t, "requests", "499") != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := tr.counter(t, "requests", "499"); got != 1 {
		t.Errorf("requests_total{code=499}: %v", got)
	}
	if got := slow.calls.Load(); got != 1 {
		t.Errorf("step called %d times, want once (no retry for a caller gone)", got)
	}
	if next.calls.Load() != 0 {
		t.Error("the next step was called")
	}
}

func TestRouterPassesHeadersOn(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
			w.Header().Set("X-Step-Only", "from step "+name)
			_, _ = w.Write([]byte("ok"))
		}
	}
	s1, s2 := newStep(t, record("one")), newStep(t, record("two"))
	tr := newTestRouter(t, config.Config{
		Steps:            []config.Step{{Name: "one", URL: s1.URL}, {Name: "two", URL: s2.URL}},
		PropagateHeaders: []string{"x-user"},
	})
	sent := http.Header{
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Tracestate":  {"vendor=value"},
		"Baggage":     {"tenant=lab"},
		"X-User":      {"alice"},
		"X-Secret":    {"not propagated"},
	}

	t.Run("request id generated", func(t *testing.T) {
		seen = nil
		a := post(t, tr.url, "", "in", sent)
		id := a.header.Get(config.HeaderRequestID)
		if a.status != http.StatusOK || id == "" {
			t.Fatalf("answer %d with request id %q", a.status, id)
		}
		if len(seen) != 2 {
			t.Fatalf("%d step calls, want 2", len(seen))
		}
		for i, h := range seen {
			for _, name := range []string{"Traceparent", "Tracestate", "Baggage", "X-User"} {
				if h.Get(name) != sent.Get(name) {
					t.Errorf("step %d got %s %q, want %q", i+1, name, h.Get(name), sent.Get(name))
				}
			}
			if h.Get("X-Secret") != "" {
				t.Errorf("step %d got X-Secret, which is not in propagateHeaders", i+1)
			}
			if h.Get(config.HeaderRequestID) != id {
				t.Errorf("step %d got request id %q, the caller %q", i+1, h.Get(config.HeaderRequestID), id)
			}
		}
		if got := a.header.Get("X-Step-Only"); got != "from step two" {
			t.Errorf("X-Step-Only %q, want the last step's", got)
		}
	})
	t.Run("request id kept", func(t *testing.T) {
		seen = nil
		h := sent.Clone()
		h.Set(config.HeaderRequestID, "req-42")
		a := post(t, tr.url, "", "in", h)
		if got := a.header.Get(config.HeaderRequestID); got != "req-42" {
			t.Errorf("answer's request id %q, want the caller's", got)
		}
		for i, h := range seen {
			if got := h.Get(config.HeaderRequestID); got != "req-42" {
				t.Errorf("step %d got request id %q", i+1, got)
			}
		}
	})
	t.Run("request ids differ", func(t *testing.T) {
		a, b := post(t, tr.url, "", "in", nil), post(t, tr.url, "", "in", nil)
		if a.header.Get(config.HeaderRequestID) == b.header.Get(config.HeaderRequestID) {
			t.Error("two requests got the same generated id")
		}
	})
}

func TestRouterRefusesBodiesOverMaxBodyBytes(t *testing.T) {
	step := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: step.URL}}, MaxBodyBytes: 1024})

	if a := post(t, tr.url, "", strings.Repeat("x", 1024), nil); a.status != http.StatusOK {
		t.Fatalf("a body of exactly maxBodyBytes: %d %q", a.status, a.body)
	}
	if a := post(t, tr.url, "", strings.Repeat("x", 1025), nil); a.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body with Content-Length over maxBodyBytes: %d %q", a.status, a.body)
	} else {
		a.errorBody(t)
	}
	// Without Content-Length (chunked) the limit holds too.
	req, _ := http.NewRequest(http.MethodPost, tr.url, io.MultiReader(strings.NewReader(strings.Repeat("x", 2000))))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if req.ContentLength != 0 || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over maxBodyBytes: %d (sent with length %d)", res.StatusCode, req.ContentLength)
	}
	if got := step.calls.Load(); got != 1 {
		t.Errorf("step called %d times, want only for the body within the limit", got)
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("%d buffered bytes still counted", got)
	}
}

func TestRouterAnswers502ForAStepResponseOverMaxBodyBytes(t *testing.T) {
	big := statusStep(t, http.StatusOK, strings.Repeat("y", 2048))
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "big", URL: big.URL, Retries: 2}}, MaxBodyBytes: 1024})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusBadGateway || a.errorBody(t).Step != "big" {
		t.Fatalf("answer %d %q, want 502 naming the step", a.status, a.body)
	}
	if got := big.calls.Load(); got != 1 {
		t.Errorf("step called %d times: a response too large is not retried", got)
	}
}

func TestRouterServesConcurrentRequests(t *testing.T) {
	s1 := appendStep(t, "|1", "text/plain", nil)
	s2 := appendStep(t, "|2", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: s1.URL}, {Name: "two", URL: s2.URL}}})
	const callers, each = 32, 10
	var wg sync.WaitGroup
	errs := make(chan string, callers*each)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				in := fmt.Sprintf("caller %d request %d %s", c, i, strings.Repeat("z", c*100))
				a := post(t, tr.url, "", in, nil)
				if a.status != http.StatusOK || a.body != in+"|1|2" {
					errs <- fmt.Sprintf("%q: answer %d %.60q", in[:20], a.status, a.body)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := tr.counter(t, "requests", "200"); got != callers*each {
		t.Errorf("requests_total{code=200}: %v, want %d", got, callers*each)
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("%d buffered bytes still counted after every request finished", got)
	}
}

func TestRouterBoundsTheBytesRequestsHoldTogether(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	held := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		entered.Done()
		<-release
		_, _ = w.Write(b[:10])
	})
	// Room for two bodies of 1000 bytes and the steps' short answers to them, not for a third.
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "held", URL: held.URL}}, MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	body := strings.Repeat("x", 1000)
	answers := make(chan answer, 2)
	for range 2 {
		go func() { answers <- post(t, tr.url, "", body, nil) }()
	}
	entered.Wait()
	a := post(t, tr.url, "", body, nil)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "1" {
		t.Errorf("a third body while two are held: %d (Retry-After %q) %q, want 503 with Retry-After: 1",
			a.status, a.header.Get("Retry-After"), a.body)
	}
	close(release)
	for range 2 {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("a held request: %d %q", a.status, a.body)
		}
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("%d buffered bytes still counted", got)
	}
}

func TestRouterAcceptsOnlyPost(t *testing.T) {
	step := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: step.URL}}})
	res, err := http.Get(tr.url)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	if step.calls.Load() != 0 {
		t.Error("the step was called")
	}
}

// TestRouterStartsNoStepCallAfterTheCallerWentAway runs a request whose context has ended over
// a kept connection to the step: no call reaches the step.
func TestRouterStartsNoStepCallAfterTheCallerWentAway(t *testing.T) {
	one := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: one.URL}}})
	// A first request leaves a kept connection to the step.
	if a := post(t, tr.url, "text/plain", "warm", nil); a.status != http.StatusOK {
		t.Fatalf("warm-up: %d %s", a.status, a.body)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	const tries = 20
	for range tries {
		body, err := bodies.Read(strings.NewReader("in"), 2, tr.bodyLimit, tr.budget)
		if err != nil {
			t.Fatal(err)
		}
		resp, _, f := tr.run(gone, stepHeaders(http.Header{}, tr.propagate, "id"), payload{body: body, contentType: "text/plain"})
		if resp != nil {
			resp.body.Release()
		}
		if f == nil || f.reason != ReasonCanceled {
			t.Fatalf("run after the caller went away: %v", f)
		}
		// Let a call that reached the step be counted, and a fresh connection be kept again.
		time.Sleep(20 * time.Millisecond)
		if a := post(t, tr.url, "text/plain", "warm", nil); a.status != http.StatusOK {
			t.Fatalf("warm-up: %d %s", a.status, a.body)
		}
	}
	if got := one.calls.Load() - 1 - tries; got != 0 {
		t.Errorf("the step got %d of %d calls made after the caller had gone away, want none", got, tries)
	}
}

// TestRouterCountsACallerGoneDuringStopWhenAsCanceled hangs up while a cost-tracked stopWhen
// is evaluated: the interruption is the caller's going away (499, canceled), not the
// expression failing (502, stop_when).
func TestRouterCountsACallerGoneDuringStopWhenAsCanceled(t *testing.T) {
	answered := make(chan struct{})
	big := `{"items":[` + strings.Repeat("0,", 100_000) + `0]}`
	detect := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(big))
		close(answered)
	})
	next := appendStep(t, "", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "detect", URL: detect.URL, StopWhen: `response.items.exists(x, x == -1)`},
		{Name: "next", URL: next.URL},
	}})
	c, err := net.Dial("tcp", strings.TrimPrefix(tr.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("POST / HTTP/1.1\r\nHost: router\r\nContent-Length: 2\r\n\r\nin")); err != nil {
		t.Fatal(err)
	}
	<-answered
	// The router reads the answer (200 KB on loopback) and evaluates the expression (65 to 100 ms
	// for 100 000 elements here); the caller hangs up meanwhile. (Should it hang up before the
	// evaluation starts, the answer is the same.)
	time.Sleep(10 * time.Millisecond)
	_ = c.Close()
	eventually(t, "the request counted", func() bool {
		return tr.counter(t, "requests", "499")+tr.counter(t, "requests", "502")+tr.counter(t, "requests", "200") == 1
	})
	if got := tr.counter(t, "requests", "499"); got != 1 {
		t.Errorf("requests_total{code=499} %v, want 1 (the caller went away); code=502 %v, code=200 %v; "+
			"step_errors_total{step=detect,reason=stop_when} %v, reason=canceled %v",
			got, tr.counter(t, "requests", "502"), tr.counter(t, "requests", "200"),
			tr.counter(t, "errors", "detect", ReasonStopWhen), tr.counter(t, "errors", "detect", ReasonCanceled))
	}
}

// TestRouterAnswers504WhenTheDeadlinePassesDuringStopWhen lets the request's deadline pass
// while a cost-tracked stopWhen is evaluated: 504, as for any step still running then.
func TestRouterAnswers504WhenTheDeadlinePassesDuringStopWhen(t *testing.T) {
	big := `{"items":[` + strings.Repeat("0,", 100_000) + `0]}`
	detect := jsonStep(t, big)
	next := appendStep(t, "", "text/plain", nil)
	// The deadline passes during the evaluation (65 to 100 ms here), or before it: 504 either way.
	tr := newTestRouter(t, config.Config{RequestTimeoutSeconds: 0.03, Steps: []config.Step{
		{Name: "detect", URL: detect.URL, StopWhen: `response.items.exists(x, x == -1)`},
		{Name: "next", URL: next.URL},
	}})
	a := post(t, tr.url, "text/plain", "in", nil)
	if a.status != http.StatusGatewayTimeout {
		t.Errorf("answer %d %s, want 504 (the request's deadline passed)", a.status, a.body)
	}
}

// TestRouterPassesLargeBodiesWhole sends bodies of several blocks through three steps from
// concurrent callers: every answer is its own request's body and the steps' suffixes, though
// the blocks of each released body serve the next ones.
func TestRouterPassesLargeBodiesWhole(t *testing.T) {
	s1 := appendStep(t, "|1", "text/plain", nil)
	s2 := appendStep(t, "|2", "text/plain", nil)
	s3 := appendStep(t, "|3", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: s1.URL}, {Name: "two", URL: s2.URL}, {Name: "three", URL: s3.URL}}})
	const callers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan string, callers*each)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				// A different length and filling for every request: a block reused with bytes of
				// another request would show.
				in := strings.Repeat(string(rune('a'+c)), 3*bodies.BlockBytes+c*1000+i)
				a := post(t, tr.url, "", in, nil)
				if a.status != http.StatusOK || a.body != in+"|1|2|3" {
					errs <- fmt.Sprintf("caller %d request %d: answer %d, %d bytes", c, i, a.status, len(a.body))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	eventually(t, "the budget is free after every request", func() bool { return tr.budget.Used() == 0 })
}
