package budget

import (
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
)

// TestFailureTableBounded: a full table forgets an entry to make room, never hands a new key
// another's count, and forgets first what refuses no one, then what ended, then the least
// recently failed.
func TestFailureTableBounded(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const window, threshold, max = time.Minute, 3, 4
	steps := []struct {
		name string
		run  func(tb *failureTable)
		key  string
		at   time.Duration
		want int
	}{
		{"a new key in a full table starts at one", func(tb *failureTable) {
			for i := range max {
				for range threshold {
					tb.add(fmt.Sprint("spent-", i), t0)
				}
			}
			tb.add("new", t0)
		}, "new", 0, 1},
		{"an untracked key is fresh", func(tb *failureTable) {
			for i := range 10 * max {
				tb.add(fmt.Sprint("k", i), t0)
			}
		}, "never-seen", 0, 0},
		{"entries below threshold go first", func(tb *failureTable) {
			for range threshold {
				tb.add("over", t0)
			}
			for i := range 10 * max {
				tb.add(fmt.Sprint("below-", i), t0.Add(time.Second))
			}
		}, "over", time.Second, threshold},
		{"an ended entry over threshold goes before a live one below", func(tb *failureTable) {
			for range threshold {
				tb.add("old-over", t0)
			}
			for i := range max - 1 {
				tb.add(fmt.Sprint("below-", i), t0.Add(window))
			}
			tb.add("new", t0.Add(window))
		}, "below-0", window, 1},
		{"when all are over threshold, the least recently failed goes", func(tb *failureTable) {
			for i := range max {
				for range threshold {
					tb.add(fmt.Sprint("over-", i), t0.Add(time.Duration(i)*time.Second))
				}
			}
			tb.add("over-0", t0.Add(10*time.Second)) // over-0 failed last now
			for range threshold {
				tb.add("new", t0.Add(11*time.Second))
			}
		}, "over-0", 11 * time.Second, threshold + 1},
		{"the least recently failed was the one forgotten", func(tb *failureTable) {
			for i := range max {
				for range threshold {
					tb.add(fmt.Sprint("over-", i), t0.Add(time.Duration(i)*time.Second))
				}
			}
			tb.add("over-0", t0.Add(10*time.Second))
			tb.add("new", t0.Add(11*time.Second))
		}, "over-1", 11 * time.Second, 0},
		{"a window ends", func(tb *failureTable) {
			tb.add("k", t0)
			tb.add("k", t0)
		}, "k", window, 0},
		{"a failure after the window starts a new one", func(tb *failureTable) {
			tb.add("k", t0)
			tb.add("k", t0)
			tb.add("k", t0.Add(window))
		}, "k", window, 1},
	}
	for _, s := range steps {
		tb := newFailureTable(window, threshold, max)
		s.run(tb)
		if got := tb.count(s.key, t0.Add(s.at)); got != s.want {
			t.Errorf("%s: count(%s) = %d, want %d", s.name, s.key, got, s.want)
		}
		if n := tb.len(); n > max {
			t.Errorf("%s: %d entries, bound %d", s.name, n, max)
		}
	}
}

// TestNodeBudgetKey: every spelling of one key counts under one budget.
func TestNodeBudgetKey(t *testing.T) {
	var k didkey.PublicKey
	k[0] = 7
	want := k.ShortBody()
	for _, f := range []didkey.Form{didkey.FormShort, didkey.FormFallback, didkey.FormFull} {
		d, err := didkey.NodeDID(k, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := NodeKey(d); got != want {
			t.Errorf("%s counts under %q, want %q", d, got, want)
		}
	}
}

// TestNodeFailuresFlooded: strangers filling both tables with other nodes do not make the
// node's budget refuse an address that never failed on it, and the tables stay bounded.
func TestNodeFailuresFlooded(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := NewNodeFailures(64, 128)
	for i := range binding.ResolveNodeFailureLimit {
		f.Fail("target", fmt.Sprint("stranger-", i), now)
	}
	if !f.Refuses("target", "stranger-0", now) || f.Refuses("target", "honest", now) {
		t.Fatal("the node's budget must refuse the address that failed and only it")
	}
	for i := range 10_000 {
		f.Fail(fmt.Sprint("node-", i), fmt.Sprint("flood-", i), now)
		if f.Refuses("target", "honest", now) || f.Refuses(fmt.Sprint("node-", i), "honest", now) {
			t.Fatalf("after %d flooding failures an honest address is refused", i)
		}
	}
	if f.byNode.len() > 64 || f.byPair.len() > 128 {
		t.Fatalf("tables hold %d and %d entries, bounds 64 and 128", f.byNode.len(), f.byPair.len())
	}
}
