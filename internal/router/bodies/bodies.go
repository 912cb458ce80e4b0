// Package bodies holds the router's request and answer bodies in memory: a Buffer holds one
// body in blocks that released bodies hand on to the next ones, and a Budget bounds the bytes
// all bodies in flight hold together. The router's engine reads and builds bodies with it, and
// its client to the steps sends them (NewRequest, Buffer.WriteTo).
package bodies

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// BlockBytes is the size of the blocks a body is held in. A body is read into blocks of this
// size (its last block, or a body announced shorter, into an array of its own size), so that
// it grows without copying and a released body's blocks serve the next bodies.
const BlockBytes = 32 << 10

// block is one block of a body.
type block = [BlockBytes]byte

// blocks gives out the blocks of bodies and takes back those of released bodies.
type blocks interface {
	get() *block
	put(*block)
}

// blockPool is the router's blocks: those of released bodies serve the next ones, and the
// garbage collector frees those left unused.
type blockPool struct{ pool sync.Pool }

func (p *blockPool) get() *block {
	if b, ok := p.pool.Get().(*block); ok {
		return b
	}
	return new(block)
}

func (p *blockPool) put(b *block) { p.pool.Put(b) }

// sharedBlocks is the blocks of every budget that names none.
var sharedBlocks = &blockPool{}

var (
	// ErrTooLarge is a body longer than the limit it is read within.
	ErrTooLarge = errors.New("body exceeds maxBodyBytes")
	// ErrBudgetExceeded is a body, or a copy or decoding of one, that the budget cannot hold.
	ErrBudgetExceeded = errors.New("the router holds maxBufferedBytes of bodies already")
	// ErrReleased is a read of a body after it was released and its last reader closed.
	ErrReleased = errors.New("the body was released")
)

// Budget bounds the bytes of body buffers all requests in flight hold together. It never
// waits: a request that does not fit is refused, so requests holding part of the budget
// cannot wait on each other.
type Budget struct {
	limit int64
	used  atomic.Int64
	// blocks holds the blocks of bodies (sharedBlocks when nil).
	blocks blocks
}

// NewBudget is a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

func (b *Budget) blockSource() blocks {
	if b.blocks == nil {
		return sharedBlocks
	}
	return b.blocks
}

// TryAcquire counts n more bytes and reports true when they fit, and counts nothing and
// reports false when they do not.
func (b *Budget) TryAcquire(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release gives back n bytes TryAcquire counted.
func (b *Budget) Release(n int64) { b.used.Add(-n) }

// Used is the bytes the budget counts now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Buffer is a body held in memory in chunks (each full but the last), counted against a
// budget until released. Its chunks of BlockBytes come from the budget's blocks and go back to
// them once the buffer is released and no reader of it (a step request still being sent) is
// open.
type Buffer struct {
	chunks [][]byte
	size   int64
	budget *Budget
	held   int64
	// released is set once the owner released the buffer.
	released bool
	// refs counts the owner (until release) and the open readers.
	refs atomic.Int32
}

// Len is the body's length in bytes.
func (b *Buffer) Len() int64 { return b.size }

// Bytes is the body in one slice: a body of several chunks is copied, outside the budget,
// unless Join made it one chunk first.
func (b *Buffer) Bytes() []byte {
	switch len(b.chunks) {
	case 0:
		return nil
	case 1:
		return b.chunks[0]
	}
	data := make([]byte, 0, b.size)
	for _, c := range b.chunks {
		data = append(data, c...)
	}
	return data
}

// WriteTo writes the body to w.
func (b *Buffer) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, c := range b.chunks {
		m, err := w.Write(c)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Join puts a body of several chunks into one, so that Bytes does not copy it: the copy is
// counted against the budget while both are held, then the chunks are released.
func (b *Buffer) Join() error {
	if len(b.chunks) <= 1 {
		return nil
	}
	if !b.budget.TryAcquire(b.size) {
		return ErrBudgetExceeded
	}
	data := b.Bytes()
	chunks, held := b.chunks, b.held
	b.chunks, b.held = [][]byte{data}, b.size
	b.budget.Release(held)
	if b.refs.Load() == 1 {
		// No reader has the old chunks: they can serve other bodies.
		b.recycle(chunks)
	}
	return nil
}

// Release gives the buffer's bytes back to the budget; the owner must not use the buffer
// after. Its blocks are given back when the last reader is closed. A nil buffer, or one
// released already, is left as it is.
func (b *Buffer) Release() {
	if b == nil || b.released {
		return
	}
	b.released = true
	b.budget.Release(b.held)
	b.held = 0
	b.unref()
}

func (b *Buffer) unref() {
	if b.refs.Add(-1) == 0 {
		b.recycle(b.chunks)
		b.chunks = nil
	}
}

// recycle gives the blocks among chunks back to the budget's blocks.
func (b *Buffer) recycle(chunks [][]byte) {
	src := b.budget.blockSource()
	for _, c := range chunks {
		if cap(c) == BlockBytes {
			src.put((*block)(c[:BlockBytes]))
		}
	}
}

// reader is a new reader of the body, holding its blocks until closed; nil
// once the buffer is released and its last reader closed.
func (b *Buffer) reader() *bodyReader {
	for {
		n := b.refs.Load()
		if n == 0 {
			return nil
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return &bodyReader{buf: b, chunks: b.chunks}
		}
	}
}

// bodyReader reads a buffer's body. Read and Close may be called from different goroutines (a
// transport may close a request body while it writes it): once Close returns, no Read touches
// the body's blocks again.
type bodyReader struct {
	mu     sync.Mutex
	buf    *Buffer
	chunks [][]byte
	off    int
}

// Read reads the body's next bytes.
func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		return 0, ErrReleased
	}
	n := 0
	for n < len(p) && len(r.chunks) > 0 {
		m := copy(p[n:], r.chunks[0][r.off:])
		n += m
		r.off += m
		if r.off == len(r.chunks[0]) {
			r.chunks, r.off = r.chunks[1:], 0
		}
	}
	if len(r.chunks) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// Close ends the reader; its buffer's blocks go back once the buffer is released
// and its readers closed.
func (r *bodyReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf != nil {
		r.buf.unref()
		r.buf, r.chunks = nil, nil
	}
	return nil
}

// NewRequest is a POST of body to url. Each sending of a body in blocks (the transport may
// send it again on a new connection, through GetBody) reads it through a reader of its own,
// which the transport closes once done with it: the blocks stay the body's until then, even
// when the body is released first.
func NewRequest(ctx context.Context, url string, body *Buffer) (*http.Request, error) {
	if len(body.chunks) == 1 && cap(body.chunks[0]) != BlockBytes {
		// An array of its own, never reused: the transport knows the in-memory reader, and
		// sends the headers and a short body in one packet.
		return http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body.chunks[0]))
	}
	if body.Len() == 0 {
		return http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
	}
	rd := body.reader()
	if rd == nil {
		return nil, ErrReleased
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, rd)
	if err != nil {
		_ = rd.Close()
		return nil, err
	}
	req.ContentLength = body.Len()
	req.GetBody = func() (io.ReadCloser, error) {
		if rd := body.reader(); rd != nil {
			return rd, nil
		}
		return nil, ErrReleased
	}
	return req, nil
}

// Read reads r whole into a buffer of at most limit bytes. size is the announced length
// (-1 when unknown): it refuses a body over limit at once and bounds the buffer, but the
// buffer, and its charge on the budget, grow only as bytes arrive, one chunk at a time (of
// BlockBytes, or of what is left of size or limit when that is less), so that a caller that
// announces a large body and sends little holds little. A body longer than limit is
// ErrTooLarge, one the budget cannot hold ErrBudgetExceeded.
func Read(r io.Reader, size, limit int64, bg *Budget) (*Buffer, error) {
	if size > limit {
		return nil, ErrTooLarge
	}
	buf := &Buffer{budget: bg}
	buf.refs.Store(1)
	var (
		chunk []byte // the last chunk, being filled
		probe [1]byte
	)
	for {
		if len(chunk) == cap(chunk) {
			// Full (or nothing allocated yet): read one byte to know whether the body goes on.
			n, err := io.ReadFull(r, probe[:])
			if n == 0 {
				// Only an end of file ends the body: a body cut short before its announced
				// length (io.ErrUnexpectedEOF) is an error like any other.
				if err == io.EOF {
					return buf, nil
				}
				buf.Release()
				return nil, err
			}
			if buf.size >= limit {
				buf.Release()
				return nil, ErrTooLarge
			}
			// A body of known length needs no more room than that length.
			room := limit - buf.size
			if buf.size < size {
				room = size - buf.size
			}
			if chunk, err = buf.grow(room); err != nil {
				buf.Release()
				return nil, err
			}
			chunk = append(chunk, probe[0])
			buf.chunks[len(buf.chunks)-1] = chunk
			buf.size++
			continue
		}
		n, err := r.Read(chunk[len(chunk):cap(chunk)])
		chunk = chunk[:len(chunk)+n]
		buf.chunks[len(buf.chunks)-1] = chunk
		buf.size += int64(n)
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			buf.Release()
			return nil, err
		}
	}
}

// grow adds an empty chunk of BlockBytes, or of room when that is less, counting it against
// the budget.
func (b *Buffer) grow(room int64) ([]byte, error) {
	n := min(room, BlockBytes)
	if !b.budget.TryAcquire(n) {
		return nil, ErrBudgetExceeded
	}
	b.held += n
	var chunk []byte
	if n == BlockBytes {
		chunk = b.budget.blockSource().get()[:0]
	} else {
		chunk = make([]byte, 0, n)
	}
	b.chunks = append(b.chunks, chunk)
	return chunk, nil
}

// NewBuffer is an empty buffer that Append fills, counted against bg.
func NewBuffer(bg *Budget) *Buffer {
	b := &Buffer{budget: bg}
	b.refs.Store(1)
	return b
}

// Append appends p to the body, in blocks of the budget's: ErrBudgetExceeded when they do not
// fit.
func (b *Buffer) Append(p []byte) error {
	for len(p) > 0 {
		if len(b.chunks) == 0 || len(b.chunks[len(b.chunks)-1]) == cap(b.chunks[len(b.chunks)-1]) {
			if _, err := b.grow(BlockBytes); err != nil {
				return err
			}
		}
		last := &b.chunks[len(b.chunks)-1]
		n := copy((*last)[len(*last):cap(*last)], p)
		*last = (*last)[:len(*last)+n]
		b.size += int64(n)
		p = p[n:]
	}
	return nil
}

// Write appends p to the body, as Append: it makes a Buffer an io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	if err := b.Append(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteRange appends bytes [off, off+n) of the body to dst: io.ErrUnexpectedEOF when the body
// ends before them.
func (b *Buffer) WriteRange(dst *Buffer, off, n int64) error {
	for _, c := range b.chunks {
		if n == 0 {
			return nil
		}
		if off >= int64(len(c)) {
			off -= int64(len(c))
			continue
		}
		part := c[off:min(int64(len(c)), off+n)]
		if err := dst.Append(part); err != nil {
			return err
		}
		n -= int64(len(part))
		off = 0
	}
	if n > 0 {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// Prefix is the body's first n bytes: a part of its first chunk, or a copy, outside the
// budget, when they span several (PrefixCopies).
func (b *Buffer) Prefix(n int64) []byte {
	if n == 0 {
		return nil
	}
	if !b.PrefixCopies(n) {
		return b.chunks[0][:n]
	}
	out := make([]byte, 0, n)
	for _, c := range b.chunks {
		out = append(out, c[:min(int64(len(c)), n-int64(len(out)))]...)
		if int64(len(out)) == n {
			break
		}
	}
	return out
}

// PrefixCopies reports whether Prefix(n) copies the bytes: they are not all in the first
// chunk.
func (b *Buffer) PrefixCopies(n int64) bool {
	return n > 0 && (len(b.chunks) == 0 || int64(len(b.chunks[0])) < n)
}
