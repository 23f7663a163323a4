package budget

import (
	"container/list"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/netblock"
)

// Window counts events per key in fixed windows that start at a key's first event, in
// memory and for at most max keys. It is for budgets that need not survive a restart (login
// attempts and failures, malformed requests); budgets that guard a secret's guessing live in
// the store's counters.
//
// A key it does not track has a count of 0: no key is ever charged with another's events.
// When it is full, a new key makes room by forgetting the least useful entry among the
// least recently counted ones — one whose window ended, else the one with the fewest events
// — so a sender that cycles through more keys than it holds forgets its own entries first,
// and the entry of a key that keeps being refused stays, because every refusal counts as use.
type Window struct {
	mu     sync.Mutex
	window time.Duration
	max    int
	m      map[string]*list.Element
	order  list.List // of *windowEntry, most recently used first
}

type windowEntry struct {
	key   string
	start time.Time
	n     int
}

// evictSample is how many of the least recently used entries a full table looks at to
// choose the one to forget.
const evictSample = 8

// NewWindow returns a table counting per window and holding at most max keys (at least one).
func NewWindow(window time.Duration, max int) *Window {
	if max < 1 {
		max = 1
	}
	return &Window{window: window, max: max, m: make(map[string]*list.Element)}
}

// entry returns k's entry with its window running at now, creating it (and making room for
// it) when create is set; nil when k is untracked and create is not set. The caller holds mu.
func (w *Window) entry(k string, now time.Time, create bool) *windowEntry {
	if el, ok := w.m[k]; ok {
		w.order.MoveToFront(el)
		e := el.Value.(*windowEntry)
		if !now.Before(e.start.Add(w.window)) {
			e.start, e.n = now, 0
		}
		return e
	}
	if !create {
		return nil
	}
	if len(w.m) >= w.max {
		w.evict(now)
	}
	e := &windowEntry{key: k, start: now}
	w.m[k] = w.order.PushFront(e)
	return e
}

// evict forgets one entry: among the evictSample least recently used, the first whose
// window ended, else the one with the fewest events (the least recently used of those).
// The caller holds mu.
func (w *Window) evict(now time.Time) {
	var victim *list.Element
	el := w.order.Back()
	for i := 0; i < evictSample && el != nil; i, el = i+1, el.Prev() {
		e := el.Value.(*windowEntry)
		if !now.Before(e.start.Add(w.window)) {
			victim = el
			break
		}
		if victim == nil || e.n < victim.Value.(*windowEntry).n {
			victim = el
		}
	}
	if victim != nil {
		delete(w.m, victim.Value.(*windowEntry).key)
		w.order.Remove(victim)
	}
}

// Count returns the events of k in its running window: 0 for a key not tracked.
func (w *Window) Count(k string, now time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.entry(k, now, false); e != nil {
		return e.n
	}
	return 0
}

// Add counts one event of k at now and returns the count in its window.
func (w *Window) Add(k string, now time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entry(k, now, true)
	e.n++
	return e.n
}

// TakeBelow counts one event of k at now if k has fewer than limit in its window, and
// reports whether it did.
func (w *Window) TakeBelow(k string, limit int, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entry(k, now, true)
	if e.n >= limit {
		return false
	}
	e.n++
	return true
}

// Len is the number of keys tracked.
func (w *Window) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}

// Addresses is a per-address budget kept in memory with its per-block aggregate
// (package registry/netblock): an event counts against both, and either being spent refuses.
type Addresses struct {
	addr, block *Window
	factor      int
}

// NewAddresses returns a budget counting per window, whose tables of addresses and of blocks
// each hold at most max keys, and whose aggregate per block is factor addresses' worth.
func NewAddresses(window time.Duration, max, factor int) *Addresses {
	return &Addresses{addr: NewWindow(window, max), block: NewWindow(window, max), factor: factor}
}

// Spent reports whether addr has spent limit in its window, or its block limit times the
// block factor.
func (a *Addresses) Spent(addr string, limit int, now time.Time) (byAddr, byBlock bool) {
	if a.addr.Count(addr, now) >= limit {
		return true, false
	}
	return false, a.block.Count(netblock.BlockOf(addr), now) >= BlockLimit(limit, a.factor)
}

// Add counts one event of addr.
func (a *Addresses) Add(addr string, now time.Time) {
	a.addr.Add(addr, now)
	a.block.Add(netblock.BlockOf(addr), now)
}

// Take counts one event of addr unless either budget is spent, which it reports. Concurrent
// takes of one address may pass a budget by the takes in flight.
func (a *Addresses) Take(addr string, limit int, now time.Time) (byAddr, byBlock bool) {
	if byAddr, byBlock = a.Spent(addr, limit, now); !byAddr && !byBlock {
		a.Add(addr, now)
	}
	return byAddr, byBlock
}

// BlockLimit is a per-address limit's aggregate over one address block.
func BlockLimit(limit, factor int) int {
	if limit > (1<<62)/max(factor, 1) {
		return 1 << 62
	}
	return limit * factor
}
