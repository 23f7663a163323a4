package registry

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/registry/limits"
)

// oldestVictims keeps the limits.RevokeVictimCount oldest candidates, whatever the order it sees
// them in.
func TestOldestVictims(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 3*limits.RevokeVictimCount).Draw(t, "n")
		perm := rapid.Permutation(seq(n)).Draw(t, "order")
		var h oldestVictims
		for _, i := range perm {
			h.keep(revokeVictim{id: "x", recorded: epochForTest().Add(time.Duration(i) * time.Second)})
		}
		if want := min(n, limits.RevokeVictimCount); len(h) != want {
			t.Fatalf("kept %d of %d; want %d", len(h), n, want)
		}
		for _, c := range h {
			if c.recorded.Sub(epochForTest()) >= time.Duration(limits.RevokeVictimCount)*time.Second {
				t.Fatalf("kept a candidate recorded at %v, newer than the %d oldest", c.recorded, limits.RevokeVictimCount)
			}
		}
	})
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func epochForTest() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
