package registry

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestListCacheBuildsOncePerSecond: readers of one listing in one second share one build,
// even when they arrive while it is being built; a new second or a new generation builds
// again; a failed build is not kept.
func TestListCacheBuildsOncePerSecond(t *testing.T) {
	var c listCache
	var builds atomic.Int32
	release := make(chan struct{})
	build := func() ([]byte, error) {
		builds.Add(1)
		<-release
		return []byte("listing"), nil
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := c.get("k", 100, 1, build); err != nil || string(b) != "listing" {
				t.Errorf("get: %q, %v", b, err)
			}
		}()
	}
	close(release)
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("16 concurrent readers built the listing %d times, want 1", n)
	}
	c.get("k", 101, 1, build)
	c.get("k", 101, 2, build)
	if n := builds.Load(); n != 3 {
		t.Fatalf("after a new second and a new generation: %d builds, want 3", n)
	}
	if len(c.entries) != 1 {
		t.Fatalf("%d entries kept, want only the current one", len(c.entries))
	}

	boom := errors.New("boom")
	if _, err := c.get("e", 101, 2, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed build: %v", err)
	}
	if b, err := c.get("e", 101, 2, func() ([]byte, error) { return []byte("ok"), nil }); err != nil || string(b) != "ok" {
		t.Fatalf("after a failed build the next reader should build again: %q, %v", b, err)
	}
}

// TestListCacheBound: a listing that would take the cache past its bound is served but not
// kept, unless it is the only one.
func TestListCacheBound(t *testing.T) {
	var c listCache
	big := make([]byte, maxListCacheBytes/2+1)
	for _, k := range []string{"a", "b"} {
		if _, err := c.get(k, 1, 1, func() ([]byte, error) { return big, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > maxListCacheBytes || len(c.entries) != 1 {
		t.Fatalf("cache holds %d bytes in %d entries; bound %d", c.bytes, len(c.entries), maxListCacheBytes)
	}

	// A listing larger than the whole bound is still kept when it is the only one.
	var one listCache
	huge := make([]byte, maxListCacheBytes+1)
	builds := 0
	for range 3 {
		one.get("all", 1, 1, func() ([]byte, error) { builds++; return huge, nil })
	}
	if builds != 1 {
		t.Fatalf("an oversized only listing was built %d times in one second, want 1", builds)
	}
}
