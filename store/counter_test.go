package store_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
)

func TestCounterPerCode(t *testing.T) {
	const limit, window = binding.ResolveFailureLimit, binding.ResolveWindow
	var c store.Counter
	if c.Blocked(counterStart, limit, window) {
		t.Fatal("the zero counter blocks")
	}
	// Five failures within the window, the first at counterStart.
	for i := range limit {
		now := counterStart.Add(time.Duration(i) * 100 * time.Second)
		if c.Blocked(now, limit, window) {
			t.Fatalf("attempt %d blocked", i+1)
		}
		c = c.Fail(now, window)
	}
	if c.Count != limit || !c.Start.Equal(counterStart) {
		t.Fatalf("counter %+v, want %d failures from %v", c, limit, counterStart)
	}
	// The sixth attempt is refused until 600 s after the first failure.
	for _, now := range []time.Time{counterStart.Add(401 * time.Second), counterStart.Add(599 * time.Second), counterStart.Add(599*time.Second + 999*time.Millisecond)} {
		if !c.Blocked(now, limit, window) {
			t.Errorf("not blocked at +%v", now.Sub(counterStart))
		}
	}
	end := counterStart.Add(window)
	if c.Blocked(end, limit, window) {
		t.Error("still blocked when the window has passed")
	}
	// A failure after the window starts a new one.
	c2 := c.Fail(end, window)
	if c2.Count != 1 || !c2.Start.Equal(end) {
		t.Errorf("failure after the window: %+v, want a fresh count from %v", c2, end)
	}
	if c.Count != limit {
		t.Error("Fail changed its receiver")
	}
}

func TestCounterPerAddress(t *testing.T) {
	var c store.Counter
	for i := range binding.DefaultAddressResolveLimit {
		if c.Blocked(counterStart, binding.DefaultAddressResolveLimit, binding.ResolveWindow) {
			t.Fatalf("blocked after %d failures", i)
		}
		c = c.Fail(counterStart.Add(time.Duration(i)*time.Second), binding.ResolveWindow)
	}
	if !c.Blocked(counterStart.Add(time.Minute), binding.DefaultAddressResolveLimit, binding.ResolveWindow) {
		t.Fatal("not blocked after the limit")
	}
}

func TestCounterEdges(t *testing.T) {
	full := store.Counter{Count: math.MaxInt, Start: counterStart}
	if got := full.Fail(counterStart.Add(time.Second), time.Hour); got.Count != math.MaxInt {
		t.Errorf("count overflowed to %d", got.Count)
	}
	broken := store.Counter{Count: -3, Start: counterStart}
	if got := broken.Fail(counterStart.Add(time.Second), time.Hour); got.Count != 1 {
		t.Errorf("a negative count continued at %d", got.Count)
	}
	if got := (store.Counter{}).Fail(counterStart.Add(500*time.Millisecond), time.Hour); !got.Start.Equal(counterStart) {
		t.Errorf("window starts at %v, want the whole second %v", got.Start, counterStart)
	}
}

// counterStart is a whole second, so that a window starts exactly there.
var counterStart = time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)

// Failed resolves are counted per code in a window that starts at the first failure; the
// sixth attempt within it is refused.
func ExampleCounter() {
	start := time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)
	var c store.Counter
	for i := range binding.ResolveFailureLimit {
		c = c.Fail(start.Add(time.Duration(i)*time.Minute), binding.ResolveWindow)
	}
	for _, at := range []time.Duration{5 * time.Minute, 10 * time.Minute} {
		fmt.Printf("+%v blocked=%v\n", at, c.Blocked(start.Add(at), binding.ResolveFailureLimit, binding.ResolveWindow))
	}
	// Output:
	// +5m0s blocked=true
	// +10m0s blocked=false
}
