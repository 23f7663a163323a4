// Package admission decides who gets a place in a capped table that strangers can grow — the
// registry's node records, bearer sessions, open binding sessions — and which entry, if any,
// gives its place up for a newcomer.
//
// # What it decides
//
// A [Table] holds at most [Quota].Cap entries, and the entries that came from one address
// group at each level of the hierarchy (package netblock: a client, its block, its network)
// at most [Quota].PerGroup of that level. A newcomer gets a place when all of them have room.
// When one does not, the newcomer may take the place of a stale entry: one not used within the
// table's idle window and not kept by its owner (a bound node). An entry in use is never the
// price of a newcomer — Kademlia's rule: a live old contact is kept, and the newcomer waits
// for a stale one.
//
//   - When a group of the newcomer's is at its quota, the narrowest such group pays with its
//     stalest entry: the newcomer's own neighbours make room, or it waits.
//   - When only the table is at its cap, the stalest entry of the whole table pays, whatever
//     its group.
//
// So the victim is never chosen by which group holds the most, the one thing an attacker who
// makes addresses for free can steer; and an attacker spread over many blocks of one network
// meets the network's quota, not an honest block's. When no stale entry is left the newcomer
// is refused with a [*Refusal] that says when a place may free up.
//
// # What it does not do
//
// It reads no store and no clock, and writes nothing durable. It knows each entry's last use
// as the caller told it: at a count from the store ([Table.BeginCount]), at its creation and
// on each [Table.Use]. So the caller checks every candidate it is offered against the record
// it holds, inside the transaction that would remove it, and says what it found ([Reservation.Pass]
// for an entry in use after all, [Reservation.Take] for the one it removed). On a store
// shared by several daemons each table knows the others' entries as of its last count.
package admission

import (
	"container/heap"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/netblock"
)

// Quota is what a table holds: Cap entries in all, PerGroup[l] per address group at level l.
type Quota struct {
	Cap      int
	PerGroup [netblock.Levels]int
}

// Refusal is a newcomer refused for want of a place: every entry that could give one up is
// in use. It refuses only the newcomer; nothing held is touched.
type Refusal struct {
	// Table names the table ("nodes", "bearer sessions", ...).
	Table string
	// Full is true when the table is at its cap; otherwise Level is the level whose group of
	// the newcomer's is at its quota.
	Full  bool
	Level netblock.Level
	// RetryAfter is the earliest a place may free up, as the table last knew its entries.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	if r.Full {
		return fmt.Sprintf("the %s table is full of entries in use", r.Table)
	}
	return fmt.Sprintf("the %s of this %s (%s) hold as many as they may, all in use", r.Table, r.Level, r.Level.Describe())
}

// Table is one capped table's places. Its ids are the caller's (a node key, a session's
// hash). It is safe for concurrent use.
type Table[K comparable] struct {
	name  string
	quota Quota
	// idle is how long an entry stays in use after its last use; zero means until it ends.
	idle time.Duration

	mu      sync.Mutex
	entries map[K]*entry[K]
	groups  [netblock.Levels]map[string]*group[K]
	total   int // entries, plus places reserved and not yet settled
	ends    endHeap[K]
	stale   candidates[K] // stale entries, stalest first, as of the last rebuild
	freeAt  int64         // the earliest a place of the table may free up, as of the last rebuild
	rebuilt int64         // when the candidates were last rebuilt, unix seconds
	claimed map[K]bool    // candidates offered to a reservation and not yet passed or taken
	count   *counting[K]  // the count from the store under way, if any
	lastGen uint32        // the generation of the last count begun
}

type entry[K comparable] struct {
	groups       [netblock.Levels]*group[K]
	lastUse, end int64 // unix seconds; end 0: none
	kept         bool
	// wasKept is set for an entry kept before the last count, which forgets what keeps
	// entries: it is offered after every stale entry that was not, so that records an
	// attacker keeps (its own bound nodes gone quiet) are not walked past at every count.
	wasKept bool
	gen     uint32 // the count from the store that last found it
}

// group is what one address group holds of the table.
type group[K comparable] struct {
	name  string
	held  int           // entries and reservations
	free  int64         // the earliest one of its entries may free up, as of the last rebuild
	stale candidates[K] // its stale entries, stalest first, as of the last rebuild
}

// candidates is a list of ids to offer as victims, stalest first, walked once.
type candidates[K comparable] struct {
	ids  []K
	next int
}

// New returns an empty table named name (as refusals and logs say it), holding q, whose
// entries stay in use for idle after their last use (zero: until they end).
func New[K comparable](name string, q Quota, idle time.Duration) *Table[K] {
	t := &Table[K]{name: name, quota: q, idle: idle, entries: map[K]*entry[K]{}, claimed: map[K]bool{}}
	for l := range t.groups {
		t.groups[l] = map[string]*group[K]{}
	}
	return t
}

// Quota returns what the table holds.
func (t *Table[K]) Quota() Quota { return t.quota }

// Len is how many entries the table holds at now, places reserved included.
func (t *Table[K]) Len(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(now.Unix())
	return t.total
}

// Held is how many entries the group of origin at level l holds at now, places reserved
// included.
func (t *Table[K]) Held(origin string, l netblock.Level, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(now.Unix())
	if g, ok := t.groups[l][netblock.Of(origin, l)]; ok {
		return g.held
	}
	return 0
}

// Has reports whether the table holds id at now.
func (t *Table[K]) Has(id K, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(now.Unix())
	_, ok := t.entries[id]
	return ok
}

// End returns the end of id, when the table holds it and it ends.
func (t *Table[K]) End(id K) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[id]
	if !ok || e.end == 0 {
		return time.Time{}, false
	}
	return time.Unix(e.end, 0), true
}

// Add records id, from origin, last used at lastUse and ending at end (zero: never), whatever
// the quota: for what the caller finds in its store, and for an entry whose removal did not
// happen after all. An id already held is moved.
func (t *Table[K]) Add(id K, origin string, lastUse, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touch(id)
	t.drop(id)
	t.put(id, t.groupsOf(origin), unix(lastUse), unix(end))
	t.total++
	for _, g := range t.entries[id].groups {
		g.held++
	}
}

// Remove forgets id; an id not held is no error.
func (t *Table[K]) Remove(id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touch(id)
	t.drop(id)
}

// Use records that id was used at now, so that it stays in use for the idle window.
func (t *Table[K]) Use(id K, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[id]; ok {
		e.lastUse = max(e.lastUse, now.Unix())
	}
}

// Keep records whether id is kept by its owner: a kept entry is never offered as a victim,
// however long unused.
func (t *Table[K]) Keep(id K, kept bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[id]
	if !ok || e.kept == kept {
		return
	}
	e.kept = kept
	if !kept {
		e.wasKept = false
		// Offered again at once, after the stale entries already found: a rebuild may be
		// a while away, and an entry let go of must not wait for it.
		t.stale.ids = append(t.stale.ids, id)
		for _, g := range e.groups {
			g.stale.ids = append(g.stale.ids, id)
		}
	}
}

// unix is t in unix seconds, zero for the zero time.
func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// groupsOf finds or makes the groups of origin. The caller holds mu, and counts the
// groups' held for what it adds.
func (t *Table[K]) groupsOf(origin string) [netblock.Levels]*group[K] {
	var out [netblock.Levels]*group[K]
	for l, name := range netblock.Groups(origin) {
		g, ok := t.groups[l][name]
		if !ok {
			g = &group[K]{name: name}
			t.groups[l][name] = g
		}
		out[l] = g
	}
	return out
}

// put records a new entry with its groups, not counting it. The caller holds mu.
func (t *Table[K]) put(id K, groups [netblock.Levels]*group[K], lastUse, end int64) {
	e := &entry[K]{groups: groups, lastUse: lastUse, end: end, gen: t.lastGen}
	t.entries[id] = e
	if end != 0 {
		heap.Push(&t.ends, ending[K]{at: end, id: id})
		if len(t.ends) > 2*len(t.entries)+1024 {
			t.reorder()
		}
	}
}

// drop forgets id and gives back its place. The caller holds mu.
func (t *Table[K]) drop(id K) {
	e, ok := t.entries[id]
	if !ok {
		return
	}
	delete(t.entries, id)
	delete(t.claimed, id)
	t.total--
	t.release(e.groups)
}

// release gives back one place in each of groups, forgetting a group that holds none. The
// caller holds mu.
func (t *Table[K]) release(groups [netblock.Levels]*group[K]) {
	for l, g := range groups {
		if g.held--; g.held <= 0 {
			delete(t.groups[l], g.name)
		}
	}
}

// forget drops the entries that ended by now. The caller holds mu.
func (t *Table[K]) forget(now int64) {
	for len(t.ends) > 0 && t.ends[0].at <= now {
		x := heap.Pop(&t.ends).(ending[K])
		if e, ok := t.entries[x.id]; ok && e.end == x.at {
			t.drop(x.id)
		}
	}
}

// reorder builds the heap of ends again from the entries. The caller holds mu.
func (t *Table[K]) reorder() {
	t.ends = t.ends[:0]
	for id, e := range t.entries {
		if e.end != 0 {
			t.ends = append(t.ends, ending[K]{at: e.end, id: id})
		}
	}
	heap.Init(&t.ends)
}

// inUse reports whether e is in use at now: used within the idle window (or, with no idle
// window, not ended), or kept. The caller holds mu.
func (t *Table[K]) inUse(e *entry[K], now int64) bool {
	switch {
	case e.kept:
		return true
	case e.end != 0 && now >= e.end:
		return false
	}
	return t.idle == 0 || now < e.lastUse+int64(t.idle/time.Second)
}

// freesAt is when e may give up its place: the end of its idle window, or its end, whichever
// is first. The caller holds mu.
func (t *Table[K]) freesAt(e *entry[K]) int64 {
	at := int64(1 << 62)
	if t.idle != 0 {
		at = e.lastUse + int64(t.idle/time.Second)
	}
	if e.end != 0 {
		at = min(at, e.end)
	}
	return at
}

// rebuild finds the stale entries again, stalest first, and when each group and the table
// may free a place. The caller holds mu.
func (t *Table[K]) rebuild(now int64) {
	type cand struct {
		id      K
		at      int64
		wasKept bool
	}
	var stale []cand
	t.freeAt = 1 << 62
	for _, byName := range t.groups {
		for _, g := range byName {
			g.free, g.stale = 1<<62, candidates[K]{}
		}
	}
	for id, e := range t.entries {
		if e.kept {
			continue
		}
		if !t.inUse(e, now) {
			stale = append(stale, cand{id, e.lastUse, e.wasKept})
			continue
		}
		at := t.freesAt(e)
		t.freeAt = min(t.freeAt, at)
		for _, g := range e.groups {
			g.free = min(g.free, at)
		}
	}
	slices.SortFunc(stale, func(a, b cand) int {
		if a.wasKept != b.wasKept {
			if a.wasKept {
				return 1
			}
			return -1
		}
		return int(a.at - b.at)
	})
	t.stale = candidates[K]{ids: make([]K, 0, len(stale))}
	for _, c := range stale {
		t.stale.ids = append(t.stale.ids, c.id)
		for _, g := range t.entries[c.id].groups {
			g.stale.ids = append(g.stale.ids, c.id)
		}
	}
	t.rebuilt = now
}

// rebuildPace paces how often candidates may be found again in memory when they run out: at
// least a second apart, and a second more per rebuildPace entries, so that a table under
// pressure spends a bounded share of a core finding its stale entries whatever its size.
const rebuildPace = 100_000

func (t *Table[K]) mayRebuild(now int64) bool {
	return now >= t.rebuilt+1+int64(len(t.entries)/rebuildPace)
}

type ending[K comparable] struct {
	at int64
	id K
}

type endHeap[K comparable] []ending[K]

func (h endHeap[K]) Len() int           { return len(h) }
func (h endHeap[K]) Less(i, j int) bool { return h[i].at < h[j].at }
func (h endHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap[K]) Push(x any)        { *h = append(*h, x.(ending[K])) }
func (h *endHeap[K]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
