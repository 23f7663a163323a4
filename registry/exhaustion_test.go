package registry_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// heapGrowthBound is a generous bound on what a flood may leave on the heap: the state the
// flood is allowed to keep is a few KiB, and anything that kept a few bytes per request
// would pass it well before the end.
const heapGrowthBound = 8 << 20

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func heapGrowth(before, after uint64) int64 { return int64(after) - int64(before) }

// TestExhaustionChallengeFlood: 200,000 challenge requests leave the heap where it was, as
// issuing a challenge stores nothing.
func TestExhaustionChallengeFlood(t *testing.T) {
	testkit.Heavy(t)
	c := testkit.NewClock(epoch)
	svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	const flood = 200_000
	for range 1000 { // warm up whatever the first calls allocate once
		if _, err := svc.Challenge(); err != nil {
			t.Fatal(err)
		}
	}
	before := liveHeap()
	var last api.ChallengeResult
	for i := range flood {
		if last, err = svc.Challenge(); err != nil {
			t.Fatal(err)
		}
		if i%10_000 == 0 {
			c.Advance(time.Second)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(svc)
	growth := heapGrowth(before, after)
	t.Logf("heap after %d challenge requests: %d -> %d bytes, growth %d bytes (%.2f MiB)", flood, before, after, growth, float64(growth)/(1<<20))
	if growth > heapGrowthBound {
		t.Fatalf("the heap grew by %d bytes over %d challenges", growth, flood)
	}
	if last.Challenge == "" || last.ExpiresIn != 300 {
		t.Fatalf("last challenge: %+v", last)
	}
}

// TestExhaustionUsedSetCapped: consumed challenges are remembered only up to the used-set
// cap; past it a login is refused (BAD_CHALLENGE) rather than remembered, and entries are
// forgotten once their challenges expire, so the set stays capped whatever the rate.
func TestExhaustionUsedSetCapped(t *testing.T) {
	key, err := authn.NewChallengeKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const usedCap = 64
	ch := authn.NewChallenger(key, rand.Reader, usedCap)
	now := epoch
	accepted, refused := 0, 0
	for round := range 5 {
		for range 10 * usedCap {
			c, err := ch.Issue(now)
			if err != nil {
				t.Fatal(err)
			}
			switch err := ch.Consume(c, now); {
			case err == nil:
				accepted++
			case errors.Is(err, authn.ErrBadChallenge):
				refused++
			default:
				t.Fatal(err)
			}
			if ch.Used() > usedCap {
				t.Fatalf("round %d: the used-set holds %d, over its cap of %d", round, ch.Used(), usedCap)
			}
		}
		if ch.Used() != usedCap {
			t.Fatalf("round %d: the used-set holds %d after a flood, want it full at %d", round, ch.Used(), usedCap)
		}
		// Once the consumed challenges have expired their entries are dropped and new logins
		// are remembered again.
		now = now.Add(authn.ChallengeTTL + time.Second)
	}
	if accepted != 5*usedCap || refused != 5*9*usedCap {
		t.Fatalf("accepted %d, refused %d", accepted, refused)
	}
	t.Logf("used-set cap %d: %d consumptions accepted, %d refused over 5 windows", usedCap, accepted, refused)

	// The registry fails closed the same way: with a full used-set a valid login is
	// BAD_CHALLENGE and opens nothing.
	small := authn.NewChallenger(key, rand.Reader, 2)
	w := newArena(t, func(c *registry.Config) { c.Challenges = small })
	w.op.login(w.harness)
	before := hostileSnapshot(t, w.st)
	w.fails("POST", "/v1/auth/device-login", w.op.loginRequest(t, w.challenge(), w.now()), "", http.StatusUnauthorized, "BAD_CHALLENGE")
	hostileSameStore(t, "a login past the used-set cap", before, hostileSnapshot(t, w.st))
	if small.Used() != 2 {
		t.Fatalf("used-set %d", small.Used())
	}
}

// TestExhaustionConsumeFlood: 200,000 logins' worth of consumed challenges cost no more
// heap than the used-set cap allows.
func TestExhaustionConsumeFlood(t *testing.T) {
	testkit.Heavy(t)
	key, err := authn.NewChallengeKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const usedCap, flood = 4096, 200_000
	ch := authn.NewChallenger(key, rand.Reader, usedCap)
	now := epoch
	before := liveHeap()
	for i := range flood {
		c, err := ch.Issue(now)
		if err != nil {
			t.Fatal(err)
		}
		_ = ch.Consume(c, now)
		if i%1000 == 999 {
			now = now.Add(time.Second)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(ch)
	growth := heapGrowth(before, after)
	t.Logf("heap after %d consumed challenges (cap %d): growth %d bytes, %d remembered", flood, usedCap, growth, ch.Used())
	if growth > heapGrowthBound || ch.Used() > usedCap {
		t.Fatalf("growth %d bytes, used-set %d", growth, ch.Used())
	}
}

// TestExhaustionInitiateCap: one node key holds at most 16 open sessions; every initiate
// past that is RATE_LIMITED and stores nothing, so a flood from one key cannot grow the
// store. Closing a session makes room for exactly one more.
func TestExhaustionInitiateCap(t *testing.T) {
	w := newArena(t)
	for i := range binding.MaxOpenSessionsPerNode {
		w.drive(w.n, w.op, w.token, fmt.Sprintf("bs-%03d", i), "INITIATED")
	}
	before := hostileSnapshot(t, w.st)
	for i := range 200 {
		w.fails("POST", "/v1/bindings/initiate", w.n.initiate(t, fmt.Sprintf("bs-flood-%03d", i), w.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")
	}
	hostileSameStore(t, "200 initiates past the cap", before, hostileSnapshot(t, w.st))
	// A refused id is not burnt: it was never stored.
	w.ok("POST", "/v1/bindings/bs-000/cancel", w.n.cancelRequest(t, "bs-000", w.n.did, w.now()), "", nil)
	w.ok("POST", "/v1/bindings/initiate", w.n.initiate(t, "bs-flood-000", w.now(), nil, nil), "", nil)
	w.fails("POST", "/v1/bindings/initiate", w.n.initiate(t, "bs-flood-001", w.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")
	// Expired sessions no longer count, whether or not a sweep has run.
	w.clock.Advance(11 * time.Minute)
	w.ok("POST", "/v1/bindings/initiate", w.n.initiate(t, "bs-after-expiry", w.now(), nil, nil), "", nil)
}

// TestExhaustionInitiateFloodConcurrent: 64 initiates with distinct ids from one key at once
// open exactly 16 sessions.
func TestExhaustionInitiateFloodConcurrent(t *testing.T) {
	w := newArena(t)
	reqs := make([]raceRequest, 64)
	for i := range reqs {
		reqs[i] = raceRequest{method: "POST", path: "/v1/bindings/initiate", body: mustJSON(t, w.n.initiate(t, fmt.Sprintf("bs-%02d", i), w.now(), nil, nil))}
	}
	got := raceTally(w.raceBurst(reqs))
	if got["200"] != binding.MaxOpenSessionsPerNode || got["429 RATE_LIMITED"] != len(reqs)-binding.MaxOpenSessionsPerNode {
		t.Fatalf("answers %v, want %d successes", got, binding.MaxOpenSessionsPerNode)
	}
	if n := len(hostileSnapshot(t, w.st).Sessions); n != binding.MaxOpenSessionsPerNode {
		t.Fatalf("%d sessions stored", n)
	}
}

// TestExhaustionInitiateHeap: a flood of initiates refused at the cap leaves the heap where
// it was.
func TestExhaustionInitiateHeap(t *testing.T) {
	testkit.Heavy(t)
	c := testkit.NewClock(epoch)
	svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, "node")
	ctx := context.Background()
	for i := range binding.MaxOpenSessionsPerNode {
		if _, err := svc.Initiate(ctx, n.initiate(t, fmt.Sprintf("bs-%02d", i), c.Now(), nil, nil), "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
	}
	// The requests are signed before measuring: the flood's cost to the registry is what
	// is measured, not the test's.
	const flood = 5000
	reqs := make([]binding.InitiateRequest, flood)
	for i := range reqs {
		reqs[i] = n.initiate(t, fmt.Sprintf("bs-flood-%05d", i), c.Now(), nil, nil)
	}
	before := liveHeap()
	for i, req := range reqs {
		if _, err := svc.Initiate(ctx, req, "192.0.2.1"); proto.CodeOf(err) != proto.RateLimited {
			t.Fatalf("initiate %d: %v", i, err)
		}
	}
	after := liveHeap()
	runtime.KeepAlive(svc)
	runtime.KeepAlive(reqs)
	growth := heapGrowth(before, after)
	t.Logf("heap after %d refused initiates: growth %d bytes", flood, growth)
	if growth > heapGrowthBound {
		t.Fatalf("the heap grew by %d bytes", growth)
	}
}

// TestExhaustionHistoryNotRead: a key's finished and expired sessions leave the index that
// initiate and pending read, so a long history costs those paths nothing; the sessions
// themselves stay readable until the sweep retires them.
func TestExhaustionHistoryNotRead(t *testing.T) {
	c := testkit.NewClock(epoch)
	st := store.NewMemory()
	svc, err := registry.New(registry.Config{Store: st, Clock: c.Now, Limits: limits.Limits{InitiateAddressLimit: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, "node")
	ctx := context.Background()
	for i := range 50 {
		id := fmt.Sprintf("bs-%02d", i)
		if _, err := svc.Initiate(ctx, n.initiate(t, id, c.Now(), nil, nil), "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
		if i%5 != 0 {
			if _, err := svc.CancelByNode(ctx, id, n.cancelRequest(t, id, n.did, c.Now())); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The 10 not cancelled expire; the next initiate stores them as EXPIRED on its way.
	c.Advance(binding.MaxSessionTTL)
	if _, err := svc.Initiate(ctx, n.initiate(t, "bs-new", c.Now(), nil, nil), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	err = st.View(ctx, func(tx store.Tx) error {
		open, err := tx.OpenBindingSessionsByNode(n.key)
		if err != nil {
			return err
		}
		if len(open) != 1 || open[0].ID != "bs-new" {
			t.Errorf("the index initiate reads holds %d sessions; want only the open one", len(open))
		}
		old, err := tx.BindingSession("bs-01")
		if err != nil || old.State != binding.Cancelled {
			t.Errorf("a finished session: %v, %v; want it kept, CANCELLED", old.State, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
