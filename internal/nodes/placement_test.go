package nodes

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	ready := func(since int) Health { return Health{State: StateReady, Since: ago(since)} }
	down := func(since int) Health { return Health{State: StateNotReady, Since: ago(since), Detail: "is not ready"} }
	cordoned := func(since int) Health {
		return Health{State: StateUnschedulable, Since: ago(since), Detail: "is ready but cordoned"}
	}
	auto := Policy{After: 60 * time.Second, FailbackAfter: 300 * time.Second, Failback: true}
	manual := Policy{After: 60 * time.Second, FailbackAfter: 300 * time.Second}
	abc := []string{"a", "b", "c"}

	tests := []struct {
		name       string
		candidates []string
		current    string
		health     map[string]Health
		policy     Policy
		want       Decision
	}{
		{"no location: nothing to decide", nil, "", nil, auto,
			Decision{Move: MoveNone}},
		{"ready location stays", abc, "a", map[string]Health{"a": ready(10), "b": ready(1000)}, auto,
			Decision{Node: "a", From: "a", Move: MoveNone}},
		{"no Deployment yet counts as the location", abc, "", map[string]Health{"a": ready(10)}, auto,
			Decision{Node: "a", Move: MoveNone}},
		{"no Deployment yet and a missing location start on the first ready fallback", abc, "", map[string]Health{"b": ready(10)}, auto,
			Decision{Node: "b", Move: MoveFailover}},
		{"no Deployment yet and a not ready location wait there", abc, "", map[string]Health{"a": down(20), "b": ready(10)}, auto,
			Decision{Node: "a", Move: MoveWaiting, RequeueAfter: 40 * time.Second}},
		{"a current node the spec no longer names moves to the location", abc, "z", map[string]Health{"a": ready(10), "z": ready(10)}, auto,
			Decision{Node: "a", From: "z", Move: MoveRelocate}},
		{"a current node the spec no longer names moves to the first ready candidate", abc, "z", map[string]Health{"a": down(10), "b": cordoned(10), "c": ready(1), "z": ready(10)}, manual,
			Decision{Node: "c", From: "z", Move: MoveRelocate}},
		{"a current node the spec no longer names moves to the location when no candidate is ready", abc, "z", map[string]Health{"a": down(10), "z": ready(10)}, auto,
			Decision{Node: "a", From: "z", Move: MoveRelocate}},
		{"not ready for less than After waits for the rest", abc, "a", map[string]Health{"a": down(20), "b": ready(1000)}, auto,
			Decision{Node: "a", From: "a", Move: MoveWaiting, RequeueAfter: 40 * time.Second}},
		{"not ready for After fails over to the first ready fallback", abc, "a", map[string]Health{"a": down(60), "b": ready(1000), "c": ready(1000)}, auto,
			Decision{Node: "b", From: "a", Move: MoveFailover}},
		{"a not ready fallback is skipped", abc, "a", map[string]Health{"a": down(100), "b": down(1000), "c": ready(5)}, auto,
			Decision{Node: "c", From: "a", Move: MoveFailover}},
		{"a cordoned fallback is no target", abc, "a", map[string]Health{"a": down(100), "b": cordoned(1000), "c": ready(5)}, auto,
			Decision{Node: "c", From: "a", Move: MoveFailover}},
		{"a missing fallback is no target", abc, "a", map[string]Health{"a": down(100), "c": ready(5)}, auto,
			Decision{Node: "c", From: "a", Move: MoveFailover}},
		{"no node ready: the step stays", abc, "a", map[string]Health{"a": down(100), "b": down(100)}, auto,
			Decision{Node: "a", From: "a", Move: MoveNoNodeReady}},
		{"a missing current node fails over at once", abc, "a", map[string]Health{"a": {State: StateMissing}, "b": ready(1)}, auto,
			Decision{Node: "b", From: "a", Move: MoveFailover}},
		{"a current node absent from the health map is missing", abc, "a", map[string]Health{"b": ready(1)}, auto,
			Decision{Node: "b", From: "a", Move: MoveFailover}},
		{"a cordoned current node keeps the step", abc, "a", map[string]Health{"a": cordoned(100), "b": ready(1000)}, auto,
			Decision{Node: "a", From: "a", Move: MoveNone}},
		{"a dead fallback moves the step to the location when it is ready", abc, "b", map[string]Health{"a": ready(10), "b": down(60)}, auto,
			Decision{Node: "a", From: "b", Move: MoveFailover}},
		{"a dead fallback moves the step down the list", abc, "b", map[string]Health{"a": down(500), "b": down(60), "c": ready(1)}, auto,
			Decision{Node: "c", From: "b", Move: MoveFailover}},
		{"failback waits until the location was ready for FailbackAfter", abc, "b", map[string]Health{"a": ready(100), "b": ready(1000)}, auto,
			Decision{Node: "b", From: "b", Move: MoveNone, RequeueAfter: 200 * time.Second}},
		{"failback after FailbackAfter", abc, "b", map[string]Health{"a": ready(300), "b": ready(1000)}, auto,
			Decision{Node: "a", From: "b", Move: MoveFailback}},
		{"failback to the most preferred node that waited long enough", abc, "c", map[string]Health{"a": ready(10), "b": ready(400), "c": ready(1000)}, auto,
			Decision{Node: "b", From: "c", Move: MoveFailback}},
		{"failback goes to the location before a fallback that also waited", abc, "c", map[string]Health{"a": ready(400), "b": ready(400), "c": ready(1000)}, auto,
			Decision{Node: "a", From: "c", Move: MoveFailback}},
		{"no failback to a cordoned location", abc, "b", map[string]Health{"a": cordoned(1000), "b": ready(1000)}, auto,
			Decision{Node: "b", From: "b", Move: MoveNone}},
		{"a dead fallback returns at once to a location ready for FailbackAfter", abc, "b", map[string]Health{"a": ready(300), "b": down(1)}, auto,
			Decision{Node: "a", From: "b", Move: MoveFailback}},
		{"a dead fallback returns at once to the most preferred node ready for FailbackAfter", abc, "c", map[string]Health{"a": ready(10), "b": ready(400), "c": down(1)}, auto,
			Decision{Node: "b", From: "c", Move: MoveFailback}},
		{"a dead fallback waits for whichever timer expires first", abc, "b", map[string]Health{"a": ready(280), "b": down(10)}, auto,
			Decision{Node: "b", From: "b", Move: MoveWaiting, RequeueAfter: 20 * time.Second}},
		{"a dead fallback with Manual failback waits for After", abc, "b", map[string]Health{"a": ready(1000), "b": down(10)}, manual,
			Decision{Node: "b", From: "b", Move: MoveWaiting, RequeueAfter: 50 * time.Second}},
		{"manual failback stays", abc, "b", map[string]Health{"a": ready(100000), "b": ready(1000)}, manual,
			Decision{Node: "b", From: "b", Move: MoveNone}},
		{"manual failback with the annotation returns at once", abc, "b", map[string]Health{"a": ready(1), "b": ready(1000)},
			Policy{After: time.Minute, FailbackAfter: time.Hour, FailbackNow: true},
			Decision{Node: "a", From: "b", Move: MoveFailback}},
		{"manual failback with the annotation returns at once from a dead fallback", abc, "b", map[string]Health{"a": ready(1), "b": down(10)},
			Policy{After: time.Minute, FailbackAfter: time.Hour, FailbackNow: true},
			Decision{Node: "a", From: "b", Move: MoveFailback}},
		{"manual failback still fails over", abc, "b", map[string]Health{"a": down(1000), "b": down(61), "c": ready(1)}, manual,
			Decision{Node: "c", From: "b", Move: MoveFailover}},
		{"a node that never reported Ready counts from its creation", abc, "a", map[string]Health{"a": {State: StateNotReady, Since: ago(30)}, "b": ready(1)}, auto,
			Decision{Node: "a", From: "a", Move: MoveWaiting, RequeueAfter: 30 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.candidates, tc.current, tc.health, tc.policy, now)
			if got != tc.want {
				t.Errorf("Decide() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecideFlappingNeverBounces replays a node that goes down and comes back every 20 s, for
// an hour, and decides at every second: the step never leaves it, and a step that failed over
// never returns to it.
func TestDecideFlappingNeverBounces(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	policy := Policy{After: 60 * time.Second, FailbackAfter: 300 * time.Second, Failback: true}
	flapping := func(now time.Time) Health {
		elapsed := now.Sub(start)
		since := start.Add(elapsed.Truncate(20 * time.Second))
		if int(elapsed/(20*time.Second))%2 == 0 {
			return Health{State: StateNotReady, Since: since}
		}
		return Health{State: StateReady, Since: since}
	}
	stable := Health{State: StateReady, Since: start.Add(-time.Hour)}
	for s := 0; s < 3600; s++ {
		now := start.Add(time.Duration(s) * time.Second)
		health := map[string]Health{"a": flapping(now), "b": stable}
		if d := Decide([]string{"a", "b"}, "a", health, policy, now); d.Node != "a" {
			t.Fatalf("at %ds the step on the flapping node moved: %+v", s, d)
		}
		if d := Decide([]string{"a", "b"}, "b", health, policy, now); d.Node != "b" {
			t.Fatalf("at %ds the step on the fallback went back to the flapping node: %+v", s, d)
		}
	}
}

// TestDecideIsRestartSafe checks that the decision depends on the world only: the requeue it
// asks for lands where the next decision moves the step.
func TestDecideIsRestartSafe(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	policy := Policy{After: 60 * time.Second, FailbackAfter: 300 * time.Second, Failback: true}
	health := map[string]Health{"a": {State: StateNotReady, Since: now.Add(-45 * time.Second)}, "b": {State: StateReady, Since: now.Add(-time.Hour)}}
	first := Decide([]string{"a", "b"}, "a", health, policy, now)
	if first.Move != MoveWaiting || first.RequeueAfter != 15*time.Second {
		t.Fatalf("first decision %+v, want waiting 15s", first)
	}
	again := Decide([]string{"a", "b"}, "a", health, policy, now.Add(first.RequeueAfter))
	if again.Move != MoveFailover || again.Node != "b" {
		t.Fatalf("decision when the timer expires %+v, want failover to b", again)
	}
}
