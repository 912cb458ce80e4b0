package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// unsized hides the length of a reader, as a chunked body does.
type unsized struct{ r io.Reader }

func (u unsized) Read(p []byte) (int, error) { return u.r.Read(p) }

func TestReadBody(t *testing.T) {
	const limit = 100 << 10
	for _, tc := range []struct {
		name    string
		size    int
		known   bool
		wantErr error
	}{
		{"empty", 0, true, nil},
		{"empty, length unknown", 0, false, nil},
		{"small", 10, true, nil},
		{"small, length unknown", 10, false, nil},
		{"at the limit", limit, true, nil},
		{"at the limit, length unknown", limit, false, nil},
		{"over the limit", limit + 1, true, errBodyTooLarge},
		{"over the limit, length unknown", limit + 1, false, errBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), tc.size)
			var r io.Reader = unsized{bytes.NewReader(data)}
			size := int64(-1)
			if tc.known {
				r, size = bytes.NewReader(data), int64(tc.size)
			}
			bg := &budget{limit: 2 * limit}
			buf, err := readBody(r, size, limit, bg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				if !bytes.Equal(buf.Bytes(), data) {
					t.Fatalf("read %d bytes, want %d", len(buf.Bytes()), len(data))
				}
				if held := bg.used.Load(); held < int64(tc.size) || held > limit {
					t.Errorf("the budget counts %d bytes for a body of %d", held, tc.size)
				}
				buf.release()
			}
			if used := bg.used.Load(); used != 0 {
				t.Errorf("%d bytes still counted after release", used)
			}
		})
	}
}

func TestReadBodyRefusesWhatTheBudgetCannotHold(t *testing.T) {
	bg := &budget{limit: 1000}
	held, err := readBody(bytes.NewReader(make([]byte, 600)), 600, 1000, bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readBody(bytes.NewReader(make([]byte, 600)), 600, 1000, bg); !errors.Is(err, errBudgetExceeded) {
		t.Fatalf("second body: error %v, want errBudgetExceeded", err)
	}
	if _, err := readBody(unsized{bytes.NewReader(make([]byte, 600))}, -1, 1000, bg); !errors.Is(err, errBudgetExceeded) {
		t.Fatalf("second body of unknown length: error %v, want errBudgetExceeded", err)
	}
	held.release()
	if _, err := readBody(bytes.NewReader(make([]byte, 600)), 600, 1000, bg); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// stackBlocks hands out the blocks last given back first, and counts them, so that a test
// knows which blocks a body reuses.
type stackBlocks struct {
	mu     sync.Mutex
	free   []*block
	made   int
	putted int
}

func (s *stackBlocks) get() *block {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	s.made++
	return new(block)
}

func (s *stackBlocks) put(b *block) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putted++
	s.free = append(s.free, b)
}

func (s *stackBlocks) freeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}

// TestReadBodyCountsWhatItHolds reads bodies around the block size, in pieces of every size,
// and checks the body and what the budget counts: a body of announced length exactly its
// length, one of unknown length less than a block more, never over the limit.
func TestReadBodyCountsWhatItHolds(t *testing.T) {
	const limit = 5*blockBytes + 100
	for _, size := range []int{1, 100, blockBytes - 1, blockBytes, blockBytes + 1, 3 * blockBytes, 3*blockBytes + 7, limit} {
		for _, known := range []bool{true, false} {
			for name, wrap := range map[string]func(io.Reader) io.Reader{
				"whole":    func(r io.Reader) io.Reader { return r },
				"one byte": iotest.OneByteReader,
				"halves":   iotest.HalfReader,
			} {
				t.Run(fmt.Sprintf("%d bytes, known %v, %s", size, known, name), func(t *testing.T) {
					data := make([]byte, size)
					for i := range data {
						data[i] = byte(i * 7)
					}
					var r io.Reader = unsized{wrap(bytes.NewReader(data))}
					announced := int64(-1)
					if known {
						announced = int64(size)
					}
					bg := &budget{limit: 2 * limit, blocks: &stackBlocks{}}
					buf, err := readBody(r, announced, limit, bg)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(buf.Bytes(), data) || buf.Len() != int64(size) {
						t.Fatalf("read %d bytes, not the %d sent", buf.Len(), size)
					}
					held := bg.used.Load()
					switch {
					case known && held != int64(size):
						t.Errorf("the budget counts %d bytes for a body of announced length %d", held, size)
					case held < int64(size) || held >= int64(size)+blockBytes || held > limit:
						t.Errorf("the budget counts %d bytes for a body of %d", held, size)
					}
					buf.release()
					if used := bg.used.Load(); used != 0 {
						t.Errorf("%d bytes still counted after release", used)
					}
				})
			}
		}
	}
}

// TestReusedBlocksCarryNoEarlierBytes reads a body into blocks an earlier, longer body held:
// the new body, read through every way the router reads it, carries only its own bytes.
func TestReusedBlocksCarryNoEarlierBytes(t *testing.T) {
	blocks := &stackBlocks{}
	bg := &budget{limit: 1 << 20, blocks: blocks}
	first, err := readBody(bytes.NewReader(bytes.Repeat([]byte("a"), 3*blockBytes)), 3*blockBytes, 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	first.release()
	if got := blocks.freeCount(); got != 3 {
		t.Fatalf("%d blocks given back, want 3", got)
	}
	want := bytes.Repeat([]byte("b"), blockBytes+10)
	second, err := readBody(unsized{iotest.HalfReader(bytes.NewReader(want))}, -1, 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.release()
	if blocks.made != 3 || blocks.freeCount() != 1 {
		t.Fatalf("the second body made %d blocks and left %d free, want it to reuse 2 of the first's", blocks.made-3, blocks.freeCount())
	}
	if got := second.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("Bytes: %d bytes, %d of them not the second body's", len(got), len(got)-bytes.Count(got, []byte("b")))
	}
	var w bytes.Buffer
	if _, err := second.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), want) {
		t.Errorf("WriteTo: %d bytes, %d of them not the second body's (%v)", w.Len(), w.Len()-bytes.Count(w.Bytes(), []byte("b")), err)
	}
	rd := second.reader()
	got, err := io.ReadAll(rd)
	_ = rd.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("reader: %d bytes, %d of them not the second body's (%v)", len(got), len(got)-bytes.Count(got, []byte("b")), err)
	}
}

// TestReaderHoldsBlocksUntilClosed releases a body in blocks while a step request still reads
// it (a transport may write a request body after its answer came): its blocks are not reused
// until the reader is closed, and the reader reads the body whole; its budget is free at once.
func TestReaderHoldsBlocksUntilClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		known  bool
		blocks int
	}{
		// The last chunk, of 1 byte, is an array of its own.
		{"several blocks", 2*blockBytes + 1, true, 2},
		{"one block, length unknown", 100, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Repeat([]byte("c"), tc.size)
			var r io.Reader = unsized{bytes.NewReader(want)}
			size := int64(-1)
			if tc.known {
				r, size = bytes.NewReader(want), int64(tc.size)
			}
			readerHoldsBlocksUntilClosed(t, r, size, want, tc.blocks)
		})
	}
}

func readerHoldsBlocksUntilClosed(t *testing.T, r io.Reader, size int64, want []byte, wantBlocks int) {
	blocks := &stackBlocks{}
	bg := &budget{limit: 1 << 20, blocks: blocks}
	buf, err := readBody(r, size, 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := newBodyRequest(context.Background(), "http://127.0.0.1:1/", buf)
	if err != nil {
		t.Fatal(err)
	}
	if req.ContentLength != int64(len(want)) {
		t.Errorf("ContentLength %d, want %d", req.ContentLength, len(want))
	}
	again, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	buf.release()
	if used := bg.used.Load(); used != 0 {
		t.Errorf("%d bytes still counted after release", used)
	}
	if blocks.putted != 0 {
		t.Fatalf("%d blocks given back while readers are open", blocks.putted)
	}
	for _, rc := range []io.ReadCloser{req.Body, again} {
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("a reader read %d bytes (%v), want the body's %d", len(got), err, len(want))
		}
	}
	_ = req.Body.Close()
	_ = req.Body.Close() // a second Close changes nothing
	if blocks.putted != 0 {
		t.Fatalf("%d blocks given back while a reader is open", blocks.putted)
	}
	if _, err := again.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read at the end: %v, want EOF", err)
	}
	_ = again.Close()
	if blocks.putted != wantBlocks {
		t.Errorf("%d blocks given back after the last reader closed, want %d", blocks.putted, wantBlocks)
	}
	if _, err := again.Read(make([]byte, 1)); !errors.Is(err, errBodyReleased) {
		t.Errorf("read after Close: %v, want errBodyReleased", err)
	}
	if _, err := req.GetBody(); !errors.Is(err, errBodyReleased) {
		t.Errorf("GetBody after the body was given back: %v, want errBodyReleased", err)
	}
}

// TestJoinCountsTheCopy joins a body of several blocks: while both are held, the copy is
// counted; after, only the joined body.
func TestJoinCountsTheCopy(t *testing.T) {
	want := bytes.Repeat([]byte("d"), 2*blockBytes+5)
	blocks := &stackBlocks{}
	bg := &budget{limit: int64(len(want)) + blockBytes, blocks: blocks}
	buf, err := readBody(bytes.NewReader(want), int64(len(want)), 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	if err := buf.join(); !errors.Is(err, errBudgetExceeded) {
		t.Fatalf("join over the budget: %v, want errBudgetExceeded", err)
	}
	if used := bg.used.Load(); used != int64(len(want)) {
		t.Errorf("the budget counts %d bytes after a refused join, want %d", used, len(want))
	}
	bg.limit = 2 * int64(len(want))
	if err := buf.join(); err != nil {
		t.Fatal(err)
	}
	if len(buf.chunks) != 1 || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("joined into %d chunks", len(buf.chunks))
	}
	if used := bg.used.Load(); used != int64(len(want)) {
		t.Errorf("the budget counts %d bytes after join, want %d", used, len(want))
	}
	if blocks.putted != 2 {
		t.Errorf("%d blocks given back by join, want 2", blocks.putted)
	}
	buf.release()
	if used := bg.used.Load(); used != 0 {
		t.Errorf("%d bytes still counted after release", used)
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
				in := strings.Repeat(string(rune('a'+c)), 3*blockBytes+c*1000+i)
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
	eventually(t, "the budget is free after every request", func() bool { return tr.budget.used.Load() == 0 })
}

// TestStopWhenReadsAnAnswerOfSeveralBlocks evaluates stopWhen on a JSON answer longer than a
// block, which the router joins before decoding it.
func TestStopWhenReadsAnAnswerOfSeveralBlocks(t *testing.T) {
	doc := `{"items":["` + strings.Repeat("x", 3*blockBytes) + `"]}`
	first := jsonStep(t, doc)
	second := appendStep(t, "|2", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "one", URL: first.URL, StopWhen: "size(response.items) == 1"},
		{Name: "two", URL: second.URL},
	}})
	a := post(t, tr.url, "application/json", "{}", nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "one" || a.body != doc {
		t.Fatalf("answer %d from %q, %d bytes; want the first step's answer of %d bytes", a.status,
			a.header.Get(config.HeaderLastStep), len(a.body), len(doc))
	}
	if got := second.calls.Load(); got != 0 {
		t.Errorf("the second step was called %d times", got)
	}
	// The answer is released once written: the caller may have read it a moment before.
	eventually(t, "the budget is free", func() bool { return tr.budget.used.Load() == 0 })
}

// TestStopsJoinsTheAnswerItDecodes has stopWhen join the JSON answer of a step whose expression
// reads response, within the budget, and leave other answers in their blocks.
func TestStopsJoinsTheAnswerItDecodes(t *testing.T) {
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "stops", URL: "http://127.0.0.1:1/", StopWhen: "response == null"},
		{Name: "plain", URL: "http://127.0.0.1:2/"},
		{Name: "on-status", URL: "http://127.0.0.1:3/", StopWhen: "status == 299"},
	}})
	stops, plain, onStatus := tr.steps[0], tr.steps[1], tr.steps[2]
	answer := func(bg *budget, contentType string) *stepResponse {
		body, err := readBody(unsized{strings.NewReader(`"` + strings.Repeat("x", 2*blockBytes) + `"`)}, -1, 1<<20, bg)
		if err != nil {
			t.Fatal(err)
		}
		return &stepResponse{payload: payload{body: body, contentType: contentType}, status: http.StatusOK}
	}
	bg := &budget{limit: 1 << 20}
	for _, tc := range []struct {
		step        *step
		contentType string
		chunks      int
	}{
		{stops, "application/json", 1},
		{stops, "text/plain", 3},
		{plain, "application/json", 3},
		{onStatus, "application/json", 3},
	} {
		resp := answer(bg, tc.contentType)
		if _, f := tc.step.stops(t.Context(), resp, bg); f != nil {
			t.Fatalf("%s, %s: %v", tc.step.name, tc.contentType, f)
		}
		if got := len(resp.body.chunks); got != tc.chunks {
			t.Errorf("%s, %s: %d chunks, want %d", tc.step.name, tc.contentType, got, tc.chunks)
		}
		resp.body.release()
	}
	// Room for the answer in blocks, not for its copy too.
	tight := &budget{limit: 3*blockBytes + blockBytes/2}
	resp := answer(tight, "application/json")
	_, f := stops.stops(t.Context(), resp, tight)
	if f == nil || f.reason != ReasonBufferBudget || f.status != http.StatusServiceUnavailable {
		t.Fatalf("a join over the budget: %+v, want a 503 for the buffer budget", f)
	}
	resp.body.release()
	if used := tight.used.Load() + bg.used.Load(); used != 0 {
		t.Errorf("%d bytes still counted", used)
	}
}
