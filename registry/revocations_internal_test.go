package registry

import (
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// topHeld keeps the n blocks holding most, whatever the order it sees them in.
func TestTopHeld(t *testing.T) {
	for _, tt := range []struct {
		name string
		seen []int
		want map[string]int
	}{
		{"fewer than n", []int{5, 1}, map[string]int{"g0": 5, "g1": 1}},
		{"ascending", []int{1, 2, 3, 4, 5}, map[string]int{"g2": 3, "g3": 4, "g4": 5}},
		{"descending", []int{5, 4, 3, 2, 1}, map[string]int{"g0": 5, "g1": 4, "g2": 3}},
		{"a tie with the least does not replace it", []int{2, 3, 4, 2}, map[string]int{"g0": 2, "g1": 3, "g2": 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			top := newTopHeld(3)
			for i, c := range tt.seen {
				top.add("g"+string(rune('0'+i)), c)
			}
			if diff := cmp.Diff(tt.want, maps.Clone(top.held)); diff != "" {
				t.Errorf("top (-want +got):\n%s", diff)
			}
		})
	}
}

// keepOldest keeps the revokeVictimsPerGroup oldest candidates of a block.
func TestKeepOldest(t *testing.T) {
	var g []revokeVictim
	base := epochForTest()
	for i := revokeVictimsPerGroup + 10; i > 0; i-- {
		g = keepOldest(g, revokeVictim{id: "x", recorded: base.Add(timeStep(i))})
	}
	if len(g) != revokeVictimsPerGroup {
		t.Fatalf("kept %d, want %d", len(g), revokeVictimsPerGroup)
	}
	for _, c := range g {
		if c.recorded.After(base.Add(timeStep(revokeVictimsPerGroup))) {
			t.Errorf("kept a candidate recorded at %v, newer than the %d oldest", c.recorded, revokeVictimsPerGroup)
		}
	}
}

func epochForTest() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func timeStep(i int) time.Duration { return time.Duration(i) * time.Second }
