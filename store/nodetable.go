package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/svrp/svrp/didkey"
)

// The node cache's table, lean: a node costs a fixed-size record, its variable text in an
// arena, and a few bytes in each index, instead of a Node with its strings, pointers and map
// entries. The records are kept in listing order (first_seen, then key) in blocks, so that a
// listing takes the table as it stands ([NodeList]) rather than visiting and sorting it:
// registrations append, a block a listing holds is copied before it is written (only
// last_seen, in a column of its own, changes in place), and deletions leave dead records
// that a rebuild drops once they are many.

// blockLen is the records a block is filled with: a block is what a listing shares with the
// table and what a write to a listed block copies, so it is small enough to copy in a moment
// and large enough that a listing holds few of them. A block takes records that belong
// inside it (an older first_seen than the last) up to twice that, maxBlockLen, the slots
// its place can name; past it the table is sorted again.
const (
	blockBits   = 13
	maxBlockLen = 1 << blockBits
	blockLen    = maxBlockLen / 2
)

// chunkSize is the arena's unit of allocation: records' text is appended to the last chunk
// until it is full.
const chunkSize = 1 << 20

// maxInterned bounds the distinct regions and capability lists the table shares by index:
// past it a record keeps its own in its text, so that nodes inventing names cannot grow the
// shared sets without end.
const maxInterned = 4096

// slot is a record's place: its block and its index in the block.
type slot uint32

// noSlot is no place.
const noSlot = slot(math.MaxUint32)

func slotOf(b, j int) slot { return slot(b<<blockBits | j) }
func (s slot) block() int  { return int(s >> blockBits) }
func (s slot) index() int  { return int(s & (maxBlockLen - 1)) }

// leanNode is a node record's fixed-size part.
type leanNode struct {
	key   didkey.PublicKey
	first int64   // FirstSeen in Unix nanoseconds; see flagFarFirst
	text  textRef // where its text is, and its flags
	short shortBody
	// region and caps index the table's shared regions and capability lists (0: "" and
	// nil), or are inText.
	region uint16
	caps   uint16
}

// inText marks a region or capability list kept in the record's text.
const inText = math.MaxUint16

// nodeTable is the lean table. Its owner serialises every call (the node cache's lock).
type nodeTable struct {
	seed     maphash.Seed
	blocks   []*tableBlock
	live     int  // records not dead
	dead     int  // dead records still in blocks
	unsorted bool // a record was appended out of listing order: the next list rebuilds
	byKey    slotIndex
	byShort  slotIndex
	farSeen  map[didkey.PublicKey]time.Time

	chunks    []string
	cur       *strings.Builder // the last chunk, being filled
	textBytes int              // text written to the arena
	garbage   int              // of which no record's

	regions  []string // regions[0] is ""
	regionOf map[string]uint16
	capSets  [][]string // capSets[0] is nil
	capSetOf map[string]uint16
}

// tableBlock is maxBlockLen records at most, in listing order. A block a list holds is frozen:
// a write copies it first, but for appends, which a list does not see, and last_seen, which
// a list copies.
type tableBlock struct {
	recs   []leanNode
	seen   []int64 // each record's LastSeen in Unix nanoseconds, or farTime
	frozen bool
	dead   int
	live   []uint16 // the live indexes of recs[:liveOf], once listed with dead records
	liveOf int
}

func newNodeTable(hint int) *nodeTable {
	return &nodeTable{
		seed: maphash.MakeSeed(), byKey: sizedIndex(hint), byShort: sizedIndex(hint),
		farSeen: map[didkey.PublicKey]time.Time{},
		regions: []string{""}, regionOf: map[string]uint16{},
		capSets: [][]string{nil}, capSetOf: map[string]uint16{},
	}
}

func newBlock() *tableBlock {
	return &tableBlock{recs: make([]leanNode, 0, blockLen), seen: make([]int64, 0, blockLen)}
}

func (t *nodeTable) rec(s slot) *leanNode { return &t.blocks[s.block()].recs[s.index()] }

func (t *nodeTable) text(s slot) nodeText { return readText(t.chunks, t.rec(s)) }

func (t *nodeTable) hashKey(k didkey.PublicKey) uint64 { return maphash.Comparable(t.seed, k) }
func (t *nodeTable) hashShort(b shortBody) uint64      { return maphash.Comparable(t.seed, b) }
func (t *nodeTable) keyHashOf(s slot) uint64           { return t.hashKey(t.rec(s).key) }
func (t *nodeTable) shortHashOf(s slot) uint64         { return t.hashShort(t.rec(s).short) }

// find returns the slot of k's record.
func (t *nodeTable) find(k didkey.PublicKey) (slot, bool) {
	found := noSlot
	t.byKey.each(t.hashKey(k), func(s slot) bool {
		if t.rec(s).key == k {
			found = s
			return false
		}
		return true
	})
	return found, found != noSlot
}

// keysByShort returns the keys of the records whose short body is b.
func (t *nodeTable) keysByShort(b shortBody) []didkey.PublicKey {
	var keys []didkey.PublicKey
	t.byShort.each(t.hashShort(b), func(s slot) bool {
		if r := t.rec(s); r.short == b {
			keys = append(keys, r.key)
		}
		return true
	})
	return keys
}

// lastSeen returns the LastSeen of the record at s.
func (t *nodeTable) lastSeen(s slot) time.Time {
	v := t.blocks[s.block()].seen[s.index()]
	if v == farTime {
		return t.farSeen[t.rec(s).key]
	}
	return time.Unix(0, v).UTC()
}

// node returns the record at s as a Node of its own.
func (t *nodeTable) node(s slot) Node {
	r := t.rec(s)
	row := rowOf(r, t.chunks, t.lastSeen(s), t.regions, t.capSets)
	n := row.node()
	n.Capabilities = slices.Clone(n.Capabilities)
	return n
}

// put creates or replaces the record of n.Key.
func (t *nodeTable) put(n *Node, seq uint64) {
	rec := t.encode(n, seq)
	old, had := t.find(n.Key)
	if had {
		cur := t.rec(old)
		if cur.first == rec.first && (!rec.text.has(flagFarFirst) || t.compare(cur, &rec) == 0) {
			// Its place in listing order stays: replaced where it is.
			t.garbage += readText(t.chunks, cur).size
			b := t.writable(old.block())
			b.recs[old.index()] = rec
			t.touch(old, n.LastSeen)
			t.tidy()
			return
		}
		t.kill(old)
	}
	t.insert(rec, t.seenOf(n.Key, n.LastSeen))
	t.tidy()
}

// encode makes n's record, its text written to the arena.
func (t *nodeTable) encode(n *Node, seq uint64) leanNode {
	rec := leanNode{key: n.Key, short: shortBodyOf(n.Key)}
	var flags uint8
	plain := plainText(n.Endpoint) && plainText(n.Region)
	switch {
	case strings.HasPrefix(n.DID, shortDIDPrefix) && isHexOf(n.DID[len(shortDIDPrefix):], rec.short[:]):
		flags |= flagDIDShort
	case strings.HasPrefix(n.DID, fullDIDPrefix) && isHexOf(n.DID[len(fullDIDPrefix):], n.Key[:]):
		flags |= flagDIDFull
	default:
		plain = plain && plainText(n.DID)
	}
	b := binary.AppendUvarint(nil, seq)
	if flags&(flagDIDShort|flagDIDFull) == 0 {
		b = binary.AppendUvarint(b, uint64(len(n.DID)))
	}
	b = binary.AppendUvarint(b, uint64(len(n.Endpoint)))
	if n.Signature != nil {
		flags |= flagSig
		plain = plain && plainText(*n.Signature)
		b = binary.AppendUvarint(b, uint64(len(*n.Signature)))
	}
	b = binary.AppendUvarint(b, uint64(len(n.Origin)))
	if n.SignatureVerified {
		flags |= flagVerified
	}
	if n.RegistrationTS != nil {
		flags |= flagTS
		b = binary.BigEndian.AppendUint64(b, uint64(*n.RegistrationTS))
	}
	if ns, ok := nanosOf(n.FirstSeen); ok {
		rec.first = ns
	} else {
		flags |= flagFarFirst
		rec.first = math.MinInt64
		if n.FirstSeen.Year() > 2000 {
			rec.first = math.MaxInt64
		}
		b = binary.AppendVarint(b, n.FirstSeen.Unix())
		b = binary.AppendUvarint(b, uint64(n.FirstSeen.Nanosecond()))
	}
	rec.region = t.internRegion(n.Region)
	if rec.region == inText {
		b = binary.AppendUvarint(b, uint64(len(n.Region)))
		b = append(b, n.Region...)
	}
	rec.caps = t.internCaps(n.Capabilities)
	for _, c := range n.Capabilities {
		plain = plain && plainText(c)
	}
	if rec.caps == inText {
		b = binary.AppendUvarint(b, uint64(len(n.Capabilities)+1))
		for _, c := range n.Capabilities {
			b = binary.AppendUvarint(b, uint64(len(c)))
			b = append(b, c...)
		}
	}
	if flags&(flagDIDShort|flagDIDFull) == 0 {
		b = append(b, n.DID...)
	}
	b = append(b, n.Endpoint...)
	if n.Signature != nil {
		b = append(b, *n.Signature...)
	}
	b = append(b, n.Origin...)
	if plain {
		flags |= flagPlain
	}
	chunk, off := t.addText(string(b))
	rec.text = makeRef(flags, chunk, off)
	return rec
}

// internRegion returns the index of region in the shared regions, adding it while there is
// room.
func (t *nodeTable) internRegion(region string) uint16 {
	if region == "" {
		return 0
	}
	if i, ok := t.regionOf[region]; ok {
		return i
	}
	if len(t.regions) >= maxInterned {
		return inText
	}
	t.regions = append(t.regions, strings.Clone(region))
	t.regionOf[t.regions[len(t.regions)-1]] = uint16(len(t.regions) - 1)
	return uint16(len(t.regions) - 1)
}

// internCaps returns the index of caps in the shared lists, adding a copy while there is
// room. Shared lists are never modified: readers get clones or must not modify them.
func (t *nodeTable) internCaps(caps []string) uint16 {
	if caps == nil {
		return 0
	}
	var id []byte
	for _, c := range caps {
		id = binary.AppendUvarint(id, uint64(len(c)))
		id = append(id, c...)
	}
	if i, ok := t.capSetOf[string(id)]; ok {
		return i
	}
	if len(t.capSets) >= maxInterned {
		return inText
	}
	shared := make([]string, len(caps))
	for i, c := range caps {
		shared[i] = strings.Clone(c)
	}
	t.capSets = append(t.capSets, shared)
	t.capSetOf[string(id)] = uint16(len(t.capSets) - 1)
	return uint16(len(t.capSets) - 1)
}

// addText appends s to the arena and returns where it is.
func (t *nodeTable) addText(s string) (chunk, off int) {
	if t.cur == nil || t.cur.Cap()-t.cur.Len() < len(s) {
		t.cur = new(strings.Builder)
		t.cur.Grow(max(chunkSize, len(s)))
		t.chunks = append(t.chunks, "")
	}
	off = t.cur.Len()
	t.cur.WriteString(s)
	// A Builder never changes bytes it has written, so the strings taken of it before stay
	// as they were.
	t.chunks[len(t.chunks)-1] = t.cur.String()
	t.textBytes += len(s)
	return len(t.chunks) - 1, off
}

// seenOf returns the seen column's value for seen, keeping a far one in farSeen.
func (t *nodeTable) seenOf(k didkey.PublicKey, seen time.Time) int64 {
	if ns, ok := nanosOf(seen); ok {
		delete(t.farSeen, k)
		return ns
	}
	t.farSeen[k] = seen
	return farTime
}

// touch sets the LastSeen of the record at s: in place, since a list copies the column.
func (t *nodeTable) touch(s slot, seen time.Time) {
	t.blocks[s.block()].seen[s.index()] = t.seenOf(t.rec(s).key, seen)
}

// compare orders records in listing order: first_seen, then key.
func (t *nodeTable) compare(a, b *leanNode) int {
	return compareRecs(t.chunks, a, b)
}

func compareRecs(chunks []string, a, b *leanNode) int {
	if c := cmp.Compare(a.first, b.first); c != 0 {
		return c
	}
	if a.text.has(flagFarFirst) && b.text.has(flagFarFirst) {
		if c := readText(chunks, a).first.Compare(readText(chunks, b).first); c != 0 {
			return c
		}
	}
	return bytes.Compare(a.key[:], b.key[:])
}

// writable returns block b, copied first when a list holds it.
func (t *nodeTable) writable(b int) *tableBlock {
	blk := t.blocks[b]
	if !blk.frozen {
		return blk
	}
	c := &tableBlock{recs: append(make([]leanNode, 0, blockLen), blk.recs...), seen: blk.seen, dead: blk.dead}
	t.blocks[b] = c
	return c
}

func (t *nodeTable) index(r *leanNode, s slot) {
	t.byKey.add(t.hashKey(r.key), s, t.keyHashOf)
	t.byShort.add(t.hashShort(r.short), s, t.shortHashOf)
}

// moved tells the indexes that the record r moved from one slot to another.
func (t *nodeTable) moved(r *leanNode, from, to slot) {
	if r.text.has(flagDead) {
		return
	}
	t.byKey.replace(t.hashKey(r.key), from, to)
	t.byShort.replace(t.hashShort(r.short), from, to)
}

// kill marks the record at s dead and drops it from the indexes.
func (t *nodeTable) kill(s slot) {
	b := t.writable(s.block())
	r := &b.recs[s.index()]
	t.moved(r, s, noSlot)
	t.garbage += readText(t.chunks, r).size
	delete(t.farSeen, r.key)
	r.text = r.text.with(flagDead)
	b.dead++
	t.dead++
	t.live--
}

// remove deletes k's record, if any.
func (t *nodeTable) remove(k didkey.PublicKey) {
	if s, ok := t.find(k); ok {
		t.kill(s)
		t.tidy()
	}
}

// lastSlot is the slot of the table's last record, dead or not.
func (t *nodeTable) lastSlot() slot {
	if len(t.blocks) == 0 {
		return noSlot
	}
	b := len(t.blocks) - 1
	if len(t.blocks[b].recs) == 0 {
		return noSlot
	}
	return slotOf(b, len(t.blocks[b].recs)-1)
}

// insert places a new record in listing order: at the end, or inside the block it belongs
// to. A record that belongs in a block already full is appended, and the next list sorts the
// table again.
func (t *nodeTable) insert(rec leanNode, seen int64) {
	last := t.lastSlot()
	if t.unsorted || last == noSlot || t.compare(t.rec(last), &rec) < 0 {
		t.append(rec, seen)
		return
	}
	// The last block whose first record comes before rec, or the first block.
	b := max(0, sort.Search(len(t.blocks), func(b int) bool {
		return len(t.blocks[b].recs) > 0 && t.compare(&t.blocks[b].recs[0], &rec) > 0
	})-1)
	if len(t.blocks[b].recs) >= maxBlockLen {
		t.append(rec, seen)
		t.unsorted = true
		return
	}
	blk := t.writable(b)
	j, _ := slices.BinarySearchFunc(blk.recs, &rec, func(a leanNode, r *leanNode) int { return t.compare(&a, r) })
	blk.recs = slices.Insert(blk.recs, j, rec)
	blk.seen = slices.Insert(blk.seen, j, seen)
	for i := len(blk.recs) - 1; i > j; i-- {
		t.moved(&blk.recs[i], slotOf(b, i-1), slotOf(b, i))
	}
	t.index(&blk.recs[j], slotOf(b, j))
	t.live++
}

// append places rec after the last record.
func (t *nodeTable) append(rec leanNode, seen int64) {
	if len(t.blocks) == 0 || len(t.blocks[len(t.blocks)-1].recs) >= blockLen {
		t.blocks = append(t.blocks, newBlock())
	}
	b := len(t.blocks) - 1
	blk := t.blocks[b] // a list holds its own length: appending needs no copy
	blk.recs = append(blk.recs, rec)
	blk.seen = append(blk.seen, seen)
	t.index(&blk.recs[len(blk.recs)-1], slotOf(b, len(blk.recs)-1))
	t.live++
}

// tidy rebuilds the table once dead records or unused text are a large part of it.
func (t *nodeTable) tidy() {
	if (t.dead > blockLen && t.dead*4 > t.live) || (t.garbage > chunkSize && t.garbage*2 > t.textBytes) {
		t.rebuild()
	}
}

// rebuild writes the live records again in listing order, in full blocks, with their text in
// a new arena and new indexes.
func (t *nodeTable) rebuild() {
	type entry struct {
		rec  leanNode
		seen int64
	}
	all := make([]entry, 0, t.live)
	for _, b := range t.blocks {
		for j := range b.recs {
			if !b.recs[j].text.has(flagDead) {
				all = append(all, entry{b.recs[j], b.seen[j]})
			}
		}
	}
	old := t.chunks
	t.chunks, t.cur, t.textBytes, t.garbage = nil, nil, 0, 0
	for i := range all {
		r := &all[i].rec
		size := readText(old, r).size
		chunk, off := t.addText(old[r.text.chunk()][r.text.offset():][:size])
		r.text = makeRef(r.text.flags(), chunk, off)
	}
	if t.unsorted {
		slices.SortFunc(all, func(a, b entry) int { return t.compare(&a.rec, &b.rec) })
	}
	t.blocks, t.live, t.dead, t.unsorted = nil, 0, 0, false
	t.byKey, t.byShort = sizedIndex(len(all)), sizedIndex(len(all))
	for _, e := range all {
		t.append(e.rec, e.seen)
	}
}

// rowOf reads the record r, whose text is in chunks, as a row sharing the table's strings
// and capability list.
func rowOf(r *leanNode, chunks []string, seen time.Time, regions []string, capSets [][]string) NodeRow {
	txt := readText(chunks, r)
	row := NodeRow{
		Key: r.key, DID: txt.did, Endpoint: txt.endpoint, Origin: txt.origin, Signature: txt.sig,
		HasSignature: r.text.has(flagSig), SignatureVerified: r.text.has(flagVerified),
		RegistrationTS: txt.ts, HasRegistrationTS: r.text.has(flagTS),
		LastSeen: seen, Plain: r.text.has(flagPlain), derived: r.text.flags() & (flagDIDShort | flagDIDFull),
		short: r.short,
	}
	if r.text.has(flagFarFirst) {
		row.FirstSeen = txt.first
	} else {
		row.FirstSeen = time.Unix(0, r.first).UTC()
	}
	if r.region == inText {
		row.Region = txt.region
	} else {
		row.Region = regions[r.region]
	}
	if r.caps == inText {
		row.Capabilities = txt.caps
	} else {
		row.Capabilities = capSets[r.caps]
	}
	return row
}

// node returns the row as a Node, sharing its capability list.
func (r *NodeRow) node() Node {
	n := Node{
		Key: r.Key, DID: r.DIDString(), Endpoint: r.Endpoint, Origin: r.Origin,
		Capabilities: r.Capabilities, Region: r.Region, SignatureVerified: r.SignatureVerified,
		FirstSeen: r.FirstSeen, LastSeen: r.LastSeen,
	}
	if r.HasSignature {
		sig := r.Signature
		n.Signature = &sig
	}
	if r.HasRegistrationTS {
		ts := r.RegistrationTS
		n.RegistrationTS = &ts
	}
	return n
}

// didIs reports whether the DID of the record at s is did.
func (t *nodeTable) didIs(s slot, did string) bool {
	r := t.rec(s)
	switch {
	case r.text.has(flagDIDShort):
		return strings.HasPrefix(did, shortDIDPrefix) && isHexOf(did[len(shortDIDPrefix):], r.short[:])
	case r.text.has(flagDIDFull):
		return strings.HasPrefix(did, fullDIDPrefix) && isHexOf(did[len(fullDIDPrefix):], r.key[:])
	}
	return t.text(s).did == did
}

// storedDID returns the DID of the record at s when it is held in its text, not derived.
func (t *nodeTable) storedDID(s slot) (string, bool) {
	if t.rec(s).text.has(flagDIDShort | flagDIDFull) {
		return "", false
	}
	return t.text(s).did, true
}

// findDID returns the key of the record whose short body is b and whose DID is did.
func (t *nodeTable) findDID(b shortBody, did string) (didkey.PublicKey, bool) {
	found := noSlot
	t.byShort.each(t.hashShort(b), func(s slot) bool {
		if t.rec(s).short == b && t.didIs(s, did) {
			found = s
			return false
		}
		return true
	})
	if found == noSlot {
		return didkey.PublicKey{}, false
	}
	return t.rec(found).key, true
}

// settle sorts a table loaded out of order.
func (t *nodeTable) settle() {
	if t.unsorted {
		t.rebuild()
	}
}

// each calls fn with the slot of every live record.
func (t *nodeTable) each(fn func(slot)) {
	for b, blk := range t.blocks {
		for j := range blk.recs {
			if !blk.recs[j].text.has(flagDead) {
				fn(slotOf(b, j))
			}
		}
	}
}
