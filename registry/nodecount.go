package registry

import (
	"context"
	"sync"

	"github.com/svrp/svrp/store"
)

// nodeCount is the number of node records, counted from the store at the first registration
// and at every sweep, and kept in between as registrations add keys, so that the node cap
// costs no count of the table per registration (a write transaction cannot count the cached
// table cheaply). A new key reserves its place before its write and settles it after. Several
// daemons on one database each see the others' keys at their next sweep, so together they
// may pass the cap by what they add within one sweep interval. The sweep's expiry and a
// displacement delete records (nodequota.go).
type nodeCount struct {
	mu       sync.Mutex
	loaded   bool
	n        int // records, including the reservations in flight
	inFlight int // reserved, not yet settled
}

// load counts the table once.
func (c *nodeCount) load(ctx context.Context, st store.Store) error {
	return loadOnce(&c.mu, &c.loaded, func() error { return c.refresh(ctx, st) })
}

// loadOnce calls refresh unless loaded, read under mu, says that a count from the store is
// in already; refresh sets loaded, under mu, with its count.
func loadOnce(mu *sync.Mutex, loaded *bool, refresh func() error) error {
	mu.Lock()
	done := *loaded
	mu.Unlock()
	if done {
		return nil
	}
	return refresh()
}

// refresh counts the table again, keeping the reservations in flight.
func (c *nodeCount) refresh(ctx context.Context, st store.Store) error {
	var n int
	err := st.View(ctx, func(tx store.Tx) (err error) {
		n, err = tx.NodeCount()
		return err
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.n, c.loaded = n+c.inFlight, true
	c.mu.Unlock()
	return nil
}

// reserve takes a place if fewer than max are taken; it returns the count it saw.
func (c *nodeCount) reserve(max int) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= max {
		return c.n, false
	}
	c.n++
	c.inFlight++
	return c.n, true
}

// settle ends a reservation: kept when the key was written, given back when not.
func (c *nodeCount) settle(written bool) {
	c.mu.Lock()
	c.inFlight--
	if !written {
		c.n--
	}
	c.mu.Unlock()
}
