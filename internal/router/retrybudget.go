package router

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// A step's retries are budgeted: a retry is allowed only while the retries of the last
// retryBudgetWindow stay within RetryBudget.Ratio of the step's requests in that window plus
// RetryBudget.MinPerSecond for each second of it, so that a failing step gets a bounded share
// of extra load, never a multiple of it, while a step with little traffic is still retried.
const (
	retryBudgetWindow  = 10 * time.Second
	retryBudgetBuckets = 10

	// DefaultRetryRatio is the retries a step's budget allows per request (first attempt) in
	// the window, as Linkerd's retryRatio.
	DefaultRetryRatio = 0.2
	// DefaultRetryMinPerSecond is the retries per second a step's budget allows whatever its
	// traffic, as Linkerd's minRetriesPerSecond: 100 over the 10 s window.
	DefaultRetryMinPerSecond = 10
)

// RetryBudget is the bound on each step's retries: over the last 10 s, a step's retries may be
// at most Ratio times its requests (first attempts) in those 10 s, plus MinPerSecond × 10.
// Each field means what it says, 0 included: start from DefaultRetryBudget and change what
// differs.
type RetryBudget struct {
	// Ratio is the retries allowed per request (0.2: one retry for five requests).
	Ratio float64
	// MinPerSecond is the retries allowed per second whatever the traffic, so that a step with
	// few requests is still retried; 0 leaves only Ratio, so that a step's first requests get
	// no retry at all.
	MinPerSecond float64
}

// DefaultRetryBudget is Linkerd's default budget: 20% of the requests plus 10 retries per
// second.
func DefaultRetryBudget() RetryBudget {
	return RetryBudget{Ratio: DefaultRetryRatio, MinPerSecond: DefaultRetryMinPerSecond}
}

// Validate reports a field that is negative, infinite or not a number.
func (rb RetryBudget) Validate() error {
	var errs []error
	for _, f := range []struct {
		name  string
		value float64
	}{{"ratio", rb.Ratio}, {"minimum retries per second", rb.MinPerSecond}} {
		if math.IsNaN(f.value) || math.IsInf(f.value, 0) || f.value < 0 {
			errs = append(errs, fmt.Errorf("retry budget: the %s must be a number of 0 or more, not %v", f.name, f.value))
		}
	}
	return errors.Join(errs...)
}

// retryBudget counts a step's requests and retries over the last retryBudgetWindow, in
// buckets of a tenth of it.
type retryBudget struct {
	now func() time.Time
	// ratio is RetryBudget.Ratio; floor is the retries RetryBudget.MinPerSecond allows over
	// the window.
	ratio, floor float64
	mu           sync.Mutex
	buckets      [retryBudgetBuckets]retryBucket
}

// retryBucket counts one slice of the window; slice numbers it (time since the epoch divided
// by the bucket's length), so that a bucket of an older slice reads as empty.
type retryBucket struct {
	slice    int64
	requests int64
	retries  int64
}

// newStepRetryBudget is a step's budget of rb (validated), or of DefaultRetryBudget when rb
// is nil.
func newStepRetryBudget(now func() time.Time, rb *RetryBudget) *retryBudget {
	if rb == nil {
		d := DefaultRetryBudget()
		rb = &d
	}
	return &retryBudget{now: now, ratio: rb.Ratio, floor: rb.MinPerSecond * retryBudgetWindow.Seconds()}
}

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
	if float64(retries+1) > b.ratio*float64(requests)+b.floor {
		return false
	}
	b.bucket(slice).retries++
	return true
}
