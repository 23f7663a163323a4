package admission

import (
	"time"

	"github.com/svrp/svrp/registry/netblock"
)

// Reservation is a newcomer's place, taken before the write it is for and settled after:
// [Reservation.Commit] when the newcomer was written, [Reservation.Cancel] when not. While it
// is open the place counts, so concurrent newcomers cannot pass a quota together.
//
// When the place has to come from a stale entry ([Reservation.NeedsVictim]), the caller asks
// [Reservation.Next] for candidates inside the write transaction, checks each against its
// record, and either removes it ([Reservation.Take]) or says it is in use after all
// ([Reservation.Pass]). A transaction that runs again keeps the victim it took
// ([Reservation.Victim]), to be checked and removed again.
type Reservation[K comparable] struct {
	t      *Table[K]
	now    int64
	groups [netblock.Levels]*group[K]
	// full is the narrowest level whose group is at its quota, or -1; cap is true when
	// no group is and the table is at its cap.
	full   netblock.Level
	cap    bool
	victim K
	has    bool // victim is set
	claims []K  // every candidate Next offered, to be let go when the place settles
	done   bool
}

// Reserve takes a place for a newcomer from origin at now.
func (t *Table[K]) Reserve(origin string, now time.Time) *Reservation[K] {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &Reservation[K]{t: t, now: now.Unix(), full: -1}
	t.forget(r.now)
	r.groups = t.groupsOf(origin)
	r.full, r.cap = t.need(r.groups)
	for _, g := range r.groups {
		g.held++
	}
	t.total++
	return r
}

// need is what a newcomer of groups lacks: the narrowest level whose group is at its quota
// (or -1), and whether only the table's cap is. The caller holds mu.
func (t *Table[K]) need(groups [netblock.Levels]*group[K]) (netblock.Level, bool) {
	for l, g := range groups {
		// A quota as large as the cap is the cap's: its group is full only when the table is.
		if g.held >= t.quota.PerGroup[l] && t.quota.PerGroup[l] < t.quota.Cap {
			return netblock.Level(l), false
		}
	}
	return -1, t.total >= t.quota.Cap
}

// Room reports, before the work a place is for, whether a newcomer from origin would find
// one at now: nil, or the [*Refusal] Reserve's candidates would end in. It takes nothing.
func (t *Table[K]) Room(origin string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := now.Unix()
	t.forget(at)
	var groups [netblock.Levels]*group[K]
	for l, name := range netblock.Groups(origin) {
		g, ok := t.groups[l][name]
		if !ok {
			g = &group[K]{} // holds nothing: a newcomer's group is never at its quota
		}
		groups[l] = g
	}
	full, capped := t.need(groups)
	if full < 0 && !capped {
		return nil
	}
	r := Reservation[K]{t: t, now: at, groups: groups, full: full, cap: capped}
	if _, ok := r.peek(false); ok {
		return nil
	}
	return r.refusal()
}

// NeedsVictim reports whether the place has to come from a stale entry.
func (r *Reservation[K]) NeedsVictim() bool { return r.full >= 0 || r.cap }

// Victim returns the entry taken so far, for a transaction that runs again.
func (r *Reservation[K]) Victim() (K, bool) { return r.victim, r.has }

// Next offers the next candidate to give up its place: the stalest entry not yet offered of
// the newcomer's narrowest full group, or of the whole table when only the cap is reached.
// It is claimed, so no other reservation is offered it, until Take or Pass. When none is
// left, Next returns false and [Reservation.Refusal] says why.
func (r *Reservation[K]) Next() (K, bool) {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	return r.peek(true)
}

// peek walks the candidates; with claim it claims the one it returns. The caller holds mu.
func (r *Reservation[K]) peek(claim bool) (K, bool) {
	t := r.t
	for range 2 {
		c := &t.stale
		if r.full >= 0 {
			c = &r.groups[r.full].stale
		}
		for c.next < len(c.ids) {
			id := c.ids[c.next]
			e, ok := t.entries[id]
			if !ok || t.claimed[id] || t.inUse(e, r.now) || (r.full >= 0 && e.groups[r.full] != r.groups[r.full]) {
				c.next++ // not offered again until a rebuild finds it stale
				continue
			}
			if claim {
				t.claimed[id] = true
				r.claims = append(r.claims, id)
				c.next++
			}
			return id, true
		}
		if !t.mayRebuild(r.now) {
			break
		}
		t.rebuild(r.now)
	}
	var zero K
	return zero, false
}

// Own offers, when Next found no candidate, one of ids — entries held by the newcomer's own
// owner (an operator's sessions), which only it could have spent — to give up its place:
// the least recently used of those whose removal makes the place (in the newcomer's narrowest
// full group, or any when only the cap is reached), in use or not. It is taken as if by Take.
func (r *Reservation[K]) Own(ids []K) (K, bool) {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	var best K
	var at int64
	found := false
	for _, id := range ids {
		e, ok := t.entries[id]
		if !ok || t.claimed[id] || (r.full >= 0 && e.groups[r.full] != r.groups[r.full]) {
			continue
		}
		if !found || e.lastUse < at {
			best, at, found = id, e.lastUse, true
		}
	}
	if found {
		t.claimed[best] = true
		r.claims = append(r.claims, best)
		r.victim, r.has = best, true
	}
	return best, found
}

// Take records that the caller removed id, a candidate Next offered, to make the place.
func (r *Reservation[K]) Take(id K) {
	r.victim, r.has = id, true
}

// Pass records that id, a candidate Next offered, is in use after all: last used at
// lastUse, or kept by its owner.
func (r *Reservation[K]) Pass(id K, lastUse time.Time, kept bool) {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	delete(r.t.claimed, id)
	if e, ok := r.t.entries[id]; ok {
		e.lastUse, e.kept = max(e.lastUse, unix(lastUse)), kept
	}
	if r.has && r.victim == id {
		var zero K
		r.victim, r.has = zero, false
	}
}

// Refusal is the [*Refusal] of a newcomer for whom Next found no candidate.
func (r *Reservation[K]) Refusal() error {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	return r.refusal()
}

func (r *Reservation[K]) refusal() *Refusal {
	t := r.t
	f := &Refusal{Table: t.name, Full: r.full < 0}
	at := t.freeAt
	if !f.Full {
		f.Level, at = r.full, r.groups[r.full].free
	}
	switch {
	case at >= 1<<62:
		// Every entry is kept, or the table has not looked since they were added: one idle
		// window, or the longest a client is asked to wait.
		f.RetryAfter = min(max(t.idle, time.Second), maxRetryAfter)
	case at <= r.now:
		f.RetryAfter = time.Second // freed since the last look; the next finds it
	default:
		f.RetryAfter = min(time.Duration(at-r.now)*time.Second, maxRetryAfter)
	}
	return f
}

// maxRetryAfter is the longest wait a refusal asks for: a place may free up sooner than the
// table last knew (an entry removed), and a client told to wait long comes back late.
const maxRetryAfter = time.Hour

// Commit settles the place as id's, last used and ending as given (zero: never ends), and
// removes the victim taken, if any.
func (r *Reservation[K]) Commit(id K, lastUse, end time.Time) {
	r.settle(func(t *Table[K]) {
		if r.has {
			t.touch(r.victim)
			t.drop(r.victim)
		}
		t.touch(id)
		if _, ok := t.entries[id]; ok {
			t.drop(id) // held already: the new place replaces the old
		}
		t.put(id, r.groups, unix(lastUse), unix(end))
	})
}

// Cancel gives the place back: nothing was written. The victim taken, if any, stays.
func (r *Reservation[K]) Cancel() {
	r.settle(func(t *Table[K]) {
		t.total--
		t.release(r.groups)
	})
}

// settle ends the reservation with end, under mu, once: a second Commit or Cancel does
// nothing.
func (r *Reservation[K]) settle(end func(t *Table[K])) {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	r.letGo()
	end(t)
}

// letGo ends the claims of the candidates offered. The caller holds mu.
func (r *Reservation[K]) letGo() {
	for _, id := range r.claims {
		delete(r.t.claimed, id)
	}
	r.claims = nil
}
