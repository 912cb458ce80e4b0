package router

import (
	"sync"
	"time"
)

// A step's retries are budgeted: a retry is allowed only while the retries of the last
// retryBudgetWindow stay within retryBudgetRatio of the step's requests in that window plus
// retryBudgetFloor, so that a failing step gets a bounded share of extra load, never a
// multiple of it.
const (
	retryBudgetWindow  = 10 * time.Second
	retryBudgetRatio   = 0.2
	retryBudgetFloor   = 3
	retryBudgetBuckets = 10
)

// retryBudget counts a step's requests and retries over the last retryBudgetWindow, in
// buckets of a tenth of it.
type retryBudget struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets [retryBudgetBuckets]retryBucket
}

// retryBucket counts one slice of the window; slice numbers it (time since the epoch divided
// by the bucket's length), so that a bucket of an older slice reads as empty.
type retryBucket struct {
	slice    int64
	requests int64
	retries  int64
}

func newRetryBudget(now func() time.Time) *retryBudget { return &retryBudget{now: now} }

// bucket is the current slice's bucket, emptied when it held an older slice.
func (b *retryBudget) bucket(slice int64) *retryBucket {
	bk := &b.buckets[slice%retryBudgetBuckets]
	if bk.slice != slice {
		*bk = retryBucket{slice: slice}
	}
	return bk
}

func (b *retryBudget) currentSlice() int64 {
	return b.now().UnixNano() / int64(retryBudgetWindow/retryBudgetBuckets)
}

// request counts a request to the step (its first attempt).
func (b *retryBudget) request() {
	slice := b.currentSlice()
	b.mu.Lock()
	b.bucket(slice).requests++
	b.mu.Unlock()
}

// tryRetry counts a retry and reports true when the budget allows it, and false (counting
// nothing) when it does not.
func (b *retryBudget) tryRetry() bool {
	slice := b.currentSlice()
	b.mu.Lock()
	defer b.mu.Unlock()
	var requests, retries int64
	for i := range b.buckets {
		if bk := &b.buckets[i]; bk.slice > slice-retryBudgetBuckets && bk.slice <= slice {
			requests += bk.requests
			retries += bk.retries
		}
	}
	if float64(retries+1) > retryBudgetRatio*float64(requests)+retryBudgetFloor {
		return false
	}
	b.bucket(slice).retries++
	return true
}
