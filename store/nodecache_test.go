package store_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/storetest"
)

// The cache must keep every promise of the Store interface, over either store.
func TestNodeCacheOverMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return storetest.NodeCache(t, store.NewMemory()) })
}

func TestNodeCacheOverBadger(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return storetest.NodeCache(t, openBadger(t, t.TempDir())) })
}

// TestNodeCacheTouch: a touch is visible at once, never moves last_seen back, reaches the
// disk only at Flush (or Close), and survives a reopen after that.
func TestNodeCacheTouch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := storetest.NodeCache(t, openBadger(t, dir))
	k := storetest.Key(1)
	n := storetest.Node(k)
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(n) })
	toucher := s

	later := n.LastSeen.Add(90 * time.Second)
	if err := toucher.TouchNode(context.Background(), k, later); err != nil {
		t.Fatal(err)
	}
	if err := toucher.TouchNode(context.Background(), k, n.LastSeen); err != nil {
		t.Fatal(err)
	}
	if err := toucher.TouchNode(context.Background(), storetest.Key(2), later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("touching an unknown key: %v, want store.ErrNotFound", err)
	}
	lastSeen := func(s store.Store) time.Time {
		var got store.Node
		storetest.View(t, s, func(tx store.Tx) (err error) {
			got, err = tx.Node(k)
			return err
		})
		return got.LastSeen
	}
	if got := lastSeen(s); !got.Equal(later) {
		t.Fatalf("in memory after touches: last_seen %v, want %v", got, later)
	}
	inner := store.CacheInner(s)
	if got := lastSeen(inner); !got.Equal(n.LastSeen) {
		t.Fatalf("on disk before Flush: last_seen %v, want %v", got, n.LastSeen)
	}
	if err := toucher.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lastSeen(inner); !got.Equal(later) {
		t.Fatalf("on disk after Flush: last_seen %v, want %v", got, later)
	}

	// A touch made just before Close is flushed by Close.
	last := later.Add(time.Second)
	if err := toucher.TouchNode(context.Background(), k, last); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := storetest.NodeCache(t, openBadger(t, dir))
	defer reopened.Close()
	if got := lastSeen(reopened); !got.Equal(last) {
		t.Fatalf("after reopen: last_seen %v, want %v", got, last)
	}
}

// TestNodeCacheFlushKeepsNewerRegistration: a registration replaces the record whole,
// touches included, and a Flush afterwards moves only last_seen of the record on disk.
func TestNodeCacheFlushKeepsNewerRegistration(t *testing.T) {
	s := storetest.NodeCache(t, openBadger(t, t.TempDir()))
	defer s.Close()
	toucher := s
	k := storetest.Key(1)
	n := storetest.Node(k)
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(n) })
	if err := toucher.TouchNode(context.Background(), k, n.LastSeen.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	re := n
	re.Endpoint = "198.51.100.9:9000"
	re.LastSeen = n.LastSeen.Add(2 * time.Minute)
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(re) })
	touched := re.LastSeen.Add(time.Minute)
	if err := toucher.TouchNode(context.Background(), k, touched); err != nil {
		t.Fatal(err)
	}
	if err := toucher.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	storetest.View(t, store.CacheInner(s), func(tx store.Tx) error {
		got, err := tx.Node(k)
		if got.Endpoint != re.Endpoint || !got.LastSeen.Equal(touched) {
			t.Errorf("on disk: endpoint %q last_seen %v, want %q and %v", got.Endpoint, got.LastSeen, re.Endpoint, touched)
		}
		return err
	})
}

// TestNodeCacheFlushRacesRegistrations: registrations, touches and flushes of the same
// records at once leave inner holding the record memory holds once the last flush is done. A flush
// writes a record from memory only while no registration of it is between inner and memory;
// were it to write one that is, inner would keep an older endpoint than memory.
func TestNodeCacheFlushRacesRegistrations(t *testing.T) {
	s := storetest.NodeCache(t, openBadger(t, t.TempDir()))
	defer s.Close()
	toucher := s
	keys := []didkey.PublicKey{storetest.Key(1), storetest.Key(2), storetest.Key(3)}
	for _, k := range keys {
		storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(storetest.Node(k)) })
	}
	// One clock for registrations and touches, as the registry's: each reads a later time.
	start := storetest.Node(keys[0]).LastSeen
	var ms atomic.Int64
	tick := func() time.Time { return start.Add(time.Duration(ms.Add(1)) * time.Millisecond) }
	touched := 0
	touchers := testkit.StartWorkers(1, func(int) bool {
		toucher.TouchNode(context.Background(), keys[touched%len(keys)], tick())
		touched++
		return true
	})
	flushers := testkit.StartWorkers(1, func(int) bool {
		if err := toucher.Flush(context.Background()); err != nil {
			t.Error(err)
			return false
		}
		return true
	})
	for i := range 300 {
		k := keys[i%len(keys)]
		n := storetest.Node(k)
		n.Endpoint = fmt.Sprintf("198.51.100.%d:%d", i%250+1, 1000+i)
		n.LastSeen = tick()
		if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutNode(n) }); err != nil {
			t.Error(err)
			break
		}
	}
	touchers.Stop()
	flushers.Stop()
	if err := toucher.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var mem, disk store.Node
		storetest.View(t, s, func(tx store.Tx) (err error) { mem, err = tx.Node(k); return err })
		storetest.View(t, store.CacheInner(s), func(tx store.Tx) (err error) { disk, err = tx.Node(k); return err })
		// A touch read just before a registration may be flushed after it, so inner's
		// last_seen may be the later one; never the earlier.
		if mem.Endpoint != disk.Endpoint || disk.LastSeen.Before(mem.LastSeen) {
			t.Errorf("key %d: memory holds %s seen %v, inner %s seen %v", k[0], mem.Endpoint, mem.LastSeen, disk.Endpoint, disk.LastSeen)
		}
	}
}

// TestNodeCacheScanSnapshots: ScanNodes hands out records that later touches and writes do
// not change, since the registry keeps them while it encodes a listing.
func TestNodeCacheScanSnapshots(t *testing.T) {
	s := storetest.NodeCache(t, store.NewMemory())
	defer s.Close()
	k := storetest.Key(1)
	n := storetest.Node(k)
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(n) })
	var kept *store.Node
	err := s.ScanNodes(context.Background(), func(got *store.Node) error {
		kept = got
		return nil
	})
	if err != nil || kept == nil {
		t.Fatalf("scan: %v, %v", kept, err)
	}
	if err := s.TouchNode(context.Background(), k, n.LastSeen.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	re := n
	re.Endpoint = "198.51.100.9:9000"
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(re) })
	if !kept.LastSeen.Equal(n.LastSeen) || kept.Endpoint != n.Endpoint {
		t.Fatalf("a scanned record changed under its holder: %+v", kept)
	}
}

// TestNodeCacheShortDIDsShareABody: the cache finds a DID ending in its key's short body
// through the short-body index rather than a DID index of its own; two keys whose short
// bodies collide (the pair of dids.json) are still told apart by the DID each registered,
// also after one of them moves to another spelling and back, and also after a reopen.
func TestNodeCacheShortDIDsShareABody(t *testing.T) {
	pair := testkit.DIDs(t).Collision
	key := func(seed string) didkey.PublicKey {
		k, err := didkey.KeyFromEd25519(testkit.SeedKey(seed).Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := key(pair.First.SeedHex), key(pair.Second.SeedHex)
	if a.ShortBody() != b.ShortBody() {
		t.Fatalf("the collision keys do not share a short body: %s, %s", a.ShortBody(), b.ShortBody())
	}
	dir := t.TempDir()
	s := storetest.NodeCache(t, openBadger(t, dir))
	na, nb := storetest.Node(a), storetest.Node(b)
	na.DID, nb.DID = pair.First.DIDFallback, pair.Second.DIDFallback
	storetest.Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutNode(na), tx.PutNode(nb)) })
	want := func(did string, k didkey.PublicKey) {
		t.Helper()
		got, err := nodeKeyByDID(s, did)
		if k == (didkey.PublicKey{}) {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("NodeKeyByDID(%s) = %v, %v; want store.ErrNotFound", did, got, err)
			}
			return
		}
		if err != nil || got != k {
			t.Errorf("NodeKeyByDID(%s) = %v, %v; want %v", did, got, err, k)
		}
	}
	none := didkey.PublicKey{}
	want(pair.First.DIDFallback, a)
	want(pair.Second.DIDFallback, b)
	want(storetest.ShortDID(a), none)

	// The second moves to the short spelling; the first keeps its fallback.
	nb.DID = storetest.ShortDID(b)
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(nb) })
	want(storetest.ShortDID(b), b)
	want(pair.Second.DIDFallback, none)
	want(pair.First.DIDFallback, a)

	// The first takes the same short spelling (the store does not judge collisions): each
	// lookup names a node whose DID it is.
	na.DID = storetest.ShortDID(a)
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(na) })
	if got, err := nodeKeyByDID(s, storetest.ShortDID(a)); err != nil || (got != a && got != b) {
		t.Errorf("NodeKeyByDID(shared short) = %v, %v", got, err)
	}
	want(pair.First.DIDFallback, none)
	na.DID = pair.First.DIDFallback
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(na) })
	want(storetest.ShortDID(b), b)
	want(pair.First.DIDFallback, a)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storetest.NodeCache(t, openBadger(t, dir))
	defer s.Close()
	want(storetest.ShortDID(b), b)
	want(pair.First.DIDFallback, a)
	want(pair.Second.DIDFallback, none)
}

// TestNodeCacheSharesCapabilityLists: nodes offering the same capabilities share one list in
// memory, and a reader's copy is its own.
func TestNodeCacheSharesCapabilityLists(t *testing.T) {
	s := storetest.NodeCache(t, store.NewMemory())
	defer s.Close()
	k1, k2 := storetest.Key(1), storetest.Key(2)
	storetest.Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutNode(storetest.Node(k1)), tx.PutNode(storetest.Node(k2)))
	})
	c1, c2 := store.CachedCapabilities(s, k1), store.CachedCapabilities(s, k2)
	if &c1[0] != &c2[0] {
		t.Errorf("two nodes with the same capabilities hold two lists")
	}
	err := s.View(context.Background(), func(tx store.Tx) error {
		n, err := tx.Node(k1)
		if err != nil {
			return err
		}
		n.Capabilities[0] = "changed"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c2[0] != "gpu" {
		t.Errorf("a reader's change reached the shared list: %v", c2)
	}
}

func openBadger(t testing.TB, dir string) store.Store {
	t.Helper()
	s, err := badger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func nodeKeyByDID(s store.Store, did string) (got didkey.PublicKey, err error) {
	err = s.View(context.Background(), func(tx store.Tx) error {
		got, err = tx.NodeKeyByDID(did)
		return err
	})
	return got, err
}
