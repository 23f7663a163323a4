package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func cached(t testing.TB, inner Store) Store {
	t.Helper()
	s, err := WithNodeCache(context.Background(), inner)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The cache must keep every promise of the Store interface, over either store.
func TestNodeCacheOverMemory(t *testing.T) {
	runSuite(t, func(t *testing.T) Store { return cached(t, NewMemory()) })
}

func TestNodeCacheOverBadger(t *testing.T) {
	runSuite(t, func(t *testing.T) Store { return cached(t, openBadger(t, t.TempDir())) })
}

// TestNodeCacheTouch: a touch is visible at once, never moves last_seen back, reaches the
// disk only at Flush (or Close), and survives a reopen after that.
func TestNodeCacheTouch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := cached(t, openBadger(t, dir))
	k := testKey(1)
	n := testNode(k)
	update(t, s, func(tx Tx) error { return tx.PutNode(n) })
	toucher := s.(NodeToucher)

	later := n.LastSeen.Add(90 * time.Second)
	if err := toucher.TouchNode(k, later); err != nil {
		t.Fatal(err)
	}
	if err := toucher.TouchNode(k, n.LastSeen); err != nil {
		t.Fatal(err)
	}
	if err := toucher.TouchNode(testKey(2), later); !errors.Is(err, ErrNotFound) {
		t.Fatalf("touching an unknown key: %v, want ErrNotFound", err)
	}
	lastSeen := func(s Store) time.Time {
		var got Node
		view(t, s, func(tx Tx) (err error) {
			got, err = tx.Node(k)
			return err
		})
		return got.LastSeen
	}
	if got := lastSeen(s); !got.Equal(later) {
		t.Fatalf("in memory after touches: last_seen %v, want %v", got, later)
	}
	inner := s.(*nodeCache).inner
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
	if err := toucher.TouchNode(k, last); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := cached(t, openBadger(t, dir))
	defer reopened.Close()
	if got := lastSeen(reopened); !got.Equal(last) {
		t.Fatalf("after reopen: last_seen %v, want %v", got, last)
	}
}

// TestNodeCacheFlushKeepsNewerRegistration: a registration replaces the record whole,
// touches included, and a Flush afterwards moves only last_seen of the record on disk.
func TestNodeCacheFlushKeepsNewerRegistration(t *testing.T) {
	s := cached(t, openBadger(t, t.TempDir()))
	defer s.Close()
	toucher := s.(NodeToucher)
	k := testKey(1)
	n := testNode(k)
	update(t, s, func(tx Tx) error { return tx.PutNode(n) })
	if err := toucher.TouchNode(k, n.LastSeen.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	re := cloneNode(n)
	re.Endpoint = "198.51.100.9:9000"
	re.LastSeen = n.LastSeen.Add(2 * time.Minute)
	update(t, s, func(tx Tx) error { return tx.PutNode(re) })
	touched := re.LastSeen.Add(time.Minute)
	if err := toucher.TouchNode(k, touched); err != nil {
		t.Fatal(err)
	}
	if err := toucher.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	view(t, s.(*nodeCache).inner, func(tx Tx) error {
		got, err := tx.Node(k)
		if got.Endpoint != re.Endpoint || !got.LastSeen.Equal(touched) {
			t.Errorf("on disk: endpoint %q last_seen %v, want %q and %v", got.Endpoint, got.LastSeen, re.Endpoint, touched)
		}
		return err
	})
}

// TestNodeCacheScanSnapshots: ScanNodes hands out records that later touches and writes do
// not change, since the registry keeps them while it encodes a listing.
func TestNodeCacheScanSnapshots(t *testing.T) {
	s := cached(t, NewMemory())
	defer s.Close()
	k := testKey(1)
	n := testNode(k)
	update(t, s, func(tx Tx) error { return tx.PutNode(n) })
	var kept *Node
	err := s.(NodeScanner).ScanNodes(context.Background(), func(got *Node) error {
		kept = got
		return nil
	})
	if err != nil || kept == nil {
		t.Fatalf("scan: %v, %v", kept, err)
	}
	if err := s.(NodeToucher).TouchNode(k, n.LastSeen.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	re := cloneNode(n)
	re.Endpoint = "198.51.100.9:9000"
	update(t, s, func(tx Tx) error { return tx.PutNode(re) })
	if !kept.LastSeen.Equal(n.LastSeen) || kept.Endpoint != n.Endpoint {
		t.Fatalf("a scanned record changed under its holder: %+v", kept)
	}
}
