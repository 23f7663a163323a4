package binding_test

import (
	"math"
	"testing"
	"time"

	"github.com/svrp/svrp/binding"
)

func TestCounterPerCode(t *testing.T) {
	const limit, window = binding.ResolveFailureLimit, binding.ResolveWindow
	var c binding.Counter
	if c.Blocked(t0, limit, window) {
		t.Fatal("the zero counter blocks")
	}
	// Five failures within the window, the first at t0.
	for i := range limit {
		now := t0.Add(time.Duration(i) * 100 * time.Second)
		if c.Blocked(now, limit, window) {
			t.Fatalf("attempt %d blocked", i+1)
		}
		c = c.Fail(now, window)
	}
	if c.Count != limit || !c.Start.Equal(t0) {
		t.Fatalf("counter %+v, want %d failures from %v", c, limit, t0)
	}
	// The sixth attempt is refused until 600 s after the first failure.
	for _, now := range []time.Time{t0.Add(401 * time.Second), t0.Add(599 * time.Second), t0.Add(599*time.Second + 999*time.Millisecond)} {
		if !c.Blocked(now, limit, window) {
			t.Errorf("not blocked at +%v", now.Sub(t0))
		}
	}
	end := t0.Add(window)
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
	var c binding.Counter
	for i := range binding.DefaultAddressResolveLimit {
		if c.Blocked(t0, binding.DefaultAddressResolveLimit, binding.ResolveWindow) {
			t.Fatalf("blocked after %d failures", i)
		}
		c = c.Fail(t0.Add(time.Duration(i)*time.Second), binding.ResolveWindow)
	}
	if !c.Blocked(t0.Add(time.Minute), binding.DefaultAddressResolveLimit, binding.ResolveWindow) {
		t.Fatal("not blocked after the limit")
	}
}

func TestCounterEdges(t *testing.T) {
	full := binding.Counter{Count: math.MaxInt, Start: t0}
	if got := full.Fail(t0.Add(time.Second), time.Hour); got.Count != math.MaxInt {
		t.Errorf("count overflowed to %d", got.Count)
	}
	broken := binding.Counter{Count: -3, Start: t0}
	if got := broken.Fail(t0.Add(time.Second), time.Hour); got.Count != 1 {
		t.Errorf("a negative count continued at %d", got.Count)
	}
	if got := (binding.Counter{}).Fail(t0.Add(500*time.Millisecond), time.Hour); !got.Start.Equal(t0) {
		t.Errorf("window starts at %v, want the whole second %v", got.Start, t0)
	}
}
