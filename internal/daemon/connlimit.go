package daemon

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/registry/netblock"
)

// Connection bounds (see package registry/limits for the registry's own). Every open connection
// holds a file descriptor and a goroutine: without a cap, idle keep-alive connections from a
// few addresses exhaust the process's file limit and the daemon stops accepting anyone.
const (
	// DefaultMaxConnections caps the connections open at once. It is lowered at start-up to
	// what the file limit leaves after fdReserve.
	DefaultMaxConnections = 8192
	// DefaultMaxConnectionsPerAddress caps the connections of one client address (an IPv6
	// /64 counts as one). Browsers open six per host and a busy node a few; 64 leaves room
	// for a NAT in front of a few dozen machines. One address block (IPv4 /24, IPv6 /48)
	// may hold --address-block-factor times as many.
	DefaultMaxConnectionsPerAddress = 64
	// fdReserve is the file descriptors kept for the store (Badger's tables and value-log
	// files), logs and the listener, beyond the connections.
	fdReserve = 512
)

// limitListener accepts connections within a total, a per-address and a per-block cap. A
// slot is held by progress: when the total is reached it makes room by cutting a connection
// that is not making any — idle between requests, without a complete request (headers and
// body) within the grace, draining its answer below the floor rate — or one that has held its
// slot past the lifetime, and only from a client group holding more than the newcomer's; a
// newcomer may also cut a connection making progress from a group holding at least two more
// than its own. It cuts from the group holding the most connections at every level (network,
// then block, then client), so a crowd of slow, idle or slowly reading connections from a few
// groups cannot keep out a client that sends its request promptly, and cannot churn its own
// connections to keep the grace from running out (victimLocked has the whole rule). A block
// at its cap makes room the same way from its own connections only. When nothing qualifies,
// or the address is at its own cap, the new connection is closed at once. Connections from a
// trusted proxy count only against the total, since all its clients share its address.
type limitListener struct {
	net.Listener
	max, perAddr int
	blockFactor  int           // a block may hold this many addresses' worth
	grace        time.Duration // to deliver a request before being cut first
	refusalDelay time.Duration // a 429 answer is held back this long (edge.go)
	sendFloor    int           // bytes a second an answer must drain at to hold its slot (progress.go)
	sendTimeout  time.Duration // a write making no progress this long is cut, cap or not
	lifetime     time.Duration // past it a connection is cut at the cap before one that is younger
	trusted      []netip.Prefix
	now          func() time.Time
	log          *slog.Logger // nil: no log lines

	mu      sync.Mutex
	total   int
	byAddr  map[string]int
	byBlock map[string]int
	byNet   map[string]int
	conns   map[*limitedConn]struct{}
}

func newLimitListener(l net.Listener, max, perAddr int, trusted []netip.Prefix) *limitListener {
	return &limitListener{
		Listener: l, max: max, perAddr: perAddr, trusted: trusted,
		blockFactor: limits.DefaultLimits().AddressBlockFactor, grace: DefaultRequestGrace, now: time.Now,
		byAddr: make(map[string]int), byBlock: make(map[string]int), byNet: make(map[string]int),
		conns: make(map[*limitedConn]struct{}),
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		group := l.group(c.RemoteAddr())
		if lc := l.admit(c, group); lc != nil {
			return lc, nil
		}
		c.Close()
	}
}

func (l *limitListener) group(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip, _ := netip.AddrFromSlice(ta.IP)
	ip = ip.Unmap()
	for _, p := range l.trusted {
		if p.Contains(ip) {
			return "" // a trusted proxy: no per-address cap
		}
	}
	return netblock.ClientOf(ip.String())
}

// admit counts c in, or returns nil when it must be refused.
func (l *limitListener) admit(c net.Conn, group string) *limitedConn {
	now := l.now()
	block, network := "", ""
	if group != "" {
		block, network = netblock.BlockOf(group), netblock.Of(group, netblock.Network)
	}
	l.mu.Lock()
	if group != "" && l.byAddr[group] >= l.perAddr {
		l.mu.Unlock()
		return nil
	}
	var cut *limitedConn
	switch {
	case group != "" && l.byBlock[block] >= l.perAddr*max(l.blockFactor, 1):
		// The block is at its cap: room comes only from its own connections that are not
		// delivering, so one block's crowd never costs another block a connection; within
		// the block, a group may give up its own.
		cut = l.victimLocked(now, block, l.byAddr[group]-1)
	case l.total >= l.max:
		cut = l.victimLocked(now, "", l.byAddr[group])
	}
	if cut == nil && (l.total >= l.max || group != "" && l.byBlock[block] >= l.perAddr*max(l.blockFactor, 1)) {
		l.mu.Unlock()
		return nil
	}
	if cut != nil {
		l.releaseLocked(cut)
	}
	lc := &limitedConn{Conn: c, l: l, group: group, block: block, network: network, waiting: now, since: now}
	l.total++
	if group != "" {
		l.byAddr[group]++
		l.byBlock[block]++
		l.byNet[network]++
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	if cut != nil {
		cut.Conn.Close()
	}
	return lc
}

// standing ranks a connection for a cut at a cap, the first to go first.
type standing int

const (
	// stalled: idle between requests, without a complete request past the grace, or with
	// an answer draining below the floor rate. It holds a slot without making progress.
	stalled standing = iota
	// aged: making progress, but holding its slot past the lifetime, so that pipelined
	// requests and new HTTP/2 streams do not chain a slot without end while others wait.
	aged
	// young: within its grace for a complete request.
	young
	// serving: making progress within its lifetime.
	serving
)

func (l *limitListener) standingLocked(c *limitedConn, now time.Time) standing {
	switch {
	case c.idle, !c.waiting.IsZero() && now.Sub(c.waiting) >= l.grace, c.slowLocked(now):
		return stalled
	case l.lifetime > 0 && now.Sub(c.since) >= l.lifetime:
		return aged
	case !c.waiting.IsZero():
		return young
	}
	return serving
}

// victimLocked chooses the connection to cut at a cap for a newcomer whose client group
// holds newHeld (in block, when it is not empty). A stalled or an aged connection may go,
// only from a client group holding more than the newcomer's, so that groups at an even share
// cannot cut each other's connections in turn. A newcomer of a group holding nothing may also
// cut a connection still within its grace: slow senders that keep reconnecting keep every
// connection young. At the total cap, a newcomer may also cut a connection making progress
// from a group holding at least two more than its own (after the cut the two differ by at
// most one, so no pair of groups churns): a client finds room unless every group holds within
// one of what its own holds. Among those that qualify, a connection
// within its grace goes last; of the others, one of the network holding the most connections
// goes, then of its block holding the most, then of its client group holding the most;
// within it, the one making the least progress (stalled, aged, serving), the one waiting
// longest first. nil when none qualifies. The caller holds mu.
func (l *limitListener) victimLocked(now time.Time, block string, newHeld int) *limitedConn {
	var v *limitedConn
	var vKey victimKey
	for c := range l.conns {
		if block != "" && c.block != block {
			continue
		}
		k := victimKey{standing: l.standingLocked(c, now), age: c.waiting}
		if k.age.IsZero() {
			k.age = c.since
		}
		k.held = [netblock.Levels]int{1, 1, 1} // a trusted proxy's clients are many, not one group
		if c.group != "" {
			k.held = [netblock.Levels]int{l.byAddr[c.group], l.byBlock[c.block], l.byNet[c.network]}
		}
		client := k.held[netblock.Client]
		switch k.standing {
		case stalled, aged:
			if client <= newHeld {
				continue
			}
		case young:
			if newHeld != 0 {
				continue
			}
		case serving:
			if block != "" || client < newHeld+2 {
				continue
			}
		}
		if v == nil || k.before(vKey) {
			v, vKey = c, k
		}
	}
	return v
}

// victimKey orders the connections that may be cut, the first to go first.
type victimKey struct {
	standing standing
	held     [netblock.Levels]int // what its groups hold, from the client's
	age      time.Time            // since when it has waited, or held its slot
}

// before puts a connection within its grace for a request last: it may be an honest
// newcomer's. Of the others, it orders by what the groups hold first: the crowd pays for room
// before anyone else's connection is looked at, even an idle one (an honest client's
// keep-alive connection between two requests is idle); within a group the connection making
// the least progress goes first.
func (k victimKey) before(o victimKey) bool {
	if (k.standing == young) != (o.standing == young) {
		return o.standing == young
	}
	for lv := netblock.Network; lv >= netblock.Client; lv-- {
		if k.held[lv] != o.held[lv] {
			return k.held[lv] > o.held[lv]
		}
	}
	if k.standing != o.standing {
		return k.standing < o.standing
	}
	return k.age.Before(o.age)
}

// releaseLocked takes c out of the counts, once. The caller holds mu.
func (l *limitListener) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	c.released = true
	delete(l.conns, c)
	l.total--
	if c.group != "" {
		if l.byAddr[c.group]--; l.byAddr[c.group] <= 0 {
			delete(l.byAddr, c.group)
		}
		if l.byBlock[c.block]--; l.byBlock[c.block] <= 0 {
			delete(l.byBlock, c.block)
		}
		if l.byNet[c.network]--; l.byNet[c.network] <= 0 {
			delete(l.byNet, c.network)
		}
	}
}

// connState is the server's ConnState hook: a connection going idle waits from then for its
// next request, and one becoming active (the first bytes of a request) waits from then for
// the rest of it, unless it was already waiting (its first request, counted from accept).
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		lc.idle, lc.waiting = true, now
	case http.StateActive:
		if lc.idle || lc.waiting.IsZero() {
			lc.waiting = now
		}
		lc.idle = false
	case http.StateClosed, http.StateHijacked:
		l.releaseLocked(lc)
	}
}

// markDelivered records that c's request is complete: its headers read and its body read
// to the end (or given up by its handler).
func (l *limitListener) markDelivered(c *limitedConn) {
	l.mu.Lock()
	c.waiting, c.idle = time.Time{}, false
	l.mu.Unlock()
}

type connKey struct{}

// connContext is the server's ConnContext hook: it lets a request find its connection, the
// one beneath TLS when the server speaks it.
func (l *limitListener) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// delivered wraps next so that a request's connection counts as delivering until the
// request's body has been read to its end, or next returns; and so that a 429 answer waits
// l.refusalDelay before it is sent.
func (l *limitListener) delivered(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitedConn)
		if lc == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			l.markDelivered(lc)
		} else {
			r.Body = &bodyWatch{ReadCloser: r.Body, l: l, conn: lc}
		}
		defer l.markDelivered(lc)
		w = l.progress(w, lc)
		if l.refusalDelay <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		sw := &refusalWatch{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.refused {
			l.holdRefusal(r.Context(), lc)
		}
	})
}

// holdRefusal keeps a 429 answer, still in the server's buffer, from being sent for
// l.refusalDelay, or until the connection is gone. Meanwhile the connection counts as one
// that has not delivered a request past its grace, so at the connection cap it is among the
// first cut: a refused client's waiting connections cannot keep out anyone else.
func (l *limitListener) holdRefusal(ctx context.Context, c *limitedConn) {
	l.mu.Lock()
	c.waiting, c.idle = l.now().Add(-l.grace), false
	l.mu.Unlock()
	t := time.NewTimer(l.refusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// refusalWatch notes whether the answer written through it is a 429.
type refusalWatch struct {
	http.ResponseWriter
	refused bool
}

func (w *refusalWatch) WriteHeader(status int) {
	w.refused = status == http.StatusTooManyRequests
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *refusalWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyWatch marks its connection delivered once its body has been read to the end (again
// at each later read that finds the end: marking is idempotent).
type bodyWatch struct {
	io.ReadCloser
	l    *limitListener
	conn *limitedConn
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.l.markDelivered(b.conn)
	}
	return n, err
}

func (l *limitListener) open() (total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

type limitedConn struct {
	net.Conn
	l                     *limitListener
	group, block, network string
	since                 time.Time // when it was let in
	// Guarded by l.mu: waiting is when the connection started waiting for a complete
	// request, or for its next one when idle; zero while its request is complete. writes
	// holds, for each write of an answer under way, when it is due at the floor rate.
	waiting  time.Time
	idle     bool
	released bool
	writes   map[*progressWriter]time.Time
	// cancels counts the streams cancelled before their answers since cancelsSince
	// (cancelbudget.go); cancelCut is set once they passed the budget.
	cancels      int
	cancelsSince time.Time
	cancelCut    bool
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
