package registry_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// upkeepHarness serves the registry on the memory store behind the node cache, and returns
// the memory store too: what reaches it is what the upkeep made durable.
func upkeepHarness(t *testing.T, opts ...harnessOption) (*harness, store.Store) {
	return upkeepHarnessOn(t, func(st store.Store) store.Store { return st }, opts...)
}

// upkeepHarnessOn is upkeepHarness with the registry's store wrapped by wrap.
func upkeepHarnessOn(t *testing.T, wrap func(store.Store) store.Store, opts ...harnessOption) (*harness, store.Store) {
	t.Helper()
	inner := store.NewMemory()
	cached, err := store.WithNodeCache(t.Context(), inner)
	if err != nil {
		t.Fatal(err)
	}
	st := wrap(cached)
	fast := func(c *registry.Config) { c.FlushEvery, c.SweepEvery = 5*time.Millisecond, 10*time.Millisecond }
	return startHarness(t, st, t.TempDir(), testkit.NewClock(epoch), append([]harnessOption{fast}, opts...)...), inner
}

// runUpkeep runs h's upkeep until the test ends, and checks that Run returns nil once its
// context is done.
func runUpkeep(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was done")
		}
	})
}

// eventually fails the test unless cond holds within testkit.WaitBound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testkit.WaitBound); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", testkit.WaitBound, what)
		}
	}
}

func storedNode(t *testing.T, st store.Store, k didkey.PublicKey) store.Node {
	t.Helper()
	var n store.Node
	if err := st.View(t.Context(), func(tx store.Tx) (err error) { n, err = tx.Node(k); return err }); err != nil {
		t.Fatal(err)
	}
	return n
}

func storedSession(t *testing.T, st store.Store, id string) binding.BindingSession {
	t.Helper()
	var s binding.BindingSession
	if err := st.View(t.Context(), func(tx store.Tx) (err error) { s, err = tx.BindingSession(id); return err }); err != nil {
		t.Fatal(err)
	}
	return s
}

// Run is the whole upkeep an embedder needs: a heartbeat kept in memory reaches the store
// without a restart, with the flush observed, and an expired session is stored as EXPIRED.
func TestRunFlushesAndSweeps(t *testing.T) {
	var flushes atomic.Int64
	h, inner := upkeepHarness(t, func(c *registry.Config) {
		c.FlushObserver = func(_ time.Duration, err error) {
			if err == nil {
				flushes.Add(1)
			}
		}
	})
	n := newNode(t, "upkeep")
	h.ok("POST", "/api/v1/register", n.registration(t, "https://upkeep.example"), "", nil)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-upkeep", h.now(), num(10), nil), "", nil)
	h.clock.Advance(time.Minute)
	beat := h.now()
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, beat), "", nil)
	if got := storedNode(t, inner, n.key).LastSeen; got.Equal(beat) {
		t.Fatal("the heartbeat reached the store before any flush: the test shows nothing")
	}
	h.clock.Advance(time.Hour)

	runUpkeep(t, h)
	eventually(t, "the heartbeat's last_seen in the store", func() bool { return storedNode(t, inner, n.key).LastSeen.Equal(beat) })
	eventually(t, "a flush observed", func() bool { return flushes.Load() > 0 })
	eventually(t, "the expired session stored as EXPIRED", func() bool {
		return storedSession(t, inner, "bs-upkeep").State == binding.Expired
	})
}

// heldLock is a store whose upkeep lock another registry always holds.
type heldLock struct {
	store.Store
	asked *atomic.Int64
}

func (s heldLock) Exclusive(context.Context, int64, func(context.Context) error) (bool, error) {
	s.asked.Add(1)
	return false, nil
}

// With an upkeep lock that another registry holds, Run does not sweep: the store keeps the
// expired session as it was written, and Run keeps asking for the lock.
func TestRunLeavesTheSweepToTheLockHolder(t *testing.T) {
	var asked atomic.Int64
	h, inner := upkeepHarnessOn(t, func(st store.Store) store.Store { return heldLock{st, &asked} })
	n := newNode(t, "upkeep")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-held", h.now(), num(10), nil), "", nil)
	h.clock.Advance(time.Hour)

	runUpkeep(t, h)
	eventually(t, "three rounds asking for the lock", func() bool { return asked.Load() >= 3 })
	if got := storedSession(t, inner, "bs-held").State; got != binding.Initiated {
		t.Errorf("stored state %s, want INITIATED: a registry without the lock swept", got)
	}
}

// Run takes the node listing's snapshot as it starts, so that the first listing asked for is
// cut from it instead of measuring the whole table before its first byte.
func TestRunTakesTheFirstListingSnapshot(t *testing.T) {
	h, _ := upkeepHarness(t)
	for _, name := range []string{"warm-a", "warm-b"} {
		n := newNode(t, name)
		h.ok("POST", "/api/v1/register", n.registration(t, "https://"+name+".example"), "", nil)
	}
	if got := registry.ListingSnapshots(h.svc); got != 0 {
		t.Fatalf("%d snapshots before Run: the test shows nothing", got)
	}
	runUpkeep(t, h)
	eventually(t, "Run's snapshot of the listing", func() bool { return registry.ListingSnapshots(h.svc) == 1 })
	var got struct {
		Count int `json:"count"`
	}
	h.ok("GET", "/nodes", nil, "", &got)
	if got.Count != 2 {
		t.Fatalf("the listing has %d nodes, want 2", got.Count)
	}
	if n := registry.ListingSnapshots(h.svc); n != 1 {
		t.Fatalf("the first listing took snapshot %d, not the one Run took", n)
	}
}
