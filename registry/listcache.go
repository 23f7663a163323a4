package registry

import (
	"fmt"
	"strings"
	"sync"
)

// maxListCacheBytes bounds the encoded listings kept at once. A listing of 100,000 nodes is
// about 45 MB; a filter set that would push the cache past the bound is served uncached,
// except that the cache always keeps one listing.
const maxListCacheBytes = 128 << 20

// listCache keeps encoded answers of GET /nodes, /peers and /api/v1/peers. An answer is
// reused while the registry clock stays in the second it was built in and no registration
// has changed the node table since, so it is at most one second stale (timestamps have
// one-second precision, so within a second only last_seen from heartbeats can lag). Requests
// that arrive while an answer is being built wait for it instead of building their own
// copy, so a burst of readers costs one encoding and one buffer.
type listCache struct {
	mu      sync.Mutex
	entries map[string]*listEntry
	bytes   int
}

type listEntry struct {
	second int64
	gen    uint64
	ready  chan struct{} // closed once body and err are set
	body   []byte
	err    error
}

// get returns the answer for key at (second, gen), building it with build when no valid
// one is kept or being built.
func (c *listCache) get(key string, second int64, gen uint64, build func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*listEntry{}
	}
	if e := c.entries[key]; e != nil && e.second == second && e.gen == gen {
		c.mu.Unlock()
		<-e.ready
		return e.body, e.err
	}
	// Whatever was built for another second or generation is of no use any more.
	for k, e := range c.entries {
		if e.second != second || e.gen != gen {
			select {
			case <-e.ready:
				c.bytes -= len(e.body)
				delete(c.entries, k)
			default: // still being built for its own waiters
			}
		}
	}
	e := &listEntry{second: second, gen: gen, ready: make(chan struct{})}
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
func (f NodeFilter) cacheKey(path string) string {
	return fmt.Sprintf("%s|%d|%t|%q|%q|%t", path, f.OnlineWithin, f.onlineGiven, strings.Join(f.Capabilities, "\x00"), f.Region, f.Callable)
}
