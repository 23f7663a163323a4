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
// brings in what the others added and drops what they ended.
type expirySet struct {
	mu    sync.Mutex
	m     map[string]time.Time
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

func newExpirySet() *expirySet { return &expirySet{m: make(map[string]time.Time)} }

// forget drops what ended by now. The caller holds mu.
func (s *expirySet) forget(now time.Time) {
	for len(s.order) > 0 && !now.Before(s.order[0].at) {
		e := heap.Pop(&s.order).(expiryEntry)
		if at, ok := s.m[e.id]; ok && at.Equal(e.at) {
			delete(s.m, e.id)
		}
	}
}

// reserve adds id, ending at end, unless limit ids are live at now; it reports whether it
// did.
func (s *expirySet) reserve(id string, end time.Time, limit int, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(now)
	if _, ok := s.m[id]; !ok && len(s.m) >= limit {
		return false
	}
	s.put(id, end)
	return true
}

// put adds id, ending at end, whatever the count. The caller holds mu.
func (s *expirySet) put(id string, end time.Time) {
	s.m[id] = end
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
func (s *expirySet) replace(found map[string]time.Time, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]time.Time, len(found))
	for id, at := range found {
		if !s.touched[id] && now.Before(at) {
			next[id] = at
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

// add adds id whatever the count (for what a start finds in the store).
func (s *expirySet) add(id string, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(id, end)
}

func (s *expirySet) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
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
