package answers

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/svrp/svrp/canonical"
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

// appendPeerLine appends n's /peers line.
func appendPeerLine(b []byte, n *store.NodeRow) []byte {
	b = n.AppendDID(b)
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
	row := store.RowOf(&n)
	return appendRecordJSON(b, &row, api.Reachability(n.Endpoint), nil)
}

// timeMemo keeps the last times a listing wrote, as text: the records of a table share a
// few seconds of last_seen and first_seen, and formatting a time costs more than the rest of
// a record's fields.
type timeMemo struct {
	at   [2]int64
	text [2][]byte
}

// appendTime appends canonical.AppendTime of t, from slot of the memo when it holds t.
func (m *timeMemo) appendTime(b []byte, slot int, t time.Time) []byte {
	if m == nil || t.Nanosecond() != 0 {
		return canonical.AppendTime(b, t)
	}
	if sec := t.Unix(); m.text[slot] == nil || m.at[slot] != sec {
		m.at[slot], m.text[slot] = sec, canonical.AppendTime(m.text[slot][:0], t)
	}
	return append(b, m.text[slot]...)
}

// appendRecordJSON appends the JSON of *n as NodeView renders it, given its reachability,
// formatting its times through memo when it is not nil.
func appendRecordJSON(b []byte, n *store.NodeRow, reach string, memo *timeMemo) []byte {
	b = append(b, `{"did":`...)
	if n.DIDDerived() {
		b = append(n.AppendDID(append(b, '"')), '"')
	} else {
		b = appendText(b, n.DID, n.Plain)
	}
	b = append(b, `,"public_key":"`...)
	b = hex.AppendEncode(b, n.Key[:])
	b = append(b, `","endpoint":`...)
	b = appendText(b, n.Endpoint, n.Plain)
	b = append(b, `,"capabilities":[`...)
	for i, c := range n.Capabilities {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendText(b, c, n.Plain)
	}
	b = append(b, `],"region":`...)
	if n.Region == "" {
		b = append(b, "null"...)
	} else {
		b = appendText(b, n.Region, n.Plain)
	}
	b = append(b, `,"status":"active","last_seen":"`...)
	b = memo.appendTime(b, 0, n.LastSeen)
	b = append(b, `","first_seen":"`...)
	b = memo.appendTime(b, 1, n.FirstSeen)
	b = append(b, `","signature":`...)
	if !n.HasSignature {
		b = append(b, "null"...)
	} else {
		b = appendText(b, n.Signature, n.Plain)
	}
	b = append(b, `,"signature_present":`...)
	b = strconv.AppendBool(b, n.HasSignature)
	b = append(b, `,"signature_verified":`...)
	b = strconv.AppendBool(b, n.SignatureVerified)
	b = append(b, `,"reachability":"`...)
	b = append(b, reach...)
	b = append(b, `","registration_ts":`...)
	if !n.HasRegistrationTS {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, n.RegistrationTS, 10)
	}
	return append(b, '}')
}

// appendText appends s as a JSON string: as it is when plain (store.NodeRow.Plain), else
// through appendJSONString.
func appendText(b []byte, s string, plain bool) []byte {
	if !plain {
		return appendJSONString(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// textLen is the length of appendText's output.
func textLen(s string, plain bool) int {
	if plain {
		return len(s) + 2
	}
	return jsonStringLen(s)
}

// nodeJSONLen is the length of appendRecordJSON's output for *n of reachability reach,
// computed without writing it.
func nodeJSONLen(n *store.NodeRow, reach string) int {
	didLen := n.DIDLen() + 2
	if !n.DIDDerived() {
		didLen = textLen(n.DID, n.Plain)
	}
	size := len(`{"did":`) + didLen + len(`,"public_key":"`) + 2*len(n.Key) +
		len(`","endpoint":`) + textLen(n.Endpoint, n.Plain) + len(`,"capabilities":[`) + len(`],"region":`) +
		len(`,"status":"active","last_seen":"`) + len(canonical.TimeLayout) +
		len(`","first_seen":"`) + len(canonical.TimeLayout) + len(`","signature":`) +
		len(`,"signature_present":`) + len(`,"signature_verified":`) + len(`,"reachability":"`) +
		len(reach) + len(`","registration_ts":`) + len(`}`)
	for i, c := range n.Capabilities {
		if i > 0 {
			size++
		}
		size += textLen(c, n.Plain)
	}
	if n.Region == "" {
		size += len("null")
	} else {
		size += textLen(n.Region, n.Plain)
	}
	if !n.HasSignature {
		size += len("null") + len("false")
	} else {
		size += textLen(n.Signature, n.Plain) + len("true")
	}
	if n.SignatureVerified {
		size += len("true")
	} else {
		size += len("false")
	}
	if !n.HasRegistrationTS {
		size += len("null")
	} else {
		size += intLen(n.RegistrationTS)
	}
	return size
}

// intLen is the length of v in decimal.
func intLen(v int64) int {
	size := 1
	if v < 0 {
		size++
	}
	for ; v >= 10 || v <= -10; v /= 10 {
		size++
	}
	return size
}

// peerLineLen is the length of appendPeerLine's output for n, computed without writing it.
func peerLineLen(n *store.NodeRow) int {
	return n.DIDLen() + 1 + base58Len(n.Key[:]) + 1 + len(n.Endpoint) + 1
}

// base58Pow holds 58^d for d = 0…44 as 33 big-endian bytes: the smallest numbers of
// d+1 base58 digits, against which a key's length is read without encoding it.
var base58Pow = func() (pow [45][33]byte) {
	p := big.NewInt(1)
	for d := range pow {
		p.FillBytes(pow[d][:])
		p.Mul(p, big.NewInt(58))
	}
	return pow
}()

// base58Len is the length of the base58 text of b (Bitcoin alphabet, one '1' per leading
// zero byte), for b of at most 32 bytes.
func base58Len(b []byte) int {
	if len(b) == 32 && b[0] != 0 {
		// The common case, a key of 32 bytes whose first is not zero: at least 58^42 and
		// less than 58^44, so one comparison decides.
		if bytes.Compare(b, base58Pow[43][1:]) >= 0 {
			return 44
		}
		return 43
	}
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	var v [33]byte
	copy(v[33-len(b):], b)
	digits := 0
	for digits < len(base58Pow) && bytes.Compare(v[:], base58Pow[digits][:]) >= 0 {
		digits++
	}
	return zeros + digits
}

// jsonStringLen is the length of appendJSONString's output for s, computed without writing it.
func jsonStringLen(s string) int {
	size := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
				size++
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				size += 2
			default:
				size += 6
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1, r == '\u2028' || r == '\u2029':
			size += 6
		default:
			size += n
		}
		i += n
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
