package registry

import (
	"container/heap"
	"container/list"
)

// groupHolds is what each address group (an AddressBlock) holds of a capped table, so that
// a full table can make room by displacing an entry of the group holding the most instead
// of refusing everyone: per group, the ids it holds in least recently used order, and the
// groups in a heap by how many they hold. It is kept beside an expirySet, under its lock.
type groupHolds struct {
	byID   map[string]*list.Element // of *heldID
	groups map[string]*heldGroup
	top    groupHeap
}

type heldID struct {
	id    string
	group *heldGroup
}

type heldGroup struct {
	name string
	lru  list.List // of *heldID, most recently used first
	at   int       // index in top
}

// groupHeap orders groups by what they hold, most first.
type groupHeap []*heldGroup

func (h groupHeap) Len() int           { return len(h) }
func (h groupHeap) Less(i, j int) bool { return h[i].lru.Len() > h[j].lru.Len() }
func (h groupHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].at = i; h[j].at = j }
func (h *groupHeap) Push(x any)        { g := x.(*heldGroup); g.at = len(*h); *h = append(*h, g) }
func (h *groupHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	*h = old[:len(old)-1]
	return g
}

func newGroupHolds() *groupHolds {
	return &groupHolds{byID: make(map[string]*list.Element), groups: make(map[string]*heldGroup)}
}

// add records id as held by group, most recently used; an id already held moves to group.
func (g *groupHolds) add(id, group string) {
	g.drop(id)
	hg, ok := g.groups[group]
	if !ok {
		hg = &heldGroup{name: group}
		g.groups[group] = hg
		heap.Push(&g.top, hg)
	}
	g.byID[id] = hg.lru.PushFront(&heldID{id: id, group: hg})
	heap.Fix(&g.top, hg.at)
}

// drop forgets id; absent is no error.
func (g *groupHolds) drop(id string) {
	el, ok := g.byID[id]
	if !ok {
		return
	}
	delete(g.byID, id)
	hg := el.Value.(*heldID).group
	hg.lru.Remove(el)
	if hg.lru.Len() == 0 {
		heap.Remove(&g.top, hg.at)
		delete(g.groups, hg.name)
		return
	}
	heap.Fix(&g.top, hg.at)
}

// use marks id as used now, so that it is the last of its group to be displaced.
func (g *groupHolds) use(id string) {
	if el, ok := g.byID[id]; ok {
		el.Value.(*heldID).group.lru.MoveToFront(el)
	}
}

// count is how many ids group holds.
func (g *groupHolds) count(group string) int {
	if hg, ok := g.groups[group]; ok {
		return hg.lru.Len()
	}
	return 0
}

// displaceable returns the id a newcomer of group may displace: the least recently used id
// of the group holding the most, when that group holds at least two more than group (so
// that a displacement never leaves the newcomer's group holding more than the victim's, and
// groups at an even share never churn each other's entries); "" when there is none.
func (g *groupHolds) displaceable(group string) string {
	if len(g.top) == 0 {
		return ""
	}
	hg := g.top[0]
	if hg.name == group || hg.lru.Len() < g.count(group)+2 {
		return ""
	}
	return hg.lru.Back().Value.(*heldID).id
}

// quota is the bound a capped table applies: limit entries in all, perGroup per address
// group.
type quota struct{ limit, perGroup int }

// Why a place in a capped table was refused.
const (
	placeTaken   = iota // the place is taken, perhaps by displacing an entry
	placeGroup          // the newcomer's group holds its quota
	placeTooFull        // the table is full, and no group holds more than the newcomer's
)
