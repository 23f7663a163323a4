package store

import (
	"context"
	"encoding/hex"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/svrp/svrp/didkey"
)

// NodeList is the node table at one moment, in listing order (first_seen, then key): what
// the node listings are cut from. It never changes. Over the node cache it shares the
// table's records, so taking one costs a copy of the last_seen column and no visit of the
// records; over any other store it is built from a scan.
type NodeList struct {
	parts  []listPart
	starts []int   // the index of each part's first record, and the count last
	seen   []int64 // each record's LastSeen in Unix nanoseconds, or farTime
	far    map[didkey.PublicKey]time.Time

	chunks  []string
	regions []string
	capSets [][]string
}

type listPart struct {
	recs []leanNode
	live []uint16 // the indexes of recs that are live; nil: all
	id   NodePart
}

// NodePart names a run of records of a list: two lists whose parts have the same name hold
// the same records in them (last_seen aside), so what a reader derives from a part's
// records it may keep for the next list.
type NodePart struct {
	b *tableBlock
	n int
}

// ListNodes returns the node table of s as a [NodeList].
func ListNodes(ctx context.Context, s NodeScanner) (*NodeList, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c, ok := s.(*nodeCache); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.table.list(), nil
	}
	t := newNodeTable(0)
	err := s.ScanNodes(ctx, func(n *Node) error {
		t.put(n, 0)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t.list(), nil
}

// list takes the table as it stands, freezing the blocks the list holds.
func (t *nodeTable) list() *NodeList {
	if t.unsorted {
		t.rebuild()
	}
	l := &NodeList{
		parts: make([]listPart, 0, len(t.blocks)), starts: make([]int, 0, len(t.blocks)+1),
		seen:   make([]int64, 0, t.live),
		chunks: slices.Clone(t.chunks), regions: slices.Clip(t.regions), capSets: slices.Clip(t.capSets),
	}
	if len(t.farSeen) > 0 {
		l.far = maps.Clone(t.farSeen)
	}
	for _, b := range t.blocks {
		b.frozen = true
		p := listPart{recs: slices.Clip(b.recs), id: NodePart{b, len(b.recs)}}
		if b.dead > 0 {
			if b.liveOf != len(b.recs) || b.live == nil {
				b.live, b.liveOf = nil, len(b.recs)
				for j := range b.recs {
					if !b.recs[j].text.has(flagDead) {
						b.live = append(b.live, uint16(j))
					}
				}
			}
			p.live = b.live
			if len(p.live) == 0 {
				continue
			}
		}
		l.starts = append(l.starts, len(l.seen))
		if p.live == nil {
			l.seen = append(l.seen, b.seen[:len(b.recs)]...)
		} else {
			for _, j := range p.live {
				l.seen = append(l.seen, b.seen[j])
			}
		}
		l.parts = append(l.parts, p)
	}
	l.starts = append(l.starts, len(l.seen))
	return l
}

// Len is the number of records.
func (l *NodeList) Len() int { return len(l.seen) }

// Parts is the number of parts the records are in.
func (l *NodeList) Parts() int { return len(l.parts) }

// Part returns the name of part p and the indexes of its records, [from, to).
func (l *NodeList) Part(p int) (id NodePart, from, to int) {
	return l.parts[p].id, l.starts[p], l.starts[p+1]
}

// rec returns record i.
func (l *NodeList) rec(i int) *leanNode {
	p := sort.Search(len(l.parts), func(p int) bool { return l.starts[p+1] > i })
	part := &l.parts[p]
	j := i - l.starts[p]
	if part.live != nil {
		j = int(part.live[j])
	}
	return &part.recs[j]
}

// Key returns record i's key.
func (l *NodeList) Key(i int) didkey.PublicKey { return l.rec(i).key }

// FirstSeen returns record i's first_seen.
func (l *NodeList) FirstSeen(i int) time.Time {
	r := l.rec(i)
	if r.text.has(flagFarFirst) {
		return readText(l.chunks, r).first
	}
	return time.Unix(0, r.first).UTC()
}

// LastSeen returns record i's last_seen.
func (l *NodeList) LastSeen(i int) time.Time {
	if v := l.seen[i]; v != farTime {
		return time.Unix(0, v).UTC()
	}
	return l.far[l.rec(i).key]
}

// Node returns record i as a Node, whose capability list is the table's: it must not be
// modified.
func (l *NodeList) Node(i int) Node {
	row := rowOf(l.rec(i), l.chunks, l.LastSeen(i), l.regions, l.capSets)
	return row.node()
}

// Row fills row with record i.
func (l *NodeList) Row(i int, row *NodeRow) {
	*row = rowOf(l.rec(i), l.chunks, l.LastSeen(i), l.regions, l.capSets)
}

// NodeRow is one record of a [NodeList] as fields, without copies: its strings and list are
// the table's, and the list must not be modified. The DID is read through AppendDID and
// DIDString, since most are derived from the key rather than held.
type NodeRow struct {
	Key                 didkey.PublicKey
	DID                 string // when not derived
	Endpoint, Origin    string
	Signature           string
	HasSignature        bool
	SignatureVerified   bool
	Capabilities        []string
	Region              string
	FirstSeen, LastSeen time.Time
	RegistrationTS      int64
	HasRegistrationTS   bool
	// Plain reports that the DID, endpoint, signature, region and capabilities are printable
	// ASCII without '"', '\\', '<', '>' or '&': text that JSON writes as it is, so that a
	// listing knows a record's length from its fields' lengths.
	Plain bool

	derived uint8
	short   shortBody
}

// RowOf returns the row of n.
func RowOf(n *Node) NodeRow {
	row := NodeRow{
		Key: n.Key, DID: n.DID, Endpoint: n.Endpoint, Origin: n.Origin,
		HasSignature: n.Signature != nil, SignatureVerified: n.SignatureVerified,
		Capabilities: n.Capabilities, Region: n.Region, FirstSeen: n.FirstSeen, LastSeen: n.LastSeen,
		HasRegistrationTS: n.RegistrationTS != nil,
	}
	if n.Signature != nil {
		row.Signature = *n.Signature
	}
	if n.RegistrationTS != nil {
		row.RegistrationTS = *n.RegistrationTS
	}
	return row
}

// DIDLen is the length of the DID.
func (r *NodeRow) DIDLen() int {
	switch r.derived {
	case flagDIDShort:
		return len(shortDIDPrefix) + 2*len(r.short)
	case flagDIDFull:
		return len(fullDIDPrefix) + 2*len(r.Key)
	}
	return len(r.DID)
}

// AppendDID appends the DID to b.
func (r *NodeRow) AppendDID(b []byte) []byte {
	switch r.derived {
	case flagDIDShort:
		return hex.AppendEncode(append(b, shortDIDPrefix...), r.short[:])
	case flagDIDFull:
		return hex.AppendEncode(append(b, fullDIDPrefix...), r.Key[:])
	}
	return append(b, r.DID...)
}

// DIDString returns the DID.
func (r *NodeRow) DIDString() string {
	if r.derived == 0 {
		return r.DID
	}
	return string(r.AppendDID(nil))
}

// LastSeenUnix returns record i's last_seen in Unix seconds.
func (l *NodeList) LastSeenUnix(i int) int64 {
	if v := l.seen[i]; v >= 0 {
		return v / int64(time.Second)
	}
	return l.LastSeen(i).Unix()
}

// DIDDerived reports whether the DID is derived from the key, which makes it plain text
// whatever Plain says of the other fields.
func (r *NodeRow) DIDDerived() bool { return r.derived != 0 }
