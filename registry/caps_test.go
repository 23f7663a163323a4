package registry

import (
	"strconv"
	"testing"
	"time"
)

func TestExpirySet(t *testing.T) {
	s := newExpirySet()
	t0 := time.Unix(1e9, 0)
	reserve := func(id string, end time.Time, limit int, now time.Time) bool {
		_, why := s.reserve(id, end, "g", quota{limit: limit, perGroup: limit}, now)
		return why == placeTaken
	}
	if !reserve("a", t0.Add(time.Minute), 2, t0) || !reserve("b", t0.Add(2*time.Minute), 2, t0) {
		t.Fatal("reserve under the limit failed")
	}
	if reserve("c", t0.Add(time.Minute), 2, t0) {
		t.Fatal("reserve over the limit succeeded")
	}
	s.remove("a")
	if !reserve("c", t0.Add(time.Minute), 2, t0) {
		t.Fatal("reserve after a removal failed")
	}
	if n := s.live(t0.Add(time.Minute)); n != 1 {
		t.Fatalf("live after c's end: %d; want 1 (b)", n)
	}
	// Many reserve/remove rounds keep the heap compacted.
	for i := range 10_000 {
		id := strconv.Itoa(i)
		reserve(id, t0.Add(time.Hour), 1<<20, t0)
		s.remove(id)
	}
	if len(s.order) > 2*len(s.m)+1024+1 {
		t.Fatalf("heap holds %d entries for %d live ids", len(s.order), len(s.m))
	}
}
