package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

const (
	// conflictShare of the operator's writes are answered 409 Conflict without reaching the
	// apiserver.
	conflictShare = 0.10
	// unavailableShare are answered 503 without reaching it.
	unavailableShare = 0.05
	// lostAnswerShare reach it and are carried out, but their answer is replaced by a 500: the
	// operator cannot know its write happened.
	lostAnswerShare = 0.05
	// faultSeed seeds the draws.
	faultSeed = 20260101
	// maxWritesFactor bounds the writes attempted under faults, against the minimum.
	maxWritesFactor = 5
)

// faultInjector wraps the operator's connection and breaks a share of its writes (events and
// leader election apart): its answers are what the apiserver sends in those cases.
type faultInjector struct {
	mu  sync.Mutex
	rng *rand.Rand

	attempted, conflicts, unavailable, lostAnswers, events atomic.Int64
}

func newFaultInjector() *faultInjector {
	return &faultInjector{rng: rand.New(rand.NewPCG(faultSeed, faultSeed))}
}

func (f *faultInjector) draw() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64()
}

func (f *faultInjector) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch kindOfWrite(req) {
		case "event":
			f.events.Add(1)
			return rt.RoundTrip(req)
		case "write":
		default:
			return rt.RoundTrip(req)
		}
		f.attempted.Add(1)
		x := f.draw()
		switch {
		case x < conflictShare:
			f.conflicts.Add(1)
			closeBody(req)
			return statusResponse(req, http.StatusConflict, metav1.StatusReasonConflict,
				"Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again"), nil
		case x < conflictShare+unavailableShare:
			f.unavailable.Add(1)
			closeBody(req)
			return statusResponse(req, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request"), nil
		case x < conflictShare+unavailableShare+lostAnswerShare:
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			f.lostAnswers.Add(1)
			return statusResponse(req, http.StatusInternalServerError, metav1.StatusReasonInternalError, "an error on the server has prevented the request from succeeding"), nil
		}
		return rt.RoundTrip(req)
	})
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// statusResponse is the apiserver's answer for an error: a Status object.
func statusResponse(req *http.Request, code int, reason metav1.StatusReason, message string) *http.Response {
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: reason, Code: int32(code),
	})
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// writeErrors runs the operator (in the test's process) with a share of its writes refused
// with 409 Conflict or 503, or carried out with their answer replaced by a 500, through a burst
// of Pipelines.
func writeErrors(r *run) {
	const ns = "write-errors"
	cp := startControlPlane(r, ns)
	startWorld(r, cp)
	f := newFaultInjector()
	startInProcess(r, cp.config(r, operatorUser), f.wrap)

	// Plain Pipelines: the case measures retries against the fault-free minimum of one object
	// mix; the other kinds of Pipeline are loaded by the other cases.
	b := startBurst(cp.admin, ns, burstSize, newPlainPipeline)
	b.wait(r)
	conv := expectConverged(r, cp.admin, ns, names(burstSize))
	attempted := f.attempted.Load()
	time.Sleep(3 * time.Second)
	later := f.attempted.Load() - attempted
	if later > 0 {
		r.Errorf("the operator kept writing after convergence: %d writes in 3 s", later)
	}

	minimum := int64(0)
	for i := range burstSize {
		minimum += int64(minWrites(newPlainPipeline(ns, i)))
	}
	injected := f.conflicts.Load() + f.unavailable.Load() + f.lostAnswers.Load()
	if attempted > maxWritesFactor*minimum {
		r.Errorf("retries unbounded: %d writes attempted, more than %d times the fault-free minimum %d", attempted, maxWritesFactor, minimum)
	}
	r.res.load = fmt.Sprintf("burst of %d Pipelines (%d writers)", burstSize, burstWriters)
	r.res.faults = fmt.Sprintf("%d of %d writes broken: %d × 409 Conflict, %d × 503 (not carried out), %d × 500 after being carried out",
		injected, attempted, f.conflicts.Load(), f.unavailable.Load(), f.lostAnswers.Load())
	r.res.converge = fmt.Sprintf("%.1f s after the burst began", conv.at.Sub(b.started).Seconds())
	r.figure("shares drawn per write: %.0f %% 409 Conflict, %.0f %% 503, %.0f %% answer replaced by a 500 after the write (seed %d)",
		100*conflictShare, 100*unavailableShare, 100*lostAnswerShare, faultSeed)
	r.figure("writes attempted: %d (%.2f per Pipeline) against a fault-free minimum of %d (%.2f per Pipeline: finalizer, volume, claim, "+
		"%d Deployments, %d Services, 2 statuses): "+
		"%.2f times the minimum (bound %d)", attempted, float64(attempted)/burstSize, minimum, float64(minimum)/burstSize,
		steps, steps, float64(attempted)/float64(minimum), maxWritesFactor)
	r.figure("writes attempted in the 3 s after convergence: %d; events recorded: %d", later, f.events.Load())
	r.figure("converged %.1f s after the burst began", conv.at.Sub(b.started).Seconds())
}

// minWrites is the least the operator can write for the new Pipeline p until it runs: the
// finalizer, the volume and the claim, a Deployment and a Service per step, two statuses
// (Creating, Running), and the router's ConfigMap, Deployment and Service, or a step's autoscaler.
func minWrites(p *pipelinev1.Pipeline) int {
	n := 1 + 2 + 2*steps + 2
	switch variant(p) {
	case variantRouter:
		n += 3
	case variantAutoscaling:
		n++
	}
	return n
}
