package budget

import (
	"container/list"
	"sync"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
)

// NodeFailures counts the failed resolves that name a node (docs/protocol.md §10.9): per node
// key, and per node key and client address. Past binding.ResolveNodeFailureLimit failures on
// a key, it refuses the resolves naming that key only from addresses that themselves failed
// on it, so strangers guessing a node's code cannot lock out the operator who was given it.
//
// It is held in each daemon's memory: the failures it counts are also counted per code, per
// address and per operator in the store, which bound the guessing; this budget only makes a
// node's guessers stop sooner, and each daemon applying it to what reaches it is enough.
type NodeFailures struct {
	byNode *failureTable
	byPair *failureTable
}

// NewNodeFailures returns the failures of resolves naming a node, kept for at most maxNodes
// node keys and maxPairs pairs of a node key and a client address.
func NewNodeFailures(maxNodes, maxPairs int) *NodeFailures {
	return &NodeFailures{
		byNode: newFailureTable(binding.ResolveWindow, binding.ResolveNodeFailureLimit, maxNodes),
		byPair: newFailureTable(binding.ResolveWindow, 1, maxPairs),
	}
}

// NodeKey is what the failures naming d count under: the 8-hex short body of the key
// it spells, whichever spelling d is, so that spelling a node three ways does not buy three
// budgets. Keys sharing a short body share a budget; that refuses no one who did not fail.
func NodeKey(d didkey.DID) string {
	if k, ok := d.Key(); ok {
		return k.ShortBody()
	}
	return d.Body()[:8]
}

func pairKey(node, addr string) string { return node + "\x00" + addr }

// Refuses reports whether a resolve naming node from addr is over the node's budget.
func (f *NodeFailures) Refuses(node, addr string, now time.Time) bool {
	return f.byNode.count(node, now) >= binding.ResolveNodeFailureLimit && f.byPair.count(pairKey(node, addr), now) > 0
}

// Fail counts one failed resolve naming node from addr.
func (f *NodeFailures) Fail(node, addr string, now time.Time) {
	f.byNode.add(node, now)
	f.byPair.add(pairKey(node, addr), now)
}

// failureTable counts failures per key in windows that start at a key's first failure, for
// at most max keys. When full it forgets the least useful entry to make room: the least
// recently failed of those below threshold (which refuse no one yet) unless the least recently
// failed of the others has a window that ended, else that one. A key it does not track counts as fresh: no key is ever handed another's
// count, so filling the table cannot make an honest party's key look spent.
type failureTable struct {
	mu        sync.Mutex
	window    time.Duration
	threshold int
	max       int
	m         map[string]*list.Element
	// below and over hold the entries under and at or above threshold, least recently
	// failed first.
	below, over list.List
}

type failureEntry struct {
	key   string
	start time.Time
	n     int
}

func newFailureTable(window time.Duration, threshold, max int) *failureTable {
	return &failureTable{window: window, threshold: threshold, max: max, m: make(map[string]*list.Element)}
}

func (t *failureTable) ended(e *failureEntry, now time.Time) bool {
	return !now.Before(e.start.Add(t.window))
}

// count returns the failures of k in its running window.
func (t *failureTable) count(k string, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.m[k]
	if !ok {
		return 0
	}
	e := el.Value.(*failureEntry)
	if t.ended(e, now) {
		return 0
	}
	return e.n
}

// add counts one failure of k at now.
func (t *failureTable) add(k string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.m[k]
	if !ok {
		if len(t.m) >= t.max {
			t.forgetOne(now)
		}
		t.m[k] = t.place(&failureEntry{key: k, start: now, n: 1})
		return
	}
	e := el.Value.(*failureEntry)
	t.listOf(e.n >= t.threshold).Remove(el)
	if t.ended(e, now) {
		e.start, e.n = now, 0
	}
	e.n++
	t.m[k] = t.place(e)
}

// place puts e at the back of the list its count belongs to. The caller holds mu.
func (t *failureTable) place(e *failureEntry) *list.Element {
	return t.listOf(e.n >= t.threshold).PushBack(e)
}

func (t *failureTable) listOf(over bool) *list.List {
	if over {
		return &t.over
	}
	return &t.below
}

// forgetOne drops the least useful entry. The caller holds mu.
func (t *failureTable) forgetOne(now time.Time) {
	victim := t.below.Front()
	from := &t.below
	if o := t.over.Front(); o != nil && (victim == nil || t.ended(o.Value.(*failureEntry), now) && !t.ended(victim.Value.(*failureEntry), now)) {
		victim, from = o, &t.over
	}
	if victim == nil {
		return
	}
	from.Remove(victim)
	delete(t.m, victim.Value.(*failureEntry).key)
}

func (t *failureTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
