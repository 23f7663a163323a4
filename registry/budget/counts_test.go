package budget

import (
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestWindowCountsFullTableTreatsNewKeysAsFresh: a full table charges no key with another's
// events; it forgets the least useful entry, and keeps the one that keeps being refused.
func TestWindowCountsFullTableTreatsNewKeysAsFresh(t *testing.T) {
	const max = 64
	w := NewWindow(time.Minute, max)
	now := time.Unix(1e9, 0)
	// A key at its budget, refused again and again while strangers fill the table.
	for range 5 {
		w.Add("spender", now)
	}
	for i := range 10 * max {
		w.Add("stranger "+strconv.Itoa(i), now)
		if w.TakeBelow("spender", 5, now) {
			t.Fatalf("spender over its budget was let through after %d strangers", i)
		}
	}
	if n := w.Len(); n != max {
		t.Fatalf("table holds %d keys; want its bound %d", n, max)
	}
	if n := w.Count("honest", now); n != 0 {
		t.Fatalf("an untracked key counts %d; want 0", n)
	}
	if n := w.Add("honest", now); n != 1 {
		t.Fatalf("an untracked key's first event counts %d; want 1", n)
	}
	if n := w.Count("spender", now); n != 5 {
		t.Fatalf("spender's count was forgotten: %d", n)
	}
}

// TestWindowCountsEvictsEndedWindowsFirst: among the least recently used, an entry whose
// window ended goes before one that still counts.
func TestWindowCountsEvictsEndedWindowsFirst(t *testing.T) {
	w := NewWindow(time.Minute, 2)
	t0 := time.Unix(1e9, 0)
	w.Add("old", t0)
	for range 3 {
		w.Add("busy", t0.Add(30*time.Second))
	}
	// At t0+61s old's window ended; busy's has not. busy is more recently used anyway,
	// so check the rule with old touched last.
	w.Count("old", t0.Add(30*time.Second))
	w.Add("new", t0.Add(61*time.Second))
	if w.Count("busy", t0.Add(61*time.Second)) != 3 {
		t.Fatal("the entry still counting was forgotten before the one whose window ended")
	}
}

// TestWindowCountsEvictsFewestEvents: with every window running, the entry with the fewest
// events among the least recently used goes.
func TestWindowCountsEvictsFewestEvents(t *testing.T) {
	w := NewWindow(time.Minute, 3)
	now := time.Unix(1e9, 0)
	for range 4 {
		w.Add("heavy", now)
	}
	w.Add("light", now)
	w.Add("medium", now)
	w.Add("medium", now)
	w.Add("new", now)
	if w.Count("light", now) != 0 || w.Count("heavy", now) != 4 || w.Count("medium", now) != 2 {
		t.Fatalf("wrong entry forgotten: heavy %d medium %d light %d", w.Count("heavy", now), w.Count("medium", now), w.Count("light", now))
	}
}

// TestWindowCountsProperties: whatever the sequence of events, the table never holds more
// than its bound, and a tracked key's count is never above the events it was given.
func TestWindowCountsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(1, 8).Draw(t, "max")
		w := NewWindow(time.Minute, max)
		now := time.Unix(1e9, 0)
		given := map[string]int{}
		for _, k := range rapid.SliceOf(rapid.StringMatching(`[a-e]`)).Draw(t, "keys") {
			now = now.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "step")) * time.Second)
			w.Add(k, now)
			given[k]++
			if w.Len() > max {
				t.Fatalf("table holds %d keys over its bound %d", w.Len(), max)
			}
			for key, n := range given {
				if c := w.Count(key, now); c > n {
					t.Fatalf("key %s counts %d, was given %d", key, c, n)
				}
			}
		}
	})
}
