package registry

import (
	"context"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// listSnapshot is the whole node table encoded once, at one version: the JSON of every
// record (for GET /nodes and /api/v1/peers) and its /peers line, in listing order. Every
// listing, whatever its filter, is written from the one current snapshot by picking records
// out of it, so a thousand distinct filters cost one encoding and no copies, and a listing
// holds at most the table's records, each at most the largest record.
type listSnapshot struct {
	v     listVersion
	ready chan struct{} // closed once the fields below are set
	err   error

	nodes    []*store.Node
	json     []byte // the records' JSON joined by ','
	jsonEnd  []int  // record i is json[start(i):jsonEnd[i]], start(i) = jsonEnd[i-1]+1
	peers    []byte // the /peers lines, one after another
	peersEnd []int

	size int // bytes held, for maxListingBytes
	refs int // readers using it, plus one while it is the cache's current snapshot
}

func (s *listSnapshot) jsonRecord(i int) []byte {
	start := 0
	if i > 0 {
		start = s.jsonEnd[i-1] + 1
	}
	return s.json[start:s.jsonEnd[i]]
}

func (s *listSnapshot) peerLine(i int) []byte {
	start := 0
	if i > 0 {
		start = s.peersEnd[i-1]
	}
	return s.peers[start:s.peersEnd[i]]
}

// listCache keeps the current snapshot. A snapshot is reused while no registration has
// changed the node table since it was built, and — when heartbeats have moved last_seen
// since — while the registry clock stays in the second it was built in. So a listing is at
// most one second stale (timestamps have one-second precision), and an unchanging table is
// encoded once. One snapshot is built at a time: readers that arrive meanwhile wait for it.
// The snapshots held at once (the current one and older ones that slow readers are still
// being sent) stay within maxListingBytes, see limits.go.
type listCache struct {
	mu   sync.Mutex
	cur  *listSnapshot
	held int // bytes of every snapshot still referenced
}

// listVersion is what a snapshot was built from: the registrations and heartbeats seen so
// far, and the second on the registry clock.
type listVersion struct {
	registrations uint64
	touches       uint64
	second        int64
}

// fresh reports whether a snapshot built at v still serves a request at now.
func (v listVersion) fresh(now listVersion) bool {
	if v.registrations != now.registrations {
		return false
	}
	return v.touches == now.touches || v.second == now.second
}

// get returns a snapshot for now and the function that releases it, building one with
// build when the current one is stale and the memory bound leaves room for another.
func (c *listCache) get(now listVersion, build func(*listSnapshot) error) (*listSnapshot, func(), error) {
	c.mu.Lock()
	cur := c.cur
	if cur != nil && (cur.v.fresh(now) || !c.roomFor(cur)) {
		cur.refs++
		c.mu.Unlock()
		<-cur.ready
		if cur.err != nil {
			c.release(cur)
			return nil, func() {}, cur.err
		}
		return cur, func() { c.release(cur) }, nil
	}
	s := &listSnapshot{v: now, ready: make(chan struct{}), refs: 2} // the cache's and ours
	c.cur = s
	if cur != nil {
		c.drop(cur)
	}
	c.mu.Unlock()

	err := build(s)
	c.mu.Lock()
	s.err = err
	c.held += s.size
	if err != nil && c.cur == s {
		c.cur = nil
		c.drop(s)
	}
	c.mu.Unlock()
	close(s.ready)
	if err != nil {
		c.release(s)
		return nil, func() {}, err
	}
	return s, func() { c.release(s) }, nil
}

// roomFor reports whether a snapshot as large as cur may be built while the snapshots held
// now stay in memory. When only cur is held there is always room: one rebuild at a time is
// the least a changing table needs.
func (c *listCache) roomFor(cur *listSnapshot) bool {
	select {
	case <-cur.ready:
	default:
		return false // being built: wait for it rather than build a second one
	}
	others := c.held - cur.size
	return others == 0 || c.held+cur.size <= maxListingBytes
}

func (c *listCache) release(s *listSnapshot) {
	c.mu.Lock()
	c.drop(s)
	c.mu.Unlock()
}

// drop removes one reference; c.mu is held.
func (c *listCache) drop(s *listSnapshot) {
	if s.refs--; s.refs == 0 {
		c.held -= s.size
	}
}

// buildSnapshot encodes the whole node table into s.
func (s *Service) buildSnapshot(ctx context.Context, snap *listSnapshot) error {
	nodes, err := s.nodeRefs(ctx, api.NodeFilter{})
	if err != nil {
		return err
	}
	jsonSize, peersSize := 0, 0
	for _, n := range nodes {
		jsonSize += nodeJSONSize(*n) + 1
		peersSize += len(n.DID) + len(n.Endpoint) + 48
	}
	snap.nodes = nodes
	snap.json = make([]byte, 0, jsonSize)
	snap.jsonEnd = make([]int, len(nodes))
	snap.peers = make([]byte, 0, peersSize)
	snap.peersEnd = make([]int, len(nodes))
	for i, n := range nodes {
		if i > 0 {
			snap.json = append(snap.json, ',')
		}
		snap.json = appendNodeJSON(snap.json, *n)
		snap.jsonEnd[i] = len(snap.json)
		snap.peers = append(snap.peers, n.DID...)
		snap.peers = append(snap.peers, ' ')
		snap.peers = append(snap.peers, n.Key.Base58()...)
		snap.peers = append(snap.peers, ' ')
		snap.peers = append(snap.peers, n.Endpoint...)
		snap.peers = append(snap.peers, '\n')
		snap.peersEnd[i] = len(snap.peers)
	}
	const wordsPerNode = 3 // the pointer and the two offsets
	snap.size = cap(snap.json) + cap(snap.peers) + len(nodes)*wordsPerNode*8
	return nil
}

// listingSlots lets listingSlotCount listings be written at once (see limits.go).
type listingSlots chan struct{}

// listingSlot waits for a turn to write a listing and reports whether it got one before ctx
// ended. The turn ends when the request does, or listingSlotHold after it began, whichever
// comes first: a reader too slow to take its listing in that time keeps receiving it, but
// no longer holds up anyone else's.
func (s *Service) listingSlot(ctx context.Context) bool {
	select {
	case s.listingTurns <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	release := sync.OnceFunc(func() { <-s.listingTurns })
	timer := time.AfterFunc(listingSlotHold, release)
	context.AfterFunc(ctx, func() {
		timer.Stop()
		release()
	})
	return true
}
