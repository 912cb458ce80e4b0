package router

import (
	"math"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// epoch is a time of day on a whole second, where the budget's buckets begin.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// askRetries counts a request and asks the budget for n retries of it, as a call does (the
// first one refused ends it); it reports how many were granted.
func askRetries(b *retryBudget, n int) int {
	b.request()
	for i := range n {
		if !b.tryRetry() {
			return i
		}
	}
	return n
}

// TestRetryBudgetGrantsEveryRetryAtLowLoad sends a request a second, each failing and asking
// for 2 retries, to a fresh budget: every retry is granted, from the first request on.
func TestRetryBudgetGrantsEveryRetryAtLowLoad(t *testing.T) {
	clock := &fakeClock{now: epoch}
	b := newStepRetryBudget(clock.Now, nil)
	for i := range 60 {
		if got := askRetries(b, 2); got != 2 {
			t.Fatalf("request %d (one a second) was granted %d retries of 2", i+1, got)
		}
		clock.Advance(time.Second)
	}
}

// TestRetryBudgetCapsAStorm sends 1000 requests a second for 30 s, each failing and asking for
// 3 retries: over every 10 s the retries granted stay within 20% of the requests plus 10 a
// second, far below the retries asked for, yet reach that bound.
func TestRetryBudgetCapsAStorm(t *testing.T) {
	const (
		seconds   = 30
		perSecond = 1000
		asked     = 3
	)
	clock := &fakeClock{now: epoch}
	b := newStepRetryBudget(clock.Now, nil)
	var granted [seconds]int
	for s := range seconds {
		for range perSecond {
			granted[s] += askRetries(b, asked)
			clock.Advance(time.Second / perSecond)
		}
	}
	window := int(retryBudgetWindow / time.Second)
	bound := int(DefaultRetryRatio*float64(window*perSecond) + DefaultRetryMinPerSecond*float64(window))
	total := 0
	for s := range seconds {
		total += granted[s]
		if s < window-1 {
			continue
		}
		inWindow := 0
		for _, g := range granted[s-window+1 : s+1] {
			inWindow += g
		}
		if inWindow > bound {
			t.Errorf("seconds %d–%d: %d retries granted, over 20%% of %d requests + 10 a second, %d", s-window+1, s+1,
				inWindow, window*perSecond, bound)
		}
		if inWindow < bound*9/10 {
			t.Errorf("seconds %d–%d: %d retries granted, well under the bound of %d", s-window+1, s+1, inWindow, bound)
		}
	}
	if all := seconds * perSecond * asked; total > all/10 {
		t.Errorf("%d retries granted of the %d asked for, want at most a tenth", total, all)
	}
}

// TestRetryBudgetWithoutAFloorFollowsTheRatioOnly checks that MinPerSecond 0 leaves only the
// ratio: no retry for a step's first requests, one for every five.
func TestRetryBudgetWithoutAFloorFollowsTheRatioOnly(t *testing.T) {
	clock := &fakeClock{now: epoch}
	b := newStepRetryBudget(clock.Now, &RetryBudget{Ratio: DefaultRetryRatio, MinPerSecond: 0})
	for i := range 4 {
		if got := askRetries(b, 2); got != 0 {
			t.Fatalf("request %d: %d retries granted with no floor and under 5 requests", i+1, got)
		}
	}
	if got := askRetries(b, 2); got != 1 {
		t.Fatalf("request 5: %d retries granted, want 1 (20%% of 5)", got)
	}
	for range 95 {
		b.request()
	}
	allowed := 0
	for b.tryRetry() {
		allowed++
	}
	if allowed != 19 {
		t.Fatalf("100 requests allow %d more retries after the first, want 20 in all", allowed)
	}
	// Once the requests have left the window, nothing is allowed.
	clock.Advance(retryBudgetWindow)
	if b.tryRetry() {
		t.Fatal("a retry allowed with no floor and no requests in the window")
	}
}

func TestRetryBudgetForgetsWhatLeftTheWindow(t *testing.T) {
	clock := &fakeClock{now: epoch}
	b := newStepRetryBudget(clock.Now, nil)
	for range 100 {
		b.request()
	}
	allowed := 0
	for b.tryRetry() {
		allowed++
	}
	if allowed != 120 {
		t.Fatalf("100 requests allow %d retries, want 20 + 100", allowed)
	}
	// 9.9 s later the requests still count, and the retries too.
	clock.Advance(9900 * time.Millisecond)
	if b.tryRetry() {
		t.Fatal("a retry allowed within the window after the budget was used")
	}
	// At 10 s the first second has left the window: only the floor is left.
	clock.Advance(100 * time.Millisecond)
	for i := range 100 {
		if !b.tryRetry() {
			t.Fatalf("retry %d of the floor refused", i+1)
		}
	}
	if b.tryRetry() {
		t.Fatal("a 101st retry allowed with no requests in the window")
	}
}

// TestRetryBudgetTakesItsConfiguration checks a budget of another ratio and floor, and that
// none (nil) is the default.
func TestRetryBudgetTakesItsConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		rb   *RetryBudget
		want int // retries allowed after 50 requests within one second
	}{
		{"default", nil, 10 + 100},
		{"half a retry a second", &RetryBudget{Ratio: 0.2, MinPerSecond: 0.5}, 10 + 5},
		{"ratio 0.5, floor 1", &RetryBudget{Ratio: 0.5, MinPerSecond: 1}, 25 + 10},
		{"no retries", &RetryBudget{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newStepRetryBudget((&fakeClock{now: epoch}).Now, tc.rb)
			for range 50 {
				b.request()
			}
			allowed := 0
			for b.tryRetry() {
				allowed++
			}
			if allowed != tc.want {
				t.Errorf("50 requests allow %d retries, want %d", allowed, tc.want)
			}
		})
	}
}

func TestRetryBudgetValidate(t *testing.T) {
	if err := DefaultRetryBudget().Validate(); err != nil {
		t.Errorf("the default budget: %v", err)
	}
	if err := (RetryBudget{}).Validate(); err != nil {
		t.Errorf("a budget of zeros: %v", err)
	}
	for _, rb := range []RetryBudget{
		{Ratio: 0.2, MinPerSecond: -1},
		{Ratio: -0.1, MinPerSecond: 10},
		{Ratio: 0.2, MinPerSecond: math.NaN()},
		{Ratio: math.Inf(1), MinPerSecond: 10},
	} {
		if err := rb.Validate(); err == nil {
			t.Errorf("%+v validates", rb)
		}
		if _, err := New(config.Config{Steps: []config.Step{{Name: "a", URL: "http://127.0.0.1:1/"}}}, Options{RetryBudget: &rb}); err == nil {
			t.Errorf("New took the budget %+v", rb)
		}
	}
}
