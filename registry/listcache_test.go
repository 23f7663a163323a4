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
			if b, err := c.get("k", listVersion{registrations: 1, second: 100}, true, build); err != nil || string(b) != "listing" {
				t.Errorf("get: %q, %v", b, err)
			}
		}()
	}
	close(release)
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("16 concurrent readers built the listing %d times, want 1", n)
	}
	c.get("k", listVersion{registrations: 1, second: 101}, true, build)
	c.get("k", listVersion{registrations: 2, second: 101}, true, build)
	if n := builds.Load(); n != 3 {
		t.Fatalf("after a new second and a new generation: %d builds, want 3", n)
	}
	if len(c.entries) != 1 {
		t.Fatalf("%d entries kept, want only the current one", len(c.entries))
	}

	boom := errors.New("boom")
	if _, err := c.get("e", listVersion{registrations: 2, second: 101}, true, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed build: %v", err)
	}
	if b, err := c.get("e", listVersion{registrations: 2, second: 101}, true, func() ([]byte, error) { return []byte("ok"), nil }); err != nil || string(b) != "ok" {
		t.Fatalf("after a failed build the next reader should build again: %q, %v", b, err)
	}
}

// TestListCacheBound: a listing that would take the cache past its bound is served but not
// kept, unless it is the only one.
func TestListCacheBound(t *testing.T) {
	var c listCache
	big := make([]byte, maxListCacheBytes/2+1)
	for _, k := range []string{"a", "b"} {
		if _, err := c.get(k, listVersion{registrations: 1, second: 1}, true, func() ([]byte, error) { return big, nil }); err != nil {
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
		one.get("all", listVersion{registrations: 1, second: 1}, true, func() ([]byte, error) { builds++; return huge, nil })
	}
	if builds != 1 {
		t.Fatalf("an oversized only listing was built %d times in one second, want 1", builds)
	}
}

// TestListCacheUnchangedTable: an answer that does not depend on the clock is reused across
// seconds until a registration or a heartbeat changes the table; one that does depend on
// it (online_within) is rebuilt each second.
func TestListCacheUnchangedTable(t *testing.T) {
	var c listCache
	builds := map[string]int{}
	get := func(key string, v listVersion, clocked bool) {
		c.get(key, v, clocked, func() ([]byte, error) { builds[key]++; return []byte(key), nil })
	}
	for second := int64(1); second <= 5; second++ {
		get("all", listVersion{registrations: 7, touches: 3, second: second}, false)
		get("online", listVersion{registrations: 7, touches: 3, second: second}, true)
	}
	if builds["all"] != 1 || builds["online"] != 5 {
		t.Fatalf("builds over five quiet seconds: %v, want all 1 and online 5", builds)
	}
	// A heartbeat after the answer's second: the answer is older than a second, so rebuilt;
	// another heartbeat in the same second: reused.
	get("all", listVersion{registrations: 7, touches: 4, second: 5}, false)
	get("all", listVersion{registrations: 7, touches: 5, second: 5}, false)
	if builds["all"] != 2 {
		t.Fatalf("heartbeats: %d builds, want 2", builds["all"])
	}
	// The answer missed the second heartbeat, so a later second rebuilds it once; after
	// that the table is quiet and the answer is reused, until a registration.
	get("all", listVersion{registrations: 7, touches: 5, second: 9}, false)
	get("all", listVersion{registrations: 7, touches: 5, second: 10}, false)
	if builds["all"] != 3 {
		t.Fatalf("quiet seconds after a heartbeat: %d builds, want 3", builds["all"])
	}
	get("all", listVersion{registrations: 8, touches: 5, second: 10}, false)
	if builds["all"] != 4 {
		t.Fatalf("after a registration: %d builds, want 4", builds["all"])
	}
}
