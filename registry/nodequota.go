package registry

import (
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// The node table's quotas (limits.go): how many records one address block may hold, the
// expiry of nodes no longer seen, and which record a full table gives up for a newcomer.
//
// Each record carries the block it was first registered from (store.Node.AddressBlock).
// nodeBlocks holds, in memory, the keys of each block, counted from the store's node table at
// the first registration and again at every sweep, as nodeCount is; no counter per block is
// written, so on PostgreSQL shared by several daemons it costs no write, and each daemon sees
// the others' keys within one sweep interval.
type nodeBlocks struct {
	mu     sync.Mutex
	loaded bool
	blocks map[string]*nodeBlock
	top    mostFirst[*nodeBlock]
	// touched holds the keys added or removed since a count from the store began, which
	// the count may have missed; nil when no count is under way.
	touched map[didkey.PublicKey]bool
	// pending counts per block the new keys whose registration holds a place in its quota
	// and has not ended, so that concurrent registrations cannot pass the quota together.
	pending map[string]int
}

// nodeBlock is the keys one block holds, in no order: a key is 32 bytes of memory, and a
// victim is chosen by sampling (nodeVictim), not by keeping the keys in order of use.
type nodeBlock struct {
	name string
	keys []didkey.PublicKey
	at   int // index in top
}

func (b *nodeBlock) held() int   { return len(b.keys) }
func (b *nodeBlock) index() *int { return &b.at }

// add records key as held by block. The caller holds mu.
func (nb *nodeBlocks) add(key didkey.PublicKey, block string) {
	if nb.blocks == nil {
		nb.blocks = map[string]*nodeBlock{}
	}
	b, ok := nb.blocks[block]
	if !ok {
		b = &nodeBlock{name: block}
		nb.blocks[block] = b
		heap.Push(&nb.top, b)
	}
	b.keys = append(b.keys, key)
	heap.Fix(&nb.top, b.at)
	if nb.touched != nil {
		nb.touched[key] = true
	}
}

// remove forgets key of block. The caller holds mu.
func (nb *nodeBlocks) remove(key didkey.PublicKey, block string) {
	if nb.touched != nil {
		nb.touched[key] = true
	}
	b, ok := nb.blocks[block]
	if !ok {
		return
	}
	i := slices.Index(b.keys, key)
	if i < 0 {
		return
	}
	last := len(b.keys) - 1
	b.keys[i] = b.keys[last]
	b.keys = b.keys[:last]
	if last == 0 {
		heap.Remove(&nb.top, b.at)
		delete(nb.blocks, block)
		return
	}
	heap.Fix(&nb.top, b.at)
}

// count is how many keys block holds.
func (nb *nodeBlocks) count(block string) int {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if b, ok := nb.blocks[block]; ok {
		return len(b.keys)
	}
	return 0
}

// hold takes a place in block's quota for a new key, unless block holds quota keys with
// the places already taken; it reports whether it did. The registration ends the hold with
// written or release.
func (nb *nodeBlocks) hold(block string, quota int) bool {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	held := nb.pending[block]
	if b, ok := nb.blocks[block]; ok {
		held += len(b.keys)
	}
	if held >= quota {
		return false
	}
	if nb.pending == nil {
		nb.pending = map[string]int{}
	}
	nb.pending[block]++
	return true
}

// release gives back a hold whose key was not written.
func (nb *nodeBlocks) release(block string) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.unhold(block)
}

func (nb *nodeBlocks) unhold(block string) {
	if nb.pending[block]--; nb.pending[block] <= 0 {
		delete(nb.pending, block)
	}
}

// written ends a hold with what the committed write did: key added for block, and
// displaced (when not nil) removed from its block.
func (nb *nodeBlocks) written(key didkey.PublicKey, block string, displaced *store.Node) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.unhold(block)
	if displaced != nil {
		nb.remove(displaced.Key, displaced.AddressBlock)
	}
	nb.add(key, block)
}

// dropped records nodes deleted from the store.
func (nb *nodeBlocks) dropped(gone []store.Node) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	for _, n := range gone {
		nb.remove(n.Key, n.AddressBlock)
	}
}

// candidates returns up to n keys sampled from the block holding the most, when it holds at
// least two more than block (so that a displacement never leaves the newcomer's block
// holding more than the victim's, and blocks at an even share never churn each other's
// records); nil when there is none.
func (nb *nodeBlocks) candidates(block string, n int) []didkey.PublicKey {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if len(nb.top) == 0 {
		return nil
	}
	b := nb.top[0]
	mine := 0
	if m, ok := nb.blocks[block]; ok {
		mine = len(m.keys)
	}
	if b.name == block || len(b.keys) < mine+2 {
		return nil
	}
	if len(b.keys) <= n {
		return slices.Clone(b.keys)
	}
	out := make([]didkey.PublicKey, 0, n)
	for _, i := range rand.Perm(len(b.keys))[:n] {
		out = append(out, b.keys[i])
	}
	return out
}

// load counts the blocks from the store once.
func (nb *nodeBlocks) load(ctx context.Context, st store.Store) error {
	return loadOnce(&nb.mu, &nb.loaded, func() error { return nb.refresh(ctx, st) })
}

// refresh counts the blocks again from the store, keeping what memory changed meanwhile. It
// builds the new count beside the old, 32 bytes a key, not a copy of the table.
func (nb *nodeBlocks) refresh(ctx context.Context, st store.Store) error {
	nb.mu.Lock()
	nb.touched = map[didkey.PublicKey]bool{}
	nb.mu.Unlock()
	fresh := &nodeBlocks{}
	err := st.ScanNodes(ctx, func(n *store.Node) error {
		nb.mu.Lock()
		skip := nb.touched[n.Key]
		nb.mu.Unlock()
		if !skip {
			fresh.add(n.Key, n.AddressBlock)
		}
		return nil
	})
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if err != nil {
		nb.touched = nil
		return err
	}
	// Keys memory changed since the count began stay as memory has them.
	for _, b := range nb.blocks {
		for _, k := range b.keys {
			if nb.touched[k] && !fresh.has(k, b.name) {
				fresh.add(k, b.name)
			}
		}
	}
	nb.blocks, nb.top, nb.touched, nb.loaded = fresh.blocks, fresh.top, nil, true
	return nil
}

// has reports whether block holds key. The caller holds mu (or owns nb alone).
func (nb *nodeBlocks) has(key didkey.PublicKey, block string) bool {
	b, ok := nb.blocks[block]
	return ok && slices.Contains(b.keys, key)
}

// placeNode makes room for a new key from block within a registration's transaction: a place
// in the block's quota (held, which the caller ends with nodeBlocks.written or release), and
// a place under MaxNodes (reserved, which the caller settles after the write), else the
// record the key displaces (nodeVictim), deleted here and returned. It refuses a block that
// holds MaxNodesPerBlock records.
func (s *Service) placeNode(tx store.Tx, block string, held, reserved *bool) (*store.Node, error) {
	if !*held {
		if !s.nodeBlocks.hold(block, s.limits.MaxNodesPerBlock) {
			return nil, rateLimited(LimitNodesPerBlock, "this address block holds as many nodes as it may; try again when one expires")
		}
		*held = true
	}
	if *reserved {
		return nil, nil
	}
	if _, ok := s.nodes.reserve(s.limits.MaxNodes); ok {
		*reserved = true
		return nil, nil
	}
	victim, err := s.nodeVictim(tx, block)
	if err != nil {
		return nil, err
	}
	if err := tx.DeleteNode(victim.Key); err != nil {
		return nil, err
	}
	return &victim, nil
}

// nodeVictimSample is how many records of the block holding the most a full table reads to
// choose the one a newcomer displaces: the least recently seen of them that is not bound.
// Sampling keeps a displacement at a few reads whatever the block's size, at the price of
// choosing among the least recently seen of a sample, not of the whole block.
const nodeVictimSample = 16

// nodeVictim chooses, within a registration's transaction, the record a new key from block
// displaces from a full table: among a sample of the block holding the most, the least
// recently seen that has no active binding. A bound node is never displaced. It refuses when
// no block holds at least two more than block, or when every sampled record is bound.
func (s *Service) nodeVictim(tx store.Tx, block string) (store.Node, error) {
	var victim store.Node
	found := false
	for _, k := range s.nodeBlocks.candidates(block, nodeVictimSample) {
		n, err := tx.Node(k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return store.Node{}, err
		}
		if found && !n.LastSeen.Before(victim.LastSeen) {
			continue
		}
		if _, err := tx.Binding(k); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return store.Node{}, err
		}
		victim, found = n, true
	}
	if !found {
		s.capReached(&s.warnNodes, "nodes", s.limits.MaxNodes)
		return store.Node{}, rateLimited(LimitNodes, "the registry holds as many nodes as it may; try again later")
	}
	return victim, nil
}

// nodeExpiry is how long a node that is not bound may go unseen before the sweep removes it.
func (s *Service) nodeExpiry() time.Duration {
	return time.Duration(min(s.limits.NodeExpiryHours, maxNodeExpiryHours)) * time.Hour
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
			s.nodeBlocks.dropped(gone)
			s.nodes.drop(len(gone))
			s.nodesChanged()
			s.log.Info("nodes expired", "count", len(gone), "unseen_for", s.nodeExpiry().String())
		}
	}
	return nil
}

// drop takes n records deleted from the store off the count.
func (c *nodeCount) drop(n int) {
	c.mu.Lock()
	c.n = max(c.n-n, c.inFlight)
	c.mu.Unlock()
}
