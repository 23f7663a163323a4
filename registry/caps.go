package registry

import (
	"container/heap"
	"sync"
	"time"
)

// expirySet holds the ids of things that end at a known time (open binding sessions, bearer
// sessions), so that a global cap can count the live ones without reading the store: ids
// leave it when they end early (remove) or when their time passes. On a store shared by
// several daemons it is set again from the store at every sweep (begin, then replace), which
// brings in what the others added and drops what they ended. Each id is held by the address
// group that created it (holds), for the quotas per group and the displacement of a full set.
type expirySet struct {
	mu    sync.Mutex
	m     map[string]time.Time
	holds *groupHolds
	order expiryHeap // may hold ids already removed; compacted when mostly stale
	// touched holds the ids put or removed since begin, while a count from the store is
	// under way: the count may have been read before they changed, so memory is kept for
	// them. nil when no count is under way.
	touched map[string]bool
}

type expiryEntry struct {
	at time.Time
	id string
}

type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// held is an id's end and the address group that holds it, as a count from the store finds
// them.
type held struct {
	end   time.Time
	group string
}

func newExpirySet() *expirySet {
	return &expirySet{m: make(map[string]time.Time), holds: newGroupHolds()}
}

// forget drops what ended by now. The caller holds mu.
func (s *expirySet) forget(now time.Time) {
	for len(s.order) > 0 && !now.Before(s.order[0].at) {
		e := heap.Pop(&s.order).(expiryEntry)
		if at, ok := s.m[e.id]; ok && at.Equal(e.at) {
			delete(s.m, e.id)
			s.holds.drop(e.id)
		}
	}
}

// reserve adds id, ending at end and held by group, within q at now. When the set holds
// q.limit ids it makes room by displacing the least recently used id of the group holding
// the most (groupHolds.displaceable), which it returns so that the caller ends it in the
// store. It refuses
// (placeGroup) when group already holds q.perGroup ids, and (placeTooFull) when the set is
// full and no group holds more than group.
func (s *expirySet) reserve(id string, end time.Time, group string, q quota, now time.Time) (displaced string, why int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok {
		return "", placeTaken
	}
	if displaced, why = s.room(group, q, now); why != placeTaken {
		return "", why
	}
	if displaced != "" {
		s.drop(displaced)
	}
	s.put(id, end, group)
	return displaced, placeTaken
}

// room says whether a newcomer of group would get a place within q at now, and which id
// it would displace. The caller holds mu.
func (s *expirySet) room(group string, q quota, now time.Time) (displaced string, why int) {
	s.forget(now)
	if s.holds.count(group) >= q.perGroup {
		return "", placeGroup
	}
	if len(s.m) < q.limit {
		return "", placeTaken
	}
	if displaced = s.holds.displaceable(group); displaced == "" {
		return "", placeTooFull
	}
	return displaced, placeTaken
}

// hasRoom is room for a check made before the work a place is for: it takes nothing.
func (s *expirySet) hasRoom(group string, q quota, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, why := s.room(group, q, now)
	return why
}

// end returns the end of id, when s holds it.
func (s *expirySet) end(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end, ok := s.m[id]
	return end, ok
}

// use marks id as used, so that it is displaced after its group's other ids.
func (s *expirySet) use(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds.use(id)
}

// heldBy is how many live ids group holds at now.
func (s *expirySet) heldBy(group string, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(now)
	return s.holds.count(group)
}

// put adds id, ending at end and held by group, whatever the count. The caller holds mu.
func (s *expirySet) put(id string, end time.Time, group string) {
	s.m[id] = end
	s.holds.add(id, group)
	if s.touched != nil {
		s.touched[id] = true
	}
	heap.Push(&s.order, expiryEntry{at: end, id: id})
	if len(s.order) > 2*len(s.m)+1024 {
		s.reorder()
	}
}

// reorder builds the heap again from m. The caller holds mu.
func (s *expirySet) reorder() {
	s.order = s.order[:0]
	for id, at := range s.m {
		s.order = append(s.order, expiryEntry{at: at, id: id})
	}
	heap.Init(&s.order)
}

// begin starts a count from the store, to be ended by replace.
func (s *expirySet) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touched = make(map[string]bool)
}

// abort ends a count from the store that failed, leaving the set as memory has it.
func (s *expirySet) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touched = nil
}

// replace makes the set what the store held (found, read after begin), except for the ids
// this process put or removed since begin, which stay as memory has them.
func (s *expirySet) replace(found map[string]held, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]time.Time, len(found))
	for id, h := range found {
		if !s.touched[id] && now.Before(h.end) {
			next[id] = h.end
		}
	}
	for id := range s.m {
		if !s.touched[id] {
			if _, ok := next[id]; !ok {
				s.holds.drop(id)
			}
		}
	}
	for id, h := range found {
		if _, ok := next[id]; ok && !s.touched[id] {
			if _, known := s.m[id]; !known {
				s.holds.add(id, h.group)
			}
		}
	}
	for id := range s.touched {
		if at, ok := s.m[id]; ok {
			next[id] = at
		}
	}
	s.m, s.touched = next, nil
	s.reorder()
}

// add adds id, held by group, whatever the count (for what a start finds in the store, and
// for a displaced id whose displacement did not happen).
func (s *expirySet) add(id string, end time.Time, group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(id, end, group)
}

func (s *expirySet) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(id)
}

// drop removes id. The caller holds mu.
func (s *expirySet) drop(id string) {
	delete(s.m, id)
	s.holds.drop(id)
	if s.touched != nil {
		s.touched[id] = true
	}
}

func (s *expirySet) live(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(now)
	return len(s.m)
}

// rareWarning logs one warning per capWarnEvery at most.
type rareWarning struct {
	mu   sync.Mutex
	last time.Time
}

func (r *rareWarning) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && now.Sub(r.last) < capWarnEvery {
		return false
	}
	r.last = now
	return true
}

// capReached logs, at most once a minute per cap, that a global cap refused a request.
func (s *Service) capReached(w *rareWarning, what string, limit int) {
	if w.due(s.clock()) {
		s.log.Warn("global cap reached; refusing with RATE_LIMITED", "cap", what, "limit", limit)
	}
}
