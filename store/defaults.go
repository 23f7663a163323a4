package store

import (
	"context"
	"time"

	"github.com/svrp/svrp/didkey"
)

// Defaults gives a store the answers of one with no upkeep of its own: nothing to flush or
// reclaim, no disk to watch, no other process to follow or to exclude. A store embeds it and
// defines what it does have.
type Defaults struct{}

// Flush has nothing to make durable.
func (Defaults) Flush(context.Context) error { return nil }

// Maintain has nothing to reclaim.
func (Defaults) Maintain(context.Context) error { return nil }

// Exclusive runs fn: no other process opens the store.
func (Defaults) Exclusive(ctx context.Context, _ int64, fn func(context.Context) error) (bool, error) {
	return true, fn(ctx)
}

// Health is the zero Health: nothing is watched.
func (Defaults) Health() Health { return Health{} }

// CheckWrite never refuses.
func (Defaults) CheckWrite() error { return nil }

// RemoteChanges is 0: no other process writes.
func (Defaults) RemoteChanges() uint64 { return 0 }

// NodeFeed is nil: no other process writes.
func (Defaults) NodeFeed() NodeFeed { return nil }

// ReadCountersInView is ReadCounters for a store with no cheaper read than a View.
func ReadCountersInView(ctx context.Context, s Store, keys ...string) (cs []Counter, err error) {
	err = s.View(ctx, func(tx Tx) error {
		cs, err = tx.Counters(keys...)
		return err
	})
	return cs, err
}

// TouchNodeInUpdate is TouchNode for a store with no cheaper write than an Update of its
// own.
func TouchNodeInUpdate(ctx context.Context, s Store, key didkey.PublicKey, seen time.Time) error {
	return s.Update(ctx, func(tx Tx) error {
		rec, err := tx.Node(key)
		if err != nil {
			return err
		}
		if seen.After(rec.LastSeen) {
			rec.LastSeen = seen
		}
		return tx.PutNode(rec)
	})
}

// ScanNodesInView is ScanNodes for a store that holds no records of its own to hand out:
// each is a copy read in one View.
func ScanNodesInView(ctx context.Context, s Store, fn func(*Node) error) error {
	return s.View(ctx, func(tx Tx) error {
		return tx.EachNode(func(n Node) error { return fn(&n) })
	})
}
