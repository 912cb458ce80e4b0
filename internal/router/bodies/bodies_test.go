package bodies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"testing/iotest"
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
		{"over the limit", limit + 1, true, ErrTooLarge},
		{"over the limit, length unknown", limit + 1, false, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), tc.size)
			var r io.Reader = unsized{bytes.NewReader(data)}
			size := int64(-1)
			if tc.known {
				r, size = bytes.NewReader(data), int64(tc.size)
			}
			bg := &Budget{limit: 2 * limit}
			buf, err := Read(r, size, limit, bg)
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
				buf.Release()
			}
			if used := bg.used.Load(); used != 0 {
				t.Errorf("%d bytes still counted after release", used)
			}
		})
	}
}

func TestReadBodyRefusesWhatTheBudgetCannotHold(t *testing.T) {
	bg := &Budget{limit: 1000}
	held, err := Read(bytes.NewReader(make([]byte, 600)), 600, 1000, bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bytes.NewReader(make([]byte, 600)), 600, 1000, bg); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("second body: error %v, want ErrBudgetExceeded", err)
	}
	if _, err := Read(unsized{bytes.NewReader(make([]byte, 600))}, -1, 1000, bg); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("second body of unknown length: error %v, want ErrBudgetExceeded", err)
	}
	held.Release()
	if _, err := Read(bytes.NewReader(make([]byte, 600)), 600, 1000, bg); err != nil {
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
	const limit = 5*BlockBytes + 100
	for _, size := range []int{1, 100, BlockBytes - 1, BlockBytes, BlockBytes + 1, 3 * BlockBytes, 3*BlockBytes + 7, limit} {
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
					bg := &Budget{limit: 2 * limit, blocks: &stackBlocks{}}
					buf, err := Read(r, announced, limit, bg)
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
					case held < int64(size) || held >= int64(size)+BlockBytes || held > limit:
						t.Errorf("the budget counts %d bytes for a body of %d", held, size)
					}
					buf.Release()
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
	bg := &Budget{limit: 1 << 20, blocks: blocks}
	first, err := Read(bytes.NewReader(bytes.Repeat([]byte("a"), 3*BlockBytes)), 3*BlockBytes, 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	first.Release()
	if got := blocks.freeCount(); got != 3 {
		t.Fatalf("%d blocks given back, want 3", got)
	}
	want := bytes.Repeat([]byte("b"), BlockBytes+10)
	second, err := Read(unsized{iotest.HalfReader(bytes.NewReader(want))}, -1, 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
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
		{"several blocks", 2*BlockBytes + 1, true, 2},
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
	bg := &Budget{limit: 1 << 20, blocks: blocks}
	buf, err := Read(r, size, 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := NewRequest(context.Background(), "http://127.0.0.1:1/", buf)
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
	buf.Release()
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
	if _, err := again.Read(make([]byte, 1)); !errors.Is(err, ErrReleased) {
		t.Errorf("read after Close: %v, want ErrReleased", err)
	}
	if _, err := req.GetBody(); !errors.Is(err, ErrReleased) {
		t.Errorf("GetBody after the body was given back: %v, want ErrReleased", err)
	}
}

// TestJoinCountsTheCopy joins a body of several blocks: while both are held, the copy is
// counted; after, only the joined body.
func TestJoinCountsTheCopy(t *testing.T) {
	want := bytes.Repeat([]byte("d"), 2*BlockBytes+5)
	blocks := &stackBlocks{}
	bg := &Budget{limit: int64(len(want)) + BlockBytes, blocks: blocks}
	buf, err := Read(bytes.NewReader(want), int64(len(want)), 1<<20, bg)
	if err != nil {
		t.Fatal(err)
	}
	if err := buf.Join(); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("join over the budget: %v, want ErrBudgetExceeded", err)
	}
	if used := bg.used.Load(); used != int64(len(want)) {
		t.Errorf("the budget counts %d bytes after a refused join, want %d", used, len(want))
	}
	bg.limit = 2 * int64(len(want))
	if err := buf.Join(); err != nil {
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
	buf.Release()
	if used := bg.used.Load(); used != 0 {
		t.Errorf("%d bytes still counted after release", used)
	}
}
