package registry

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"hash/crc64"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// What makes a listing cheap to ask for again (docs/protocol.md §5.1): a strong ETag per
// answer, so a client that has it gets 304 and no body; gzip, compressed once per snapshot
// and answer and kept with the snapshot; pages that follow a cursor; and changed_since, so
// a watcher fetches what changed rather than the table.

// cursor is a place in an ordered listing: the sort time and the tie-breaking key of the
// last record a page held. A page continues with the records after it, so records added
// meanwhile (whose first_seen is later than any before) come at the end, and none is
// skipped or repeated.
type cursor struct {
	at  time.Time
	key []byte
}

// String renders c opaquely: the clients only hand it back.
func (c cursor) String() string {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(c.key)), uint64(c.at.Unix()))
	return base64.RawURLEncoding.EncodeToString(append(b, c.key...))
}

// after reports whether a record sorted at (at, key) comes after c.
func (c cursor) after(at time.Time, key []byte) bool {
	if d := at.Compare(c.at); d != 0 {
		return d > 0
	}
	return bytes.Compare(key, c.key) > 0
}

// parseCursor reads a cursor the registry gave; keyLen is the length of its listing's keys
// (0: any, up to maxCursorKey).
func parseCursor(s string, keyLen int) (cursor, error) {
	bad := badRequest("cursor is not one this listing gave")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 8 || len(b) > 8+maxCursorKey || (keyLen > 0 && len(b) != 8+keyLen) {
		return cursor{}, bad
	}
	return cursor{at: time.Unix(int64(binary.BigEndian.Uint64(b)), 0).UTC(), key: b[8:]}, nil
}

// pageOf reads a listing's paging query once: the page, and the cursor it continues from
// (nil on a first page).
func pageOf(q url.Values, keyLen int) (api.Page, *cursor, error) {
	p, err := api.ParsePage(q, maxListingPage)
	if err != nil || p.Cursor == "" {
		return p, nil, err
	}
	c, err := parseCursor(p.Cursor, keyLen)
	if err != nil {
		return api.Page{}, nil, err
	}
	return p, &c, nil
}

// nextLink is the Link header naming the next page of the request r: its query, with the
// cursor next.
func nextLink(r *http.Request, next string) string {
	q := r.URL.Query()
	q.Set("cursor", next)
	return "<" + r.URL.Path + "?" + q.Encode() + `>; rel="next"`
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// etagOf is the strong entity tag of an answer whose bytes emit produces.
func etagOf(emit func(func([]byte))) string {
	var sum uint64
	emit(func(b []byte) { sum = crc64.Update(sum, crcTable, b) })
	return `"` + strconv.FormatUint(sum, 16) + `"`
}

// gzipTag is the entity tag of the gzip form of the answer tagged tag: a different
// representation, so a different strong tag.
func gzipTag(tag string) string { return strings.TrimSuffix(tag, `"`) + `-gzip"` }

// notModified reports whether the If-None-Match header of r names tag, in either of its
// encodings (RFC 9110 §13.1.2: weak comparison).
func notModified(r *http.Request, tag string) bool {
	lines := r.Header.Values("If-None-Match")
	if len(lines) == 0 {
		return false
	}
	gzTag := gzipTag(tag)
	for _, line := range lines {
		for rest := line; rest != ""; {
			var t string
			t, rest, _ = strings.Cut(rest, ",")
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == tag || t == gzTag {
				return true
			}
		}
	}
	return false
}

// acceptsGzip reports whether r accepts a gzip answer: Accept-Encoding names gzip (or *)
// without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, line := range r.Header.Values("Accept-Encoding") {
		for rest := line; rest != ""; {
			var item string
			item, rest, _ = strings.Cut(rest, ",")
			name, params, _ := strings.Cut(item, ";")
			name = strings.TrimSpace(name)
			if !strings.EqualFold(name, "gzip") && !strings.EqualFold(name, "x-gzip") && name != "*" {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
				if v, err := strconv.ParseFloat(q, 64); err != nil || v <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// compress returns the gzip form of what emit produces. Listings are mostly keys and
// signatures, which no level compresses much, so the fastest level loses little and costs
// a fraction of the default's time on a table rebuilt every second.
func compress(emit func(func([]byte))) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	emit(func(b []byte) { zw.Write(b) })
	zw.Close()
	return buf.Bytes()
}

// conditional sets the ETag and Vary headers of an answer tagged tag (etag is the ETag
// header's value for the form sent: see etagHeader), and answers 304 when r already holds
// it; it reports whether it did.
func conditional(w http.ResponseWriter, r *http.Request, tag string, etag []string) bool {
	h := w.Header()
	addVaryAcceptEncoding(h)
	h["Etag"] = etag
	if notModified(r, tag) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

// etagHeader is the ETag header's value for the answer tagged tag, in its gzip form or not.
func etagHeader(tag string, gz bool) []string {
	if gz {
		return []string{gzipTag(tag)}
	}
	return []string{tag}
}

// addVaryAcceptEncoding adds Accept-Encoding to h's Vary, after the Vary: Origin of CORS, if
// any, without an allocation when it is the only one.
func addVaryAcceptEncoding(h http.Header) {
	if v := h["Vary"]; len(v) > 0 {
		h["Vary"] = append(v[:len(v):len(v)], "Accept-Encoding")
		return
	}
	h["Vary"] = varyAcceptEncoding
}

// writeGzip writes a gzip answer.
func writeGzip(w http.ResponseWriter, contentType []string, gz []byte) {
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Encoding"] = contentEncodingGzip
	h["Content-Length"] = []string{strconv.Itoa(len(gz))}
	w.Write(gz)
}

// serveSmall answers with body, a JSON answer small enough to be built per request: tagged,
// 304 when r holds it, gzip when r accepts it.
func serveSmall(w http.ResponseWriter, r *http.Request, body []byte) {
	emit := func(f func([]byte)) { f(body) }
	gz := acceptsGzip(r)
	tag := etagOf(emit)
	if conditional(w, r, tag, etagHeader(tag, gz)) {
		return
	}
	if gz {
		writeGzip(w, contentTypeJSON, compress(emit))
		return
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.Write(body)
}

// selection is the part of a snapshot one listing answer holds: the records of
// nodes[from:to] that keep keeps (nil keeps all), count of them, and the cursor of the page
// after, "" when this is the last. picked lists them when they are few (at most
// maxListingPage), so that writing them does not scan the table again.
type selection struct {
	snap     *listSnapshot
	k        listingKind
	keep     func(i int) bool
	from, to int
	count    int
	next     string
	picked   []int32
}

// whole reports whether s is the whole listing as it was before pages existed.
func (s *selection) whole() bool { return s.keep == nil && s.from == 0 && s.to == len(s.snap.nodes) }

// selectFrom picks the answer to a listing of kind k with filter f and page p, continuing
// after c when it is not nil.
func (snap *listSnapshot) selectFrom(k listingKind, f api.NodeFilter, p api.Page, c *cursor, now time.Time) selection {
	s := selection{snap: snap, k: k, to: len(snap.nodes)}
	// changed_since reads the snapshot's column of last_seen times, which a scan of the
	// whole table goes through far faster than through the records.
	since := p.ChangedSince.Unix()
	switch {
	case keepsAll(f) && !p.ChangedSince.IsZero():
		s.keep = func(i int) bool { return snap.seen[i] >= since }
	case !keepsAll(f):
		s.keep = func(i int) bool {
			return (p.ChangedSince.IsZero() || snap.seen[i] >= since) && keepNode(f, snap.nodes[i], now)
		}
	}
	if c != nil {
		s.from, _ = slices.BinarySearchFunc(snap.nodes, *c, func(n *store.Node, c cursor) int {
			if c.after(n.FirstSeen, n.Key[:]) {
				return 1
			}
			return -1
		})
	}
	s.to = s.from
	if s.keep == nil && p.Limit == 0 {
		s.to, s.count = len(snap.nodes), len(snap.nodes)-s.from
		return s
	}
	onlySince := keepsAll(f) && !p.ChangedSince.IsZero()
	for i := s.from; i < len(snap.nodes); i++ {
		if onlySince {
			// The common watcher's poll: a tight pass over the column, with no call per record.
			for i < len(snap.seen) && snap.seen[i] < since {
				i++
			}
			if i == len(snap.seen) {
				break
			}
		} else if s.keep != nil && !s.keep(i) {
			continue
		}
		if p.Limit > 0 && s.count == p.Limit {
			last := snap.nodes[s.to-1]
			s.next = cursor{at: last.FirstSeen, key: last.Key[:]}.String()
			break
		}
		if s.count < maxListingPage {
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
func (s *selection) each(fn func(i int)) {
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

// emit hands the bytes of s's answer to f, in order.
func (s *selection) emit(f func([]byte)) {
	k, snap := s.k, s.snap
	var head []byte
	head = append(head, k.head...)
	if k.counted {
		head = strconv.AppendInt(head, int64(s.count), 10)
		head = append(head, `,"nodes":[`...)
	}
	f(head)
	switch {
	case s.whole() && k.json:
		f(snap.json)
	case s.whole():
		f(snap.peers)
	default:
		record := snap.peerLine
		if k.json {
			record = snap.jsonRecord
		}
		first := true
		s.each(func(i int) {
			if k.json && !first {
				f(comma)
			}
			first = false
			f(record(i))
		})
	}
	if s.next == "" || !k.json {
		f([]byte(k.tail))
		return
	}
	// Every JSON tail closes the array first: the cursor goes right after it.
	f([]byte(`],"next":"` + s.next + `"` + k.tail[1:]))
}

var comma = []byte{','}

// size is the length of s's answer.
func (s *selection) size() int {
	n := 0
	s.emit(func(b []byte) { n += len(b) })
	return n
}

// write sends s's answer through a buffer of listingWriteBuffer bytes.
func (s *selection) write(w io.Writer) {
	if s.whole() {
		s.emit(func(b []byte) { w.Write(b) })
		return
	}
	bw := bufio.NewWriterSize(w, listingWriteBuffer)
	s.emit(func(b []byte) { bw.Write(b) })
	bw.Flush()
}

// variant is what a snapshot keeps of one answer it gave: its entity tag, and its gzip form
// once a client asked for it.
type variant struct {
	tagOnce sync.Once
	tag     string
	gzOnce  sync.Once
	gz      []byte // nil when it did not fit within maxListingBytes
	kept    bool   // in its snapshot's variants
	gzAsked atomic.Int32
}

// variantKey names an answer of a snapshot: its kind and its query, spelled canonically, and
// for a filter on being online the second it was answered in, since which nodes are online
// changes with the clock while the snapshot does not.
func variantKey(k listingKind, f api.NodeFilter, p api.Page, c *cursor, now time.Time) string {
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
// computed once; a snapshot keeps at most maxListingVariants, and beyond them each answer
// gets a variant of its own.
func (c *listCache) variantOf(s *selection, key string) *variant {
	snap := s.snap
	c.mu.Lock()
	v, ok := snap.variants[key]
	if !ok {
		v = &variant{kept: len(snap.variants) < maxListingVariants}
		if v.kept {
			if snap.variants == nil {
				snap.variants = map[string]*variant{}
			}
			snap.variants[key] = v
		}
	}
	c.mu.Unlock()
	v.tagOnce.Do(func() { v.tag = etagOf(s.emit) })
	return v
}

// gzipOf returns the gzip form of s, compressed once per variant asked for more than once and
// kept with it while the listings held stay within maxListingBytes.
func (c *listCache) gzipOf(s *selection, v *variant) []byte {
	// An answer is kept compressed from its second asking on: watchers ask for the same
	// answers again and again, while a stranger spelling ever new filters asks each once and
	// gets it compressed for itself, holding none of the registry's memory.
	if !v.kept || v.gzAsked.Add(1) < 2 {
		return compress(s.emit)
	}
	var mine []byte
	v.gzOnce.Do(func() {
		mine = compress(s.emit)
		c.mu.Lock()
		if c.used()+len(mine) <= maxListingBytes && s.snap.gzHeld+len(mine) <= maxListingGzipBytes {
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
	return compress(s.emit)
}

// pageBound cuts an operator's bound-node view to page p, continuing after c when it is not
// nil. The view is ordered by activated_at, then node DID, and its cursors name that place;
// a node changed when its binding was activated or its record was last seen.
func pageBound(res api.OperatorNodes, p api.Page, c *cursor) api.OperatorNodes {
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
			res.Next = cursor{at: lastAt, key: []byte(kept[len(kept)-1].NodeDID)}.String()
			break
		}
		kept, lastAt = append(kept, n), at
	}
	res.Nodes = append([]api.BoundNode{}, kept...)
	res.Count = len(kept)
	return res
}
