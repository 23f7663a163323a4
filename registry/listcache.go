package registry

import (
	"fmt"
	"strings"
	"sync"

	"github.com/svrp/svrp/registry/api"
)

// maxListCacheBytes bounds the encoded listings kept at once. A listing of 100,000 nodes is
// about 45 MB; a filter set that would push the cache past the bound is served uncached,
// except that the cache always keeps one listing.
const maxListCacheBytes = 128 << 20

// listCache keeps encoded answers of GET /nodes, /peers and /api/v1/peers. An answer is
// reused while no registration has changed the node table since it was built, and — when
// heartbeats have moved last_seen since, or the filter depends on the clock — while the
// registry clock stays in the second it was built in. So an answer is at most one second
// stale (timestamps have one-second precision), and an unchanging table is encoded once.
// Requests that arrive while an answer is being built wait for it instead of building their
// own copy, so a burst of readers costs one encoding and one buffer.
type listCache struct {
	mu      sync.Mutex
	entries map[string]*listEntry
	bytes   int
}

type listEntry struct {
	v       listVersion
	clocked bool
	ready   chan struct{} // closed once body and err are set
	body    []byte
	err     error
}

// listVersion is what an answer was built from: the registrations and heartbeats seen so far,
// and the second on the registry clock.
type listVersion struct {
	registrations uint64
	touches       uint64
	second        int64
}

// fresh reports whether an answer built at v still serves a request at now. A filter on
// online_within (clocked) depends on the second; otherwise only heartbeats do.
func (v listVersion) fresh(now listVersion, clocked bool) bool {
	if v.registrations != now.registrations {
		return false
	}
	if v.touches == now.touches && !clocked {
		return true
	}
	return v.second == now.second
}

// get returns the answer for key at now, building it with build when no fresh one is kept
// or being built. clocked says whether the answer depends on the clock.
func (c *listCache) get(key string, now listVersion, clocked bool, build func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*listEntry{}
	}
	if e := c.entries[key]; e != nil && e.v.fresh(now, clocked) {
		c.mu.Unlock()
		<-e.ready
		return e.body, e.err
	}
	// Whatever would not be served now will not be served again.
	for k, e := range c.entries {
		if !e.v.fresh(now, e.clocked) {
			select {
			case <-e.ready:
				c.bytes -= len(e.body)
				delete(c.entries, k)
			default: // still being built for its own waiters
			}
		}
	}
	e := &listEntry{v: now, clocked: clocked, ready: make(chan struct{})}
	c.entries[key] = e
	c.mu.Unlock()

	e.body, e.err = build()
	close(e.ready)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[key] == e {
		// One listing is always kept, however large: with a million nodes the answer is
		// about 450 MB, and rebuilding it for every request would cost far more than
		// holding it.
		if e.err != nil || (c.bytes+len(e.body) > maxListCacheBytes && len(c.entries) > 1) {
			delete(c.entries, key)
		} else {
			c.bytes += len(e.body)
		}
	}
	return e.body, e.err
}

// cacheKey names a listing by path and the filter it applies, so that two spellings of one
// query share an entry.
func cacheKey(f api.NodeFilter, path string) string {
	return fmt.Sprintf("%s|%d|%t|%q|%q|%t", path, f.OnlineWithin, f.OnlineSet, strings.Join(f.Capabilities, "\x00"), f.Region, f.Callable)
}
