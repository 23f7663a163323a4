package admission

import "time"

// A count from the store sets the table to what the store holds, for what this process did
// not change meanwhile: [Table.BeginCount], then [Table.Counted] for each entry the store
// holds, then [Table.EndCount]. On a store shared by several daemons it is how each learns
// the others' entries; alone, how a start learns what is there. It works in place, so a count
// costs no second copy of the table.
type counting[K comparable] struct {
	gen     uint32
	touched map[K]bool // the ids this process added or removed since the count began
}

// touch records that id changed while a count is under way, so that the count, which may
// have read it before the change, leaves it as memory has it. The caller holds mu.
func (t *Table[K]) touch(id K) {
	if t.count != nil {
		t.count.touched[id] = true
	}
}

// BeginCount starts a count from the store; a count already under way starts over.
func (t *Table[K]) BeginCount() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastGen++
	t.count = &counting[K]{gen: t.lastGen, touched: map[K]bool{}}
}

// Counted records an entry the store holds: id from origin, last used at lastUse (the
// later of this and what memory knows is kept) and ending at end (zero: never).
func (t *Table[K]) Counted(id K, origin string, lastUse, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count == nil || t.count.touched[id] {
		return
	}
	if e, ok := t.entries[id]; ok {
		e.gen, e.lastUse = t.count.gen, max(e.lastUse, unix(lastUse))
		return
	}
	t.put(id, t.groupsOf(origin), unix(lastUse), unix(end))
	t.total++
	for _, g := range t.entries[id].groups {
		g.held++
	}
}

// EndCount ends the count: when complete, the entries it did not find, and that this process
// did not add meanwhile, are forgotten; when not (the read failed), what it found is kept
// and nothing is forgotten. Either way the stale entries are found again at now, and no entry
// is known as kept until the caller says so again ([Table.Keep], [Reservation.Pass]).
func (t *Table[K]) EndCount(complete bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.count
	if c == nil {
		return
	}
	t.count = nil
	for id, e := range t.entries {
		if complete && e.gen != c.gen && !c.touched[id] {
			t.drop(id)
			continue
		}
		// What keeps an entry (a binding) may have ended elsewhere, which a count does not
		// read: each kept entry is checked again when it is next offered, after the others.
		if e.kept {
			e.kept, e.wasKept = false, true
		}
	}
	t.forget(now.Unix())
	t.rebuild(now.Unix())
}
