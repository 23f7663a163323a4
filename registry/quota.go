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
	top    mostFirst[*heldGroup]
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

func (g *heldGroup) held() int   { return g.lru.Len() }
func (g *heldGroup) index() *int { return &g.at }

// heldCount is a group in a mostFirst heap: how much it holds, and its place in the heap.
type heldCount interface {
	held() int
	index() *int
}

// mostFirst is a heap of groups, the one holding the most on top. Each group keeps its place,
// so that heap.Fix and heap.Remove can find it when what it holds changes.
type mostFirst[G heldCount] []G

func (h mostFirst[G]) Len() int           { return len(h) }
func (h mostFirst[G]) Less(i, j int) bool { return h[i].held() > h[j].held() }
func (h mostFirst[G]) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; *h[i].index() = i; *h[j].index() = j }
func (h *mostFirst[G]) Push(x any)        { g := x.(G); *g.index() = len(*h); *h = append(*h, g) }
func (h *mostFirst[G]) Pop() any {
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
