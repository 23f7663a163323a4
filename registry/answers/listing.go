package answers

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The node listings — GET /nodes, GET /peers and GET /api/v1/peers (docs/protocol.md §5.1) —
// are the registry's largest answers and the ones any stranger may ask for as often as it
// likes. This file holds the filter, the snapshot of the whole table that every answer is
// cut from, the cache that keeps it, and the JSON of one record; pages.go cuts an answer out
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
	if (f.OnlineWithin > 0 || f.OnlineSet) && now.Sub(n.LastSeen) > f.OnlineWithin {
		return false
	}
	if f.Region != "" && n.Region != f.Region {
		return false
	}
	for _, c := range f.Capabilities {
		if !slices.Contains(n.Capabilities, c) {
			return false
		}
	}
	return !f.Callable || (n.SignatureVerified && api.Reachability(n.Endpoint) == api.ReachPublic)
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
	var out []*store.Node
	keep := func(n *store.Node) error {
		if Keep(f, n, now) {
			out = append(out, n)
		}
		return nil
	}
	err := table.ScanNodes(ctx, keep)
	slices.SortFunc(out, func(a, b *store.Node) int {
		if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
			return c
		}
		return bytes.Compare(a.Key[:], b.Key[:])
	})
	return out, err
}

// Snapshot is the whole node table encoded once, at one version: the JSON of every
// record (for GET /nodes and /api/v1/peers) and its /peers line, in listing order. Every
// listing, whatever its filter, is written from the one current snapshot by picking records
// out of it, so a thousand distinct filters cost one encoding and no copies, and a listing
// holds at most the table's records, each at most the largest record.
type Snapshot struct {
	v     Version
	cache *Listings     // the cache it was built for
	ready chan struct{} // closed once the fields below are set
	err   error

	nodes    []*store.Node
	json     []byte // the records' JSON joined by ','
	jsonEnd  []int  // record i is json[start(i):jsonEnd[i]], start(i) = jsonEnd[i-1]+1
	peers    []byte // the /peers lines, one after another
	peersEnd []int
	seen     []int64 // each record's last_seen in Unix seconds, for changed_since

	// base is the snapshot this one replaces, while this one is built from it; index maps
	// each key to its record's place, shared by the snapshots patched from one build.
	base  *Snapshot
	spare []byte // a buffer the patch may copy base's JSON into, while this one is built
	index map[didkey.PublicKey]int32

	size   int // bytes held, for Bounds.MaxBytes
	gzHeld int // bytes of the gzip forms kept with it, for Bounds.MaxGzipBytes
	refs   int // readers using it, plus one while it is the cache's current snapshot

	variants map[string]*variant // the answers given from it, by variantKey; under Listings.mu
}

func (s *Snapshot) jsonRecord(i int) []byte {
	start := 0
	if i > 0 {
		start = s.jsonEnd[i-1] + 1
	}
	return s.json[start:s.jsonEnd[i]]
}

func (s *Snapshot) peerLine(i int) []byte {
	start := 0
	if i > 0 {
		start = s.peersEnd[i-1]
	}
	return s.peers[start:s.peersEnd[i]]
}

// Listings keeps the current snapshot. A snapshot is reused while no registration has
// changed the node table since it was built, and — when heartbeats have moved last_seen
// since — while the registry clock stays in the second it was built in. So a listing is at
// most one second stale (timestamps have one-second precision), and an unchanging table is
// encoded once. One snapshot is built at a time: readers that arrive meanwhile wait for it.
// The snapshots held at once (the current one and older ones that slow readers are still
// being sent) stay within [Bounds.MaxBytes].
type Listings struct {
	bounds Bounds
	now    func() time.Time // the registry's clock, in whole seconds

	mu   sync.Mutex
	cur  *Snapshot
	held int // bytes of every snapshot still referenced
	// spare is the JSON buffer of the last snapshot no reader holds any more, for the next
	// patched snapshot to copy into: a fresh buffer of the table's size every second costs
	// several times the copy in page faults. It is kept only while held leaves room for it.
	spare []byte
}

// Bounds are the listings' bounds. They are the registry's, kept with its other bounds and
// their reasons (package registry/limits), and handed in by it.
type Bounds struct {
	MaxBytes     int // the memory the snapshots held at once and their spare buffer take
	MaxGzipBytes int // the gzip forms one snapshot keeps of its answers
	MaxVariants  int // the distinct answers a snapshot keeps the tag and gzip form of
	MaxPage      int // the largest page a listing answers
	MaxCursorKey int // the longest tie-breaking key a cursor carries
}

// NewListings returns an empty cache; now is the registry's clock in whole seconds, the
// clock of the online filters.
func NewListings(b Bounds, now func() time.Time) *Listings {
	return &Listings{bounds: b, now: now}
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
	s := &Snapshot{v: now, cache: c, ready: make(chan struct{}), refs: 2} // the cache's and ours
	c.cur = s
	if cur != nil {
		// The build may start from the snapshot it replaces: it is held until then.
		if cur.err == nil {
			s.base, s.spare, c.spare = cur, c.spare, nil
			cur.refs++
		}
		c.drop(cur)
	}
	c.mu.Unlock()

	err := build(s)
	c.mu.Lock()
	if s.base != nil {
		c.drop(s.base)
		s.base, s.spare = nil, nil
	}
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

// used is the bytes the listings hold, their spare buffer included; c.mu is held.
func (c *Listings) used() int { return c.held + cap(c.spare) }

func (c *Listings) release(s *Snapshot) {
	c.mu.Lock()
	c.drop(s)
	c.mu.Unlock()
}

// drop removes one reference; c.mu is held.
func (c *Listings) drop(s *Snapshot) {
	if s.refs--; s.refs == 0 {
		c.held -= s.size
		if c.spare == nil && c.used()+cap(s.json) <= c.bounds.MaxBytes {
			c.spare = s.json[:0]
		}
	}
}

// Build encodes the whole node table into snap, or patches the snapshot it replaces when
// only heartbeats have changed the table since.
func (snap *Snapshot) Build(ctx context.Context, table Scanner) error {
	if base := snap.base; base != nil && base.v.Registrations == snap.v.Registrations {
		if ok, err := snap.patch(ctx, table, base); ok || err != nil {
			return err
		}
	}
	nodes, err := SortedNodes(ctx, table, api.NodeFilter{}, snap.cache.now())
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
	snap.seen = make([]int64, len(nodes))
	for i, n := range nodes {
		snap.seen[i] = n.LastSeen.Unix()
		if i > 0 {
			snap.json = append(snap.json, ',')
		}
		snap.json = appendNodeJSON(snap.json, *n)
		snap.jsonEnd[i] = len(snap.json)
		snap.peers = appendPeerLine(snap.peers, n)
		snap.peersEnd[i] = len(snap.peers)
	}
	snap.size = cap(snap.json) + cap(snap.peers) + len(nodes)*snapshotWordsPerNode*8
	return nil
}

// snapshotWordsPerNode is what a snapshot holds per record besides its encodings: the
// pointer, the two offsets and last_seen.
const snapshotWordsPerNode = 4

// patch builds snap from base when the table holds the same nodes in the same order
// and every record that changed encodes to as many bytes as before, as a heartbeat's new
// last_seen does: a copy of base's JSON with those records written over, while the /peers
// lines, which a heartbeat does not change, are shared. A heartbeat a second over a large
// table would otherwise cost a whole encoding of the table each second. It reports false,
// and leaves snap for a whole build, when the table changed in any other way.
func (snap *Snapshot) patch(ctx context.Context, table Scanner, base *Snapshot) (bool, error) {
	index := base.index
	if index == nil {
		index = make(map[didkey.PublicKey]int32, len(base.nodes))
		for i, n := range base.nodes {
			index[n.Key] = int32(i)
		}
	}
	var changed []int32
	nodes := slices.Clone(base.nodes)
	same, count := true, 0
	err := table.ScanNodes(ctx, func(n *store.Node) error {
		i, ok := index[n.Key]
		count++
		switch {
		case !ok || count > len(nodes):
			same = false
		case nodes[i] != n:
			nodes[i] = n
			changed = append(changed, i)
		}
		return nil
	})
	if err != nil || !same || count != len(nodes) {
		return false, err
	}
	json, seen := append(snap.spare[:0], base.json...), slices.Clone(base.seen)
	var rec []byte
	for _, i := range changed {
		n, was := nodes[i], base.nodes[i]
		old := base.jsonRecord(int(i))
		rec = appendNodeJSON(rec[:0], *n)
		if len(rec) != len(old) || !n.FirstSeen.Equal(was.FirstSeen) || !bytes.Equal(appendPeerLine(nil, n), base.peerLine(int(i))) {
			return false, nil
		}
		copy(json[base.jsonEnd[i]-len(old):], rec)
		seen[i] = n.LastSeen.Unix()
	}
	snap.nodes, snap.index, snap.json, snap.seen = nodes, index, json, seen
	snap.jsonEnd, snap.peers, snap.peersEnd = base.jsonEnd, base.peers, base.peersEnd
	snap.size = cap(snap.json) + cap(snap.peers) + len(nodes)*snapshotWordsPerNode*8 + len(index)*(len(didkey.PublicKey{})+8)
	return true, nil
}

// appendPeerLine appends n's /peers line.
func appendPeerLine(b []byte, n *store.Node) []byte {
	b = append(b, n.DID...)
	b = append(b, ' ')
	b = append(b, n.Key.Base58()...)
	b = append(b, ' ')
	b = append(b, n.Endpoint...)
	return append(b, '\n')
}

// The node listings are the registry's largest answers, a few hundred bytes of JSON per node.
// Encoding them with encoding/json goes through a NodeView per record and a buffer that
// doubles as it grows, several times the answer's size in garbage. appendNodeJSON
// writes a record straight into one buffer instead, producing exactly the bytes that
// json.Marshal(NodeView(n)) produces (a property test holds it to that).

// NodeView is the view of the node record n that the listings and a registration's answer
// give.
func NodeView(n store.Node) api.NodeView {
	caps := n.Capabilities
	if caps == nil {
		caps = []string{}
	}
	v := api.NodeView{
		DID: n.DID, PublicKey: n.Key.Hex(), Endpoint: n.Endpoint,
		Capabilities: caps, Status: "active",
		LastSeen: canonical.FormatTime(n.LastSeen), FirstSeen: canonical.FormatTime(n.FirstSeen),
		Signature: n.Signature, SignaturePresent: n.Signature != nil,
		SignatureVerified: n.SignatureVerified, Reachability: api.Reachability(n.Endpoint),
		RegistrationTS: n.RegistrationTS,
	}
	if n.Region != "" {
		v.Region = &n.Region
	}
	return v
}

// appendNodeJSON appends the JSON of n as NodeView renders it.
func appendNodeJSON(b []byte, n store.Node) []byte {
	b = append(b, `{"did":`...)
	b = appendJSONString(b, n.DID)
	b = append(b, `,"public_key":"`...)
	b = hex.AppendEncode(b, n.Key[:])
	b = append(b, `","endpoint":`...)
	b = appendJSONString(b, n.Endpoint)
	b = append(b, `,"capabilities":[`...)
	for i, c := range n.Capabilities {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c)
	}
	b = append(b, `],"region":`...)
	if n.Region == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, n.Region)
	}
	b = append(b, `,"status":"active","last_seen":"`...)
	b = canonical.AppendTime(b, n.LastSeen)
	b = append(b, `","first_seen":"`...)
	b = canonical.AppendTime(b, n.FirstSeen)
	b = append(b, `","signature":`...)
	if n.Signature == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *n.Signature)
	}
	b = append(b, `,"signature_present":`...)
	b = strconv.AppendBool(b, n.Signature != nil)
	b = append(b, `,"signature_verified":`...)
	b = strconv.AppendBool(b, n.SignatureVerified)
	b = append(b, `,"reachability":"`...)
	b = append(b, api.Reachability(n.Endpoint)...)
	b = append(b, `","registration_ts":`...)
	if n.RegistrationTS == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *n.RegistrationTS, 10)
	}
	return append(b, '}')
}

// nodeJSONSize estimates the length of appendNodeJSON's output, so that a listing's buffer
// is allocated once.
func nodeJSONSize(n store.Node) int {
	size := 370 + len(n.DID) + len(n.Endpoint) + len(n.Region)
	for _, c := range n.Capabilities {
		size += len(c) + 3
	}
	if n.Signature != nil {
		size += len(*n.Signature)
	}
	return size
}

// appendJSONString appends s as a JSON string exactly as encoding/json writes it: '"' and
// '\\' escaped, control characters as \n, \r, \t, \b, \f or \u00XX, the HTML characters <, > and &
// as \u003c, \u003e and \u0026, U+2028 and U+2029 as escapes, and invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const digits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', digits[c>>4], digits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', digits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
