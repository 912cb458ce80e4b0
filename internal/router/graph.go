package router

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// errRequestEnded cancels the steps still running when another step ended the request: it
// failed, answered a 4xx, or its stopWhen held.
var errRequestEnded = errors.New("another step ended the request")

// graph is what each step waits for, read from the steps' inputs. A source is 0 for the
// pipeline's request and k for the answer of step k (from 1). A step without inputs waits for
// the answer before it (the request, for the first step) and is sent it as it is; a step with
// inputs waits for the sources its inputs name and is sent a request made of their tensors. A
// step waits only for earlier steps, so the steps' order is always one the graph can run in;
// steps that do not wait for each other run at the same time.
type graph struct {
	// needs[i] are the sources step i (from 0) waits for.
	needs [][]int
	// waiting[k] are the steps (from 0) that wait for source k.
	waiting [][]int
	// users[k] counts the steps that read source k, and the pipeline's answer when it is made
	// of source k's tensors: its body is held until the last of them is done with it.
	users []int
	// mapped[k] is true when some step, or the pipeline's answer, maps tensors from source k:
	// its tensors are read once, as it arrives.
	mapped []bool
	// anyMapped is true when some step has inputs or the answer has outputs.
	anyMapped bool
}

// newGraph is the graph of steps, whose answer is made of outputs when there are.
func newGraph(steps []*step, outputs []output) *graph {
	n := len(steps)
	g := &graph{needs: make([][]int, n), waiting: make([][]int, n+1), users: make([]int, n+1), mapped: make([]bool, n+1)}
	for i, s := range steps {
		if s.inputs == nil {
			g.needs[i] = []int{i}
		} else {
			g.anyMapped = true
			for _, in := range s.inputs {
				g.mapped[in.source] = true
				if !slices.Contains(g.needs[i], in.source) {
					g.needs[i] = append(g.needs[i], in.source)
				}
			}
		}
		for _, k := range g.needs[i] {
			g.waiting[k] = append(g.waiting[k], i)
			g.users[k]++
		}
	}
	for _, out := range outputs {
		g.anyMapped, g.mapped[out.source] = true, true
		g.users[out.source]++
	}
	return g
}

// outcome is what a step's call came to.
type outcome struct {
	step int
	resp *stepResponse
	// stop is true when the step's stopWhen held on resp.
	stop bool
	f    *failure
}

// execution is one request through the graph. Only the goroutine of run touches it: the
// goroutines that call steps get their request and give back their outcome.
type execution struct {
	r *Router
	// ctx is the request's; once a step runs beside another, a context of its own that cancel
	// ends (nil before: nothing runs beside the step that ends the request).
	ctx    context.Context
	cancel context.CancelCauseFunc
	header http.Header
	// fl is the bodies steps read.
	fl flow
	// pending[i] counts the sources step i still waits for.
	pending []int
	// ready are the steps whose sources have all arrived, not started yet.
	ready   []int
	running int
	results chan outcome
	// ended is true once the request has its answer or its failure: nothing more starts.
	ended  bool
	answer *stepResponse
	last   string
	fail   *failure
}

// run carries a request through the steps and returns the response to answer with and the
// name of the step that gave it: the last step's (or, with outputs, the answer made of them,
// named after the last step), a 4xx, or the response of the step whose stopWhen held. Each step
// starts once what it waits for has arrived, so that independent steps run at the same time; a
// step that fails, answers a 4xx or stops ends the request, and the steps still running are
// cancelled (their bodies released once they return). A step with mapped inputs gets a request
// made of them; the bodies steps read are held until the last of them is done. It releases in.
func (r *Router) run(ctx context.Context, header http.Header, in payload) (*stepResponse, string, *failure) {
	n := len(r.steps)
	// Each step is ready once: pending and ready share one array.
	counts := make([]int, 2*n)
	x := &execution{r: r, ctx: ctx, header: header, pending: counts[:n], ready: counts[n:n]}
	r.graph.startFlow(&x.fl, r.reader)
	defer x.fl.release()
	defer func() {
		if x.cancel != nil {
			x.cancel(nil)
		}
	}()
	for i, needs := range r.graph.needs {
		x.pending[i] = len(needs)
	}
	x.arrived(0, in)
	for {
		x.start()
		if x.running == 0 {
			break
		}
		x.done(<-x.results)
	}
	if x.fail == nil && !x.ended && r.outputs != nil {
		// Every step answered: the answer is made of their tensors.
		x.answer, x.fail = r.answer(&x.fl)
	}
	if x.fail != nil {
		if x.answer != nil {
			x.answer.body.Release()
		}
		return nil, "", x.fail
	}
	return x.answer, x.last, nil
}

// arrived makes source k available: the flow holds it for the steps that read it, and the
// steps that waited only for it are ready.
func (x *execution) arrived(k int, p payload) {
	x.fl.keep(k, p)
	for _, i := range x.r.graph.waiting[k] {
		if x.pending[i]--; x.pending[i] == 0 {
			x.ready = append(x.ready, i)
		}
	}
}

// start starts the ready steps: the only one inline when nothing else runs (a line of steps
// costs no goroutine), each in a goroutine of its own otherwise.
func (x *execution) start() {
	for len(x.ready) > 0 && !x.ended {
		i := x.ready[0]
		x.ready = x.ready[1:]
		send, owned, ok := x.request(i)
		if !ok {
			return
		}
		if x.running == 0 && len(x.ready) == 0 {
			x.running++
			x.done(x.r.execute(x.ctx, i, x.header, send, owned))
			continue
		}
		if x.results == nil {
			x.results = make(chan outcome, len(x.r.steps))
			x.ctx, x.cancel = context.WithCancelCause(x.ctx)
		}
		x.running++
		go func() { x.results <- x.r.execute(x.ctx, i, x.header, send, owned) }()
	}
}

// request is what step i is sent: a request made of its mapped inputs (owned: the call
// releases it), or the answer before it as it is (held by the flow until the call is done).
// false when the request could not be made: the request has then failed.
func (x *execution) request(i int) (payload, bool, bool) {
	s := x.r.steps[i]
	if s.inputs == nil {
		return x.fl.sources[i].body, false, true
	}
	built, f := x.r.request(&x.fl, s)
	// The request is made of copies: what it was made of is released before the call.
	for _, k := range x.r.graph.needs[i] {
		x.fl.use(k)
	}
	if f != nil {
		x.end(nil, "", f)
		return payload{}, false, false
	}
	return built, true, true
}

// execute calls step i with send, releasing it when owned, and evaluates its stopWhen on a
// success.
func (r *Router) execute(ctx context.Context, i int, header http.Header, send payload, owned bool) outcome {
	s := r.steps[i]
	// Branches run at once: each call gets its own copy of the headers, naming its step.
	header = header.Clone()
	header[config.HeaderStep] = []string{s.name}
	resp, f := r.call(ctx, s, header, send)
	if owned {
		send.body.Release()
	}
	if f != nil || resp.status >= 400 {
		return outcome{step: i, resp: resp, f: f}
	}
	stop, f := s.stops(ctx, resp, r.reader)
	if f != nil {
		resp.body.Release()
		return outcome{step: i, f: f}
	}
	return outcome{step: i, resp: resp, stop: stop}
}

// done takes the outcome of a step's call.
func (x *execution) done(o outcome) {
	x.running--
	s := x.r.steps[o.step]
	if s.inputs == nil {
		x.fl.use(o.step)
	}
	switch {
	case x.ended:
		// Cancelled, or finished after the request ended: nobody reads it.
		if o.resp != nil {
			o.resp.body.Release()
		}
	case o.f != nil:
		x.end(nil, "", o.f)
	case o.resp.status >= 400 || o.stop:
		x.end(o.resp, s.name, nil)
	case o.step == len(x.r.steps)-1 && x.r.outputs == nil:
		// The pipeline's answer, once the steps still running are done.
		x.answer, x.last = o.resp, s.name
	case o.step == len(x.r.steps)-1:
		x.last = s.name
		x.arrived(o.step+1, o.resp.payload)
	default:
		x.arrived(o.step+1, o.resp.payload)
	}
}

// end ends the request with resp (answered by step last) or f, and cancels the steps still
// running.
func (x *execution) end(resp *stepResponse, last string, f *failure) {
	x.ended = true
	if x.answer != nil {
		x.answer.body.Release()
	}
	x.answer, x.last, x.fail = resp, last, f
	x.ready = nil
	if x.cancel != nil {
		x.cancel(errRequestEnded)
	}
}
