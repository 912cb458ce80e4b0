package router

import (
	"errors"
	"io"
	"sync/atomic"
)

// minBufferBytes is the first allocation for a body of unknown length.
const minBufferBytes = 32 << 10

var (
	errBodyTooLarge   = errors.New("body exceeds maxBodyBytes")
	errBudgetExceeded = errors.New("the router holds maxBufferedBytes of bodies already")
)

// budget bounds the bytes of body buffers all requests in flight hold together. It never
// waits: a request that does not fit is refused, so requests holding part of the budget
// cannot wait on each other.
type budget struct {
	limit int64
	used  atomic.Int64
}

func (b *budget) tryAcquire(n int64) bool {
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

func (b *budget) release(n int64) { b.used.Add(-n) }

// buffer is a body held in memory, counted against a budget until released.
type buffer struct {
	data   []byte
	budget *budget
	held   int64
}

// Bytes is the body.
func (b *buffer) Bytes() []byte { return b.data }

// release gives the buffer's bytes back to the budget; the buffer must not be used after.
func (b *buffer) release() {
	if b == nil || b.budget == nil {
		return
	}
	b.budget.release(b.held)
	b.data, b.held, b.budget = nil, 0, nil
}

// grow makes room for at least one more byte, up to limit, counting it against the budget.
func (b *buffer) grow(limit int64) error {
	size := int64(cap(b.data)) * 2
	size = max(size, minBufferBytes)
	size = min(size, limit)
	if !b.budget.tryAcquire(size - b.held) {
		return errBudgetExceeded
	}
	data := make([]byte, len(b.data), size)
	copy(data, b.data)
	b.data, b.held = data, size
	return nil
}

// readBody reads r whole into a buffer of at most limit bytes. size is the announced length
// (-1 when unknown): it refuses a body over limit at once and bounds the buffer, but the
// buffer, and its charge on the budget, grow only as bytes arrive (doubling from
// minBufferBytes), so that a caller that announces a large body and sends little holds little.
// A body longer than limit is errBodyTooLarge, one the budget cannot hold errBudgetExceeded.
func readBody(r io.Reader, size, limit int64, bg *budget) (*buffer, error) {
	if size > limit {
		return nil, errBodyTooLarge
	}
	buf := &buffer{budget: bg}
	var probe [1]byte
	for {
		if len(buf.data) == cap(buf.data) {
			// Full (or nothing allocated yet): read one byte to know whether the body goes on.
			n, err := io.ReadFull(r, probe[:])
			if n == 0 {
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					return buf, nil
				}
				buf.release()
				return nil, err
			}
			if int64(len(buf.data)) >= limit {
				buf.release()
				return nil, errBodyTooLarge
			}
			// A body of known length needs no more room than that length.
			target := limit
			if int64(len(buf.data)) < size {
				target = size
			}
			if err := buf.grow(target); err != nil {
				buf.release()
				return nil, err
			}
			buf.data = append(buf.data, probe[0])
			continue
		}
		n, err := r.Read(buf.data[len(buf.data):cap(buf.data)])
		buf.data = buf.data[:len(buf.data)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			buf.release()
			return nil, err
		}
	}
}
