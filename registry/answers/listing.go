package answers

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The node listings — GET /nodes, GET /peers and GET /api/v1/peers (docs/protocol.md §5.1) —
// are the registry's largest answers and the ones any stranger may ask for as often as it
// likes. This file holds the filter, the snapshot of the whole table that every answer is
// cut from, and the cache that keeps it; recordjson.go writes one record, pages.go cuts an answer out
// of a snapshot.

// Kind is what one of the three node listings writes around the records it picks.
type Kind struct {
	// ContentType is the Content-Type header's value, shared by every answer.
	ContentType []string
	head, tail  string
	json        bool // JSON records joined by ','; else /peers lines
	counted     bool // head is followed by the count and `,"nodes":[`
}

// contentTypeJSON is shared by every JSON answer: net/http only reads a header's values, and a
// shared slice saves an allocation per answer.
var contentTypeJSON = []string{"application/json"}

// The three listings.
var (
	NodesListing    = Kind{ContentType: contentTypeJSON, head: `{"count":`, tail: "]}\n", json: true, counted: true}
	APIPeersListing = Kind{ContentType: contentTypeJSON, head: `{"ok":true,"data":[`, tail: `],"error":null}` + "\n", json: true}
	PeersListing    = Kind{ContentType: []string{"text/plain; charset=utf-8"}}
)

// keepsAll reports whether f keeps every record.
func keepsAll(f api.NodeFilter) bool {
	return !f.OnlineSet && f.OnlineWithin <= 0 && len(f.Capabilities) == 0 && f.Region == "" && !f.Callable
}

// Keep reports whether n passes f at now.
func Keep(f api.NodeFilter, n *store.Node, now time.Time) bool {
	return keep(f, n.LastSeen, n.Region, n.Capabilities, n.SignatureVerified, func() string { return api.Reachability(n.Endpoint) }, now)
}

// keep is Keep over a record's fields, its reachability asked for only when needed.
func keep(f api.NodeFilter, seen time.Time, region string, caps []string, verified bool, reach func() string, now time.Time) bool {
	if (f.OnlineWithin > 0 || f.OnlineSet) && now.Sub(seen) > f.OnlineWithin {
		return false
	}
	if f.Region != "" && region != f.Region {
		return false
	}
	for _, c := range f.Capabilities {
		if !slices.Contains(caps, c) {
			return false
		}
	}
	return !f.Callable || (verified && reach() == api.ReachPublic)
}

// Scanner is what the answers read the node table through: a [store.Store] is one.
type Scanner interface {
	ScanNodes(ctx context.Context, fn func(*store.Node) error) error
}

// SortedNodes returns the records of the table that pass f at now, in listing order
// (first_seen, then key), without copies where the store allows it: a store that holds the
// node table in memory hands out its own unchanging records, so a listing of a large table
// needs a slice of pointers rather than a copy of the table.
func SortedNodes(ctx context.Context, table Scanner, f api.NodeFilter, now time.Time) ([]*store.Node, error) {
	return sortedNodes(ctx, table, f, now, 0)
}

// sortedNodes is SortedNodes expecting about hint records.
func sortedNodes(ctx context.Context, table Scanner, f api.NodeFilter, now time.Time, hint int) ([]*store.Node, error) {
	if hint == 0 {
		// Without a size to expect, one pass to count costs less than growing the slices a
		// quarter at a time, which allocates several times their final size over a large
		// table.
		err := table.ScanNodes(ctx, func(*store.Node) error { hint++; return nil })
		if err != nil {
			return nil, err
		}
	}
	o := order{nodes: make([]*store.Node, 0, hint), keys: make([]sortKey, 0, hint), whole: true}
	err := table.ScanNodes(ctx, func(n *store.Node) error {
		if Keep(f, n, now) {
			o.whole = o.whole && n.FirstSeen.Nanosecond() == 0
			o.nodes = append(o.nodes, n)
			o.keys = append(o.keys, sortKey{at: n.FirstSeen.Unix(), key0: binary.BigEndian.Uint64(n.Key[:])})
		}
		return nil
	})
	sort.Sort(o)
	return o.nodes, err
}

// order sorts records into listing order. It compares a copy of each record's sort key,
// kept beside the records rather than with them, so that the sorted records need no copy:
// following the pointers of a large table for every comparison costs a cache miss each.
// first_seen is in whole seconds in every record the registry writes (whole); a table that
// holds another is compared through the pointers.
type order struct {
	nodes []*store.Node
	keys  []sortKey
	whole bool
}

// sortKey is what order compares first: first_seen's second and the key's first 8 bytes.
type sortKey struct {
	at   int64
	key0 uint64
}

func (o order) Len() int { return len(o.nodes) }

func (o order) Swap(i, j int) {
	o.nodes[i], o.nodes[j] = o.nodes[j], o.nodes[i]
	o.keys[i], o.keys[j] = o.keys[j], o.keys[i]
}

func (o order) Less(i, j int) bool {
	a, b := o.nodes[i], o.nodes[j]
	if !o.whole {
		if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
			return c < 0
		}
		return bytes.Compare(a.Key[:], b.Key[:]) < 0
	}
	ka, kb := o.keys[i], o.keys[j]
	if ka.at != kb.at {
		return ka.at < kb.at
	}
	if ka.key0 != kb.key0 {
		return ka.key0 < kb.key0
	}
	return bytes.Compare(a.Key[8:], b.Key[8:]) < 0
}

// Snapshot is the node table at one version, in listing order: the store's list of it
// (store.NodeList, which shares the records of a table held in memory and copies their
// last_seen), and the length of each record's JSON and /peers line and its reachability.
// Every listing, whatever its filter, is cut from the one current snapshot and encoded from
// the records as it is written, so a snapshot holds a few words a record whatever the
// records hold, a listing of the whole table starts at once, and no answer is held whole in
// memory unless it is small (see Selection.Gzip).
type Snapshot struct {
	v     Version
	id    uint64        // names the snapshot in the tags of its large answers
	hint  int           // the records of the snapshot it replaces: about as many as it will hold
	cache *Listings     // the cache it was built for
	ready chan struct{} // closed once the fields below are set
	err   error

	list *store.NodeList
	// memos hold, for each part of the list (starting at starts), the lengths of each
	// record's JSON and /peers line, so that an answer's length is known before its first
	// byte is written, and its reachability.
	memos  []*partMemo
	starts []int
	// jsonTotal and peerTotal are the sums of the lengths.
	jsonTotal, peerTotal int

	size   int // bytes held, for Bounds.MaxBytes
	gzHeld int // bytes of the gzip forms kept with it, for Bounds.MaxGzipBytes
	refs   int // readers using it, plus one while it is the cache's current snapshot

	variants map[string]*variant // the answers given from it, by variantKey; under Listings.mu
}

// Listings keeps the current snapshot. A snapshot is reused while no registration has
// changed the node table since it was built, and — when heartbeats have moved last_seen
// since — while the registry clock stays in the second it was built in. So a listing is at
// most one second stale (timestamps have one-second precision), and an unchanging table is
// visited and sorted once. One snapshot is built at a time: readers that arrive meanwhile wait for it.
// The snapshots held at once (the current one and older ones that slow readers are still
// being sent) stay within [Bounds.MaxBytes].
type Listings struct {
	bounds Bounds
	now    func() time.Time // the registry's clock, in whole seconds

	mu   sync.Mutex
	cur  *Snapshot
	held int // bytes of every snapshot still referenced
	// epoch and built name the snapshots: a random start, so that a restarted registry
	// names none of its snapshots as one before the restart did, and the count since.
	epoch uint64
	built uint64

	// memoMu guards memos: what the snapshots derived from each part of the table's list,
	// kept for the next snapshot, whose parts are mostly the same (see store.NodePart).
	memoMu sync.Mutex
	memos  map[store.NodePart]*partMemo
}

// Bounds are the listings' bounds. They are the registry's, kept with its other bounds and
// their reasons (package registry/limits), and handed in by it.
type Bounds struct {
	MaxBytes     int // the memory the snapshots held at once take, with the answers they keep
	MaxGzipBytes int // the gzip forms one snapshot keeps of its answers
	MaxHeldBytes int // the largest answer of more than a page kept encoded with its snapshot
	MaxVariants  int // the distinct answers a snapshot keeps the tag and gzip form of
	MaxPage      int // the largest page a listing answers
	MaxCursorKey int // the longest tie-breaking key a cursor carries
}

// NewListings returns an empty cache; now is the registry's clock in whole seconds, the
// clock of the online filters.
func NewListings(b Bounds, now func() time.Time) *Listings {
	return &Listings{bounds: b, now: now, epoch: rand.Uint64()}
}

// Version is what a snapshot was built from: the registrations and heartbeats seen so far,
// and the second on the registry clock.
type Version struct {
	Registrations uint64
	Touches       uint64
	Second        int64
}

// fresh reports whether a snapshot built at v still serves a request at now.
func (v Version) fresh(now Version) bool {
	if v.Registrations != now.Registrations {
		return false
	}
	return v.Touches == now.Touches || v.Second == now.Second
}

// Built is the number of snapshots taken so far.
func (c *Listings) Built() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.built
}

// Get returns a snapshot for now and the function that releases it, building one with
// build when the current one is stale and the memory bound leaves room for another.
func (c *Listings) Get(now Version, build func(*Snapshot) error) (*Snapshot, func(), error) {
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
	c.built++
	s := &Snapshot{v: now, id: c.epoch + c.built, cache: c, ready: make(chan struct{}), refs: 2} // the cache's and ours
	c.cur = s
	if cur != nil {
		s.hint = cur.Len()
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
func (c *Listings) roomFor(cur *Snapshot) bool {
	select {
	case <-cur.ready:
	default:
		return false // being built: wait for it rather than build a second one
	}
	others := c.held - cur.size
	return others == 0 || c.used()+cur.size <= c.bounds.MaxBytes
}

// used is the bytes the listings hold; c.mu is held.
func (c *Listings) used() int { return c.held }

func (c *Listings) release(s *Snapshot) {
	c.mu.Lock()
	c.drop(s)
	c.mu.Unlock()
}

// drop removes one reference; c.mu is held.
func (c *Listings) drop(s *Snapshot) {
	if s.refs--; s.refs == 0 {
		c.held -= s.size
	}
}

// Len is the number of records of the snapshot.
func (snap *Snapshot) Len() int {
	if snap.list == nil {
		return 0
	}
	return snap.list.Len()
}

// Build takes the node table into snap: its records in listing order, and what the
// answers cut from them need to know before they are written.
func (snap *Snapshot) Build(ctx context.Context, table Scanner) error {
	list, err := store.ListNodes(ctx, table)
	if err != nil {
		return err
	}
	snap.list = list
	n := list.Len()
	snap.memos = snap.cache.partMemos(list)
	snap.starts = make([]int, len(snap.memos))
	for p, m := range snap.memos {
		_, snap.starts[p], _ = list.Part(p)
		snap.jsonTotal += m.jsonTotal
		snap.peerTotal += m.peerTotal
	}
	if n > 1 {
		snap.jsonTotal += n - 1 // the commas between records
	}
	snap.size = n * snapshotBytesPerNode
	return nil
}

// partMemo is what the listings derive from one part of the table's list: the lengths and
// reachability of its records, and the lengths' sums.
type partMemo struct {
	jsonLen, peerLen     []int32
	reach                []uint8
	jsonTotal, peerTotal int
}

// partMemos returns the memo of each part of list, in order: kept from the snapshot before
// where the part is the same, else derived from its records. Only the current parts' memos
// are kept.
func (c *Listings) partMemos(list *store.NodeList) []*partMemo {
	c.memoMu.Lock()
	defer c.memoMu.Unlock()
	out := make([]*partMemo, list.Parts())
	kept := make(map[store.NodePart]*partMemo, len(out))
	var row store.NodeRow
	for p := range out {
		id, from, to := list.Part(p)
		m := c.memos[id]
		if m == nil {
			m = &partMemo{jsonLen: make([]int32, to-from), peerLen: make([]int32, to-from), reach: make([]uint8, to-from)}
			for i := from; i < to; i++ {
				list.Row(i, &row)
				reach := api.Reachability(row.Endpoint)
				m.reach[i-from] = uint8(slices.Index(reaches, reach))
				m.jsonLen[i-from] = int32(nodeJSONLen(&row, reach))
				m.peerLen[i-from] = int32(peerLineLen(&row))
				m.jsonTotal += int(m.jsonLen[i-from])
				m.peerTotal += int(m.peerLen[i-from])
			}
		}
		kept[id], out[p] = m, m
	}
	c.memos = kept
	return out
}

// snapshotBytesPerNode is what a snapshot holds per record: last_seen in its list, and the
// two lengths and the reachability in the memos it shares with the snapshots before and
// after it.
const snapshotBytesPerNode = 8 + 4 + 4 + 1

// memo returns the memo holding record i and i's index in it.
func (snap *Snapshot) memo(i int) (*partMemo, int) {
	p := sort.Search(len(snap.starts), func(p int) bool { return snap.starts[p] > i }) - 1
	return snap.memos[p], i - snap.starts[p]
}

// reachOf is record i's reachability.
func (snap *Snapshot) reachOf(i int) string {
	m, j := snap.memo(i)
	return reaches[m.reach[j]]
}

// reaches are the reachabilities a record may have, which a snapshot keeps by index.
var reaches = []string{api.ReachPublic, api.ReachPrivate, api.ReachUnroutable}
