package store

import "github.com/svrp/svrp/didkey"

// CachedCapabilities returns the capability list the node cache s holds for k, not a copy.
func CachedCapabilities(s Store, k didkey.PublicKey) []string {
	c := s.(*nodeCache)
	c.mu.RLock()
	defer c.mu.RUnlock()
	at, _ := c.table.find(k)
	return c.table.capSets[c.table.rec(at).caps]
}

// CacheInner returns the store the node cache s is in front of.
func CacheInner(s Store) Store { return s.(*nodeCache).inner }
