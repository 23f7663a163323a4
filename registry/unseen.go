package registry

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// Bound nodes gone unseen (package registry/limits, [limits.Limits.BoundNodeExpiry]). A binding keeps its node's
// record from the node expiry, so without an end of its own a bound node would hold its
// place in the node table for good. The sweep ends the binding of a node unseen for
// BoundNodeExpiry as an unbind would (docs/protocol.md §10.6): the binding is removed, so the
// node leaves its operator's view, and the session that made it stays ACTIVE, marked
// unbound_by "node_unseen", which its status shows. From then on the record is an unbound
// node's, and the node expiry, counted from the same last sight, removes it.

// lastSight is a node key and when a scan of the node table found its record last seen.
type lastSight struct {
	key  didkey.PublicKey
	seen time.Time
}

// unseenSince returns the node records last seen before cutoff. The sweep scans once, with the
// later cutoff of its two expiries, for both; the same scan counts the node table
// (tables.go).
func (s *Service) unseenSince(ctx context.Context, cutoff time.Time) ([]lastSight, error) {
	var unseen []lastSight
	err := s.countNodeTable(ctx, func(n *store.Node) {
		if n.LastSeen.Before(cutoff) {
			unseen = append(unseen, lastSight{key: n.Key, seen: n.LastSeen})
		}
	})
	return unseen, err
}

// seenBefore returns the keys of the sights before cutoff.
func seenBefore(sights []lastSight, cutoff time.Time) []didkey.PublicKey {
	var keys []didkey.PublicKey
	for _, l := range sights {
		if l.seen.Before(cutoff) {
			keys = append(keys, l.key)
		}
	}
	return keys
}

// endUnseenBindings ends the bindings of the nodes not seen within BoundNodeExpiry, of those
// unseen holds, in batches that check each node again: still unseen, and still bound.
func (s *Service) endUnseenBindings(ctx context.Context, unseen []lastSight, now time.Time) error {
	cutoff := now.Add(-s.limits.BoundNodeExpiry)
	for batch := range slices.Chunk(seenBefore(unseen, cutoff), sweepBatch) {
		var ended []binding.Binding
		err := s.store.Update(ctx, func(tx store.Tx) error {
			ended = ended[:0]
			for _, k := range batch {
				b, err := unseenBinding(tx, k, cutoff)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				sess, err := tx.BindingSession(b.SessionID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err := s.endBinding(tx, b, sess, err == nil, binding.UnboundByNodeUnseen, now); err != nil {
					return err
				}
				ended = append(ended, b)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, b := range ended {
			s.log.Debug("binding ended", "binding_session_id", b.SessionID, "node_did", b.NodeDID, "unbound_by", string(binding.UnboundByNodeUnseen))
		}
		if len(ended) > 0 {
			s.log.Info("bindings of unseen nodes ended", "count", len(ended), "unseen_for", s.limits.BoundNodeExpiry.String())
		}
	}
	return nil
}

// unseenBinding returns the active binding of node key k when k's record was last seen
// before cutoff; store.ErrNotFound when k has no record, was seen since, or is not bound.
func unseenBinding(tx store.Tx, k didkey.PublicKey, cutoff time.Time) (binding.Binding, error) {
	n, err := tx.Node(k)
	if err != nil {
		return binding.Binding{}, err
	}
	if !n.LastSeen.Before(cutoff) {
		return binding.Binding{}, store.ErrNotFound
	}
	return tx.Binding(k)
}
