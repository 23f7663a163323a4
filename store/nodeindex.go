package store

import "math/bits"

// slotIndex finds the node table's records by a hash of a fixed-size field: open addressing
// with linear probing over one array of 4-byte cells, each naming a slot of the table, so
// that an index costs a few bytes a node where a map keyed by a 32-byte key costs tens. The
// index holds no keys: a lookup compares the candidates' records itself. The hashes are
// seeded per table, so keys chosen to collide cannot lengthen the probes.
type slotIndex struct {
	cells   []uint32 // cellEmpty, cellGone, or a slot plus cellBase
	used    int      // cells naming a slot
	deleted int      // cells marked gone
}

const (
	cellEmpty = 0
	cellGone  = 1
	cellBase  = 2
)

// indexLoad bounds the cells in use, live or gone, to four fifths of the cells, past which
// probes lengthen fast; an index grows to twice its live cells, so that it holds 5 to 8
// bytes a record.
const (
	indexLoadNum, indexLoadDen = 4, 5
)

// sized returns an empty index with room for n slots without growing.
func sizedIndex(n int) slotIndex {
	return slotIndex{cells: make([]uint32, max(16, n*3/2))}
}

// start is the first cell a hash probes.
func (x *slotIndex) start(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(x.cells)))
	return int(hi)
}

// each calls fn with every slot in the probe sequence of h until fn returns false.
func (x *slotIndex) each(h uint64, fn func(slot) bool) {
	if len(x.cells) == 0 {
		return
	}
	for i := x.start(h); ; i++ {
		if i == len(x.cells) {
			i = 0
		}
		switch c := x.cells[i]; c {
		case cellEmpty:
			return
		case cellGone:
		default:
			if !fn(slot(c - cellBase)) {
				return
			}
		}
	}
}

// add puts s under h, growing the index first when it is full; hashOf rehashes the slots
// already held.
func (x *slotIndex) add(h uint64, s slot, hashOf func(slot) uint64) {
	if (x.used+x.deleted+1)*indexLoadDen > len(x.cells)*indexLoadNum {
		x.rehash(max(16, (x.used+1)*2), hashOf)
	}
	x.put(h, s)
}

func (x *slotIndex) put(h uint64, s slot) {
	for i := x.start(h); ; i++ {
		if i == len(x.cells) {
			i = 0
		}
		if x.cells[i] == cellEmpty || x.cells[i] == cellGone {
			if x.cells[i] == cellGone {
				x.deleted--
			}
			x.cells[i] = uint32(s) + cellBase
			x.used++
			return
		}
	}
}

// rehash moves every slot into n cells, dropping the gone ones.
func (x *slotIndex) rehash(n int, hashOf func(slot) uint64) {
	old := x.cells
	*x = slotIndex{cells: make([]uint32, n)}
	for _, c := range old {
		if c >= cellBase {
			x.put(hashOf(slot(c-cellBase)), slot(c-cellBase))
		}
	}
}

// replace changes the cell naming from under h to name to; to == noSlot removes it.
func (x *slotIndex) replace(h uint64, from, to slot) {
	if len(x.cells) == 0 {
		return
	}
	for i := x.start(h); ; i++ {
		if i == len(x.cells) {
			i = 0
		}
		switch c := x.cells[i]; {
		case c == cellEmpty:
			return
		case c == uint32(from)+cellBase:
			if to == noSlot {
				x.cells[i] = cellGone
				x.used--
				x.deleted++
			} else {
				x.cells[i] = uint32(to) + cellBase
			}
			return
		}
	}
}
