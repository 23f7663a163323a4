package registry

import (
	"container/heap"
	"net"
	"net/http"
	"net/netip"
	"strings"
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

// ClientGroup is the key per-address budgets count against: an IPv4 address as itself, an
// IPv6 address as its /64 ("2001:db8:1:2::/64"), and an IPv4-mapped IPv6 address as the IPv4
// address. Anything unparsable is returned as is.
func ClientGroup(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// clientAddr is the client address of r (see limits.go): the TCP peer, or, when the peer is
// one of the trusted proxies, the nearest address that the proxies report and that is not
// itself a trusted proxy. X-Forwarded-For is read first, then Forwarded; a peer that is not
// trusted cannot choose its address with either.
func (s *Service) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(peer) {
		return ClientGroup(host)
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			// A hop the proxies wrote that is no address (an obfuscated name): the client
			// is unknown beyond the last trusted proxy, so count against that proxy.
			break
		}
		if !s.trusted(a) {
			return ClientGroup(a.String())
		}
		peer = a
	}
	return ClientGroup(peer.String())
}

func (s *Service) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.trustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor returns the client addresses that proxies appended, nearest last: every
// X-Forwarded-For entry, or when there is none, the for= parameters of Forwarded (RFC 7239),
// without brackets or ports.
func forwardedFor(h http.Header) []string {
	var out []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, part := range strings.Split(line, ",") {
			out = append(out, strings.TrimSpace(part))
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, line := range h.Values("Forwarded") {
		for _, elem := range strings.Split(line, ",") {
			for _, pair := range strings.Split(elem, ";") {
				name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if !ok || !strings.EqualFold(name, "for") {
					continue
				}
				out = append(out, forwardedNode(value))
			}
		}
	}
	return out
}

// forwardedNode turns a Forwarded for= value ("192.0.2.1", "\"[2001:db8::1]:4711\"") into
// an address text.
func forwardedNode(v string) string {
	v = strings.Trim(v, `"`)
	if strings.HasPrefix(v, "[") {
		if end := strings.Index(v, "]"); end > 0 {
			return v[1:end]
		}
	}
	if host, _, err := net.SplitHostPort(v); err == nil {
		return host
	}
	return v
}
