package answers

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"hash/crc64"
	"io"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// What makes a listing cheap to ask for again (docs/protocol.md §5.1): a strong ETag per
// answer, so a client that has it gets 304 and no body; gzip, compressed once per snapshot
// and answer and kept with the snapshot; pages that follow a cursor; and changed_since, so
// a watcher fetches what changed rather than the table. The HTTP layer sends the headers;
// this file decides the bytes, the tags and what is kept.

// Cursor is a place in an ordered listing: the sort time and the tie-breaking key of the
// last record a page held. A page continues with the records after it, so records added
// meanwhile (whose first_seen is later than any before) come at the end, and none is
// skipped or repeated.
type Cursor struct {
	at  time.Time
	key []byte
}

// String renders c opaquely: the clients only hand it back.
func (c Cursor) String() string {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(c.key)), uint64(c.at.Unix()))
	return base64.RawURLEncoding.EncodeToString(append(b, c.key...))
}

// after reports whether a record sorted at (at, key) comes after c.
func (c Cursor) after(at time.Time, key []byte) bool {
	if d := at.Compare(c.at); d != 0 {
		return d > 0
	}
	return bytes.Compare(key, c.key) > 0
}

// parseCursor reads a cursor the registry gave; keyLen is the length of its listing's keys
// (0: any, up to maxKey).
func parseCursor(s string, keyLen, maxKey int) (Cursor, error) {
	bad := proto.New(proto.BadRequest, "cursor is not one this listing gave")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 8 || len(b) > 8+maxKey || (keyLen > 0 && len(b) != 8+keyLen) {
		return Cursor{}, bad
	}
	return Cursor{at: time.Unix(int64(binary.BigEndian.Uint64(b)), 0).UTC(), key: b[8:]}, nil
}

// Page reads a listing's paging query once: the page, and the cursor it continues from
// (nil on a first page). keyLen is the length of the listing's tie-breaking keys, 0 when
// they vary.
func (c *Listings) Page(q url.Values, keyLen int) (api.Page, *Cursor, error) {
	p, err := api.ParsePage(q, c.bounds.MaxPage)
	if err != nil || p.Cursor == "" {
		return p, nil, err
	}
	at, err := parseCursor(p.Cursor, keyLen, c.bounds.MaxCursorKey)
	if err != nil {
		return api.Page{}, nil, err
	}
	return p, &at, nil
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// ETag is the strong entity tag of an answer whose bytes emit produces.
func ETag(emit func(func([]byte))) string {
	var sum uint64
	emit(func(b []byte) { sum = crc64.Update(sum, crcTable, b) })
	return `"` + strconv.FormatUint(sum, 16) + `"`
}

// Compress returns the gzip form of what emit produces. Listings are mostly keys and
// signatures, which no level compresses much, so the fastest level loses little and costs
// a fraction of the default's time on a table rebuilt every second.
func Compress(emit func(func([]byte))) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	emit(func(b []byte) { zw.Write(b) })
	zw.Close()
	return buf.Bytes()
}

// Selection is the part of a snapshot one listing answer holds: the records of
// nodes[from:to] that keep keeps (nil keeps all), count of them, and the cursor of the page
// after, "" when this is the last. picked lists them when they are few (at most a page), so
// that writing them does not scan the table again. v is the answer as its snapshot keeps it.
type Selection struct {
	snap     *Snapshot
	k        Kind
	v        *variant
	keep     func(i int) bool
	from, to int
	count    int
	next     string
	picked   []int32
	size     int // the answer's length once Size has computed it
}

// whole reports whether s is the whole listing as it was before pages existed.
func (s *Selection) whole() bool { return s.keep == nil && s.from == 0 && s.to == s.snap.Len() }

// Select picks the answer to a listing of kind k with filter f and page p, continuing after
// c when it is not nil, as the registry's clock stands.
func (snap *Snapshot) Select(k Kind, f api.NodeFilter, p api.Page, c *Cursor) Selection {
	now := snap.cache.now()
	s := snap.selectFrom(k, f, p, c, now)
	s.v = snap.cache.variantOf(&s, variantKey(k, f, p, c, now))
	return s
}

// selectFrom is Select without the variant.
func (snap *Snapshot) selectFrom(k Kind, f api.NodeFilter, p api.Page, c *Cursor, now time.Time) Selection {
	list, total := snap.list, snap.Len()
	s := Selection{snap: snap, k: k, to: total}
	// changed_since reads the list's column of last_seen times, which a scan of the whole
	// table goes through far faster than through the records.
	since := p.ChangedSince.Unix()
	switch {
	case keepsAll(f) && !p.ChangedSince.IsZero():
		s.keep = func(i int) bool { return list.LastSeenUnix(i) >= since }
	case !keepsAll(f):
		var row store.NodeRow
		s.keep = func(i int) bool {
			if !p.ChangedSince.IsZero() && list.LastSeenUnix(i) < since {
				return false
			}
			list.Row(i, &row)
			return keep(f, row.LastSeen, row.Region, row.Capabilities, row.SignatureVerified, func() string { return snap.reachOf(i) }, now)
		}
	}
	if c != nil {
		// The page starts at the first record that comes after the cursor.
		s.from = sort.Search(total, func(i int) bool {
			key := list.Key(i)
			return c.after(list.FirstSeen(i), key[:])
		})
	}
	s.to = s.from
	if s.keep == nil && p.Limit == 0 {
		s.to, s.count = total, total-s.from
		return s
	}
	onlySince := keepsAll(f) && !p.ChangedSince.IsZero()
	for i := s.from; i < total; i++ {
		if onlySince {
			// The common watcher's poll: a tight pass over the column, with no call per record.
			for i < total && list.LastSeenUnix(i) < since {
				i++
			}
			if i == total {
				break
			}
		} else if s.keep != nil && !s.keep(i) {
			continue
		}
		if p.Limit > 0 && s.count == p.Limit {
			key := list.Key(s.to - 1)
			s.next = Cursor{at: list.FirstSeen(s.to - 1), key: key[:]}.String()
			break
		}
		if s.count < snap.cache.bounds.MaxPage {
			s.picked = append(s.picked, int32(i))
		}
		s.count++
		s.to = i + 1
	}
	if s.count > len(s.picked) {
		s.picked = nil
	}
	return s
}

// each calls fn with the index of every record s holds, in order.
func (s *Selection) each(fn func(i int)) {
	if s.picked != nil || s.count == 0 {
		for _, i := range s.picked {
			fn(int(i))
		}
		return
	}
	for i := s.from; i < s.to; i++ {
		if s.keep == nil || s.keep(i) {
			fn(i)
		}
	}
}

// head is the beginning of s's answer, up to its first record.
func (s *Selection) head() []byte {
	head := []byte(s.k.head)
	if s.k.counted {
		head = strconv.AppendInt(head, int64(s.count), 10)
		head = append(head, `,"nodes":[`...)
	}
	return head
}

// tail is the end of s's answer, after its last record.
func (s *Selection) tail() string {
	if s.next == "" || !s.k.json {
		return s.k.tail
	}
	// Every JSON tail closes the array first: the cursor goes right after it.
	return `],"next":"` + s.next + `"` + s.k.tail[1:]
}

// writeBuffer is how much of an answer is encoded before it is handed on: a listing costs
// this much per reader being sent it, not a copy of the listing. It is no bound: larger
// hands on in fewer writes, smaller holds less per reader.
const writeBuffer = 32 << 10

// emit hands the bytes of s's answer to f, in order, encoding the records as it goes and
// handing them on writeBuffer bytes at a time. f must not keep the slice it is given.
func (s *Selection) emit(f func([]byte)) {
	snap := s.snap
	buf := make([]byte, 0, writeBuffer+writeBuffer/4)
	buf = append(buf, s.head()...)
	first := true
	var memo timeMemo
	var row store.NodeRow
	s.each(func(i int) {
		snap.list.Row(i, &row)
		if s.k.json {
			if !first {
				buf = append(buf, ',')
			}
			buf = appendRecordJSON(buf, &row, snap.reachOf(i), &memo)
		} else {
			buf = appendPeerLine(buf, &row)
		}
		first = false
		if len(buf) >= writeBuffer {
			f(buf)
			buf = buf[:0]
		}
	})
	f(append(buf, s.tail()...))
}

// Next is the cursor of the page after s, "" when s is the last.
func (s *Selection) Next() string { return s.next }

// Tag is the strong entity tag of s's answer, computed once per snapshot and query.
func (s *Selection) Tag() string { return s.v.tag }

// Size is the length of s's answer, known before any of it is encoded.
func (s *Selection) Size() int {
	if s.size == 0 {
		s.size = s.measure()
	}
	return s.size
}

// measure is Size, computed.
func (s *Selection) measure() int {
	size := len(s.head()) + len(s.tail())
	switch {
	case s.whole() && s.k.json:
		return size + s.snap.jsonTotal
	case s.whole():
		return size + s.snap.peerTotal
	}
	records := 0
	s.each(func(i int) {
		m, j := s.snap.memo(i)
		if s.k.json {
			size += int(m.jsonLen[j])
		} else {
			size += int(m.peerLen[j])
		}
		records++
	})
	if s.k.json && records > 1 {
		size += records - 1
	}
	return size
}

// Write sends s's answer to w: from its encoding kept with its snapshot when it is held
// (see held) and asked for more than once, else as it is encoded.
func (s *Selection) Write(w io.Writer) {
	if plain := s.plain(); plain != nil {
		w.Write(plain)
		return
	}
	s.emit(func(b []byte) { w.Write(b) })
}

// plain returns the encoding of s kept with its snapshot, encoding it on its second asking,
// or nil when it is small (a page is encoded in a moment), not held or beyond the memory
// the listings may hold.
func (s *Selection) plain() []byte {
	c, v := s.snap.cache, s.v
	if s.small() || !v.kept || !s.held() || v.plainAsked.Add(1) < 2 {
		return nil
	}
	v.plainOnce.Do(func() {
		size := s.Size()
		c.mu.Lock()
		room := c.used()+size <= c.bounds.MaxBytes
		if room {
			s.snap.size += size
			c.held += size
		}
		c.mu.Unlock()
		if !room {
			return
		}
		b := make([]byte, 0, size)
		s.emit(func(p []byte) { b = append(b, p...) })
		v.plain = b
	})
	return v.plain
}

// WriteGzip sends the gzip form of s's answer to w as it is encoded and compressed, at the
// level Compress uses.
func (s *Selection) WriteGzip(w io.Writer) {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	s.emit(func(b []byte) { zw.Write(b) })
	zw.Close()
}

// held reports whether s's answer may be kept encoded with its snapshot: a small one, or a
// larger one within Bounds.MaxHeldBytes, which watchers of a table of moderate size ask
// for whole again and again. Beyond that bound an answer is encoded each time it is asked
// for, so that the memory a listing holds does not grow with the table.
func (s *Selection) held() bool {
	return s.small() || s.Size() <= s.snap.cache.bounds.MaxHeldBytes
}

// small reports whether s holds at most a page of records. A small answer is tagged by its
// bytes and its gzip form may be kept, as a page's is encoded in a moment and held in
// little; a larger one is tagged by its snapshot and query and never held whole, so that a
// listing of the whole table costs no memory in proportion to the table and its first byte
// leaves at once.
func (s *Selection) small() bool { return s.count <= s.snap.cache.bounds.MaxPage }

// variant is what a snapshot keeps of one answer it gave: its entity tag, and its gzip form
// once a client asked for it.
type variant struct {
	tagOnce sync.Once
	tag     string
	gzOnce  sync.Once
	gz      []byte // nil when it did not fit within Bounds.MaxBytes
	kept    bool   // in its snapshot's variants
	gzAsked atomic.Int32
	// plain is the encoding of an answer larger than a page but held (Selection.held), once
	// it is asked for a second time and while the listings held stay within their bounds.
	plainOnce  sync.Once
	plain      []byte
	plainAsked atomic.Int32
}

// variantKey names an answer of a snapshot: its kind and its query, spelled canonically, and
// for a filter on being online the second it was answered in, since which nodes are online
// changes with the clock while the snapshot does not.
func variantKey(k Kind, f api.NodeFilter, p api.Page, c *Cursor, now time.Time) string {
	q := f.Query()
	if f.OnlineSet || f.OnlineWithin > 0 {
		q.Set("at", strconv.FormatInt(now.Unix(), 10))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if c != nil {
		q.Set("cursor", c.String())
	}
	if !p.ChangedSince.IsZero() {
		q.Set("changed_since", strconv.FormatInt(p.ChangedSince.Unix(), 10))
	}
	return k.head + " " + q.Encode()
}

// variantOf returns the variant of s kept with its snapshot under key, with its entity tag
// computed once; a snapshot keeps at most Bounds.MaxVariants, and beyond them each answer
// gets a variant of its own.
func (c *Listings) variantOf(s *Selection, key string) *variant {
	snap := s.snap
	c.mu.Lock()
	v, ok := snap.variants[key]
	if !ok {
		v = &variant{kept: len(snap.variants) < c.bounds.MaxVariants}
		if v.kept {
			if snap.variants == nil {
				snap.variants = map[string]*variant{}
			}
			snap.variants[key] = v
		}
	}
	c.mu.Unlock()
	v.tagOnce.Do(func() {
		if s.small() {
			v.tag = ETag(s.emit)
			return
		}
		v.tag = snapshotTag(snap.id, key)
	})
	return v
}

// snapshotTag is the entity tag of the answer named key of the snapshot named id: its
// records are those of the snapshot, so it changes when the snapshot does.
func snapshotTag(id uint64, key string) string {
	sum := crc64.Update(0, crcTable, binary.BigEndian.AppendUint64(nil, id))
	sum = crc64.Update(sum, crcTable, []byte(key))
	return `"s` + strconv.FormatUint(sum, 16) + `"`
}

// Gzip returns the gzip form of s's answer when it is held (see held), compressed once per
// answer asked for more than once and kept with its snapshot while the listings held stay
// within their bounds; nil when it is larger, for WriteGzip to compress as it writes.
func (s *Selection) Gzip() []byte {
	if !s.held() {
		return nil
	}
	c, v := s.snap.cache, s.v
	// An answer is kept compressed from its second asking on: watchers ask for the same
	// answers again and again, while a stranger spelling ever new filters asks each once and
	// gets it compressed for itself, holding none of the registry's memory.
	if !v.kept || v.gzAsked.Add(1) < 2 {
		return Compress(s.emit)
	}
	var mine []byte
	v.gzOnce.Do(func() {
		mine = Compress(s.emit)
		c.mu.Lock()
		if c.used()+len(mine) <= c.bounds.MaxBytes && s.snap.gzHeld+len(mine) <= c.bounds.MaxGzipBytes {
			v.gz = mine
			s.snap.size += len(mine)
			s.snap.gzHeld += len(mine)
			c.held += len(mine)
		}
		c.mu.Unlock()
	})
	switch {
	case mine != nil:
		return mine
	case v.gz != nil:
		return v.gz
	}
	return Compress(s.emit)
}

// PageBound cuts an operator's bound-node view to page p, continuing after c when it is not
// nil. The view is ordered by activated_at, then node DID, and its cursors name that place;
// a node changed when its binding was activated or its record was last seen.
func PageBound(res api.OperatorNodes, p api.Page, c *Cursor) api.OperatorNodes {
	var kept []api.BoundNode
	var lastAt time.Time
	for _, n := range res.Nodes {
		at, _ := canonical.ParseTime(n.Authorization.ActivatedAt) // the registry wrote it
		if c != nil && !c.after(at, []byte(n.NodeDID)) {
			continue
		}
		if !p.ChangedSince.IsZero() && at.Before(p.ChangedSince) {
			seen := time.Time{}
			if n.LastSeen != nil {
				seen, _ = canonical.ParseTime(*n.LastSeen)
			}
			if seen.Before(p.ChangedSince) {
				continue
			}
		}
		if p.Limit > 0 && len(kept) == p.Limit {
			res.Next = Cursor{at: lastAt, key: []byte(kept[len(kept)-1].NodeDID)}.String()
			break
		}
		kept, lastAt = append(kept, n), at
	}
	res.Nodes = append([]api.BoundNode{}, kept...)
	res.Count = len(kept)
	return res
}
