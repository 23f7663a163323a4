package registry

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/svrp/svrp/store"
)

// nodeExpiry is how long a node that is not bound may go unseen before the sweep removes it.
func (s *Service) nodeExpiry() time.Duration {
	return s.limits.NodeExpiry
}

// expireNodes removes, from the store and the node cache, the nodes not seen within
// nodeExpiry that have no active binding, in batches that check each again. unseen holds at
// least the records a scan found unseen for nodeExpiry (unseen.go).
func (s *Service) expireNodes(ctx context.Context, unseen []lastSight, now time.Time) error {
	cutoff := now.Add(-s.nodeExpiry())
	stale := seenBefore(unseen, cutoff)
	for batch := range slices.Chunk(stale, sweepBatch) {
		var gone []store.Node
		err := s.store.Update(ctx, func(tx store.Tx) error {
			gone = gone[:0]
			for _, k := range batch {
				n, err := tx.Node(k)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if !n.LastSeen.Before(cutoff) {
					continue
				}
				if _, err := tx.Binding(k); err == nil {
					continue
				} else if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err := tx.DeleteNode(k); err != nil {
					return err
				}
				gone = append(gone, n)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(gone) > 0 {
			for _, n := range gone {
				s.tables.nodes.Remove(n.Key)
			}
			s.nodesChanged()
			s.log.Info("nodes expired", "count", len(gone), "unseen_for", s.nodeExpiry().String())
		}
	}
	return nil
}
