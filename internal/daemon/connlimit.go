package daemon

import (
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/svrp/svrp/registry"
)

// Connection bounds (see registry/limits.go for the registry's own). Every open connection
// holds a file descriptor and a goroutine: without a cap, idle keep-alive connections from a
// few addresses exhaust the process's file limit and the daemon stops accepting anyone.
const (
	// DefaultMaxConnections caps the connections open at once. It is lowered at start-up to
	// what the file limit leaves after fdReserve.
	DefaultMaxConnections = 8192
	// DefaultMaxConnectionsPerAddress caps the connections of one client address (an IPv6
	// /64 counts as one). Browsers open six per host and a busy node a few; 64 leaves room
	// for a NAT in front of a few dozen machines.
	DefaultMaxConnectionsPerAddress = 64
	// fdReserve is the file descriptors kept for the store (Badger's tables and value-log
	// files), logs and the listener, beyond the connections.
	fdReserve = 512
)

// limitListener accepts connections within a total and a per-address cap. When the total
// is reached it makes room by closing an idle keep-alive connection (one between requests),
// so a crowd of idle connections cannot keep an active client out; when none is idle, or
// the address is at its own cap, the new connection is closed at once. Connections from a
// trusted proxy count only against the total, since all its clients share its address.
type limitListener struct {
	net.Listener
	max, perAddr int
	trusted      []netip.Prefix

	mu     sync.Mutex
	total  int
	byAddr map[string]int
	idle   map[*limitedConn]struct{}
}

func newLimitListener(l net.Listener, max, perAddr int, trusted []netip.Prefix) *limitListener {
	return &limitListener{
		Listener: l, max: max, perAddr: perAddr, trusted: trusted,
		byAddr: make(map[string]int), idle: make(map[*limitedConn]struct{}),
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
	return registry.ClientGroup(ip.String())
}

// admit counts c in, or returns nil when it must be refused.
func (l *limitListener) admit(c net.Conn, group string) *limitedConn {
	l.mu.Lock()
	if group != "" && l.byAddr[group] >= l.perAddr {
		l.mu.Unlock()
		return nil
	}
	var evict *limitedConn
	if l.total >= l.max {
		for ic := range l.idle {
			evict = ic
			break
		}
		if evict == nil {
			l.mu.Unlock()
			return nil
		}
		l.releaseLocked(evict)
	}
	l.total++
	if group != "" {
		l.byAddr[group]++
	}
	lc := &limitedConn{Conn: c, l: l, group: group}
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close()
	}
	return lc
}

// releaseLocked takes c out of the counts, once. The caller holds mu.
func (l *limitListener) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	c.released = true
	delete(l.idle, c)
	l.total--
	if c.group != "" {
		if l.byAddr[c.group]--; l.byAddr[c.group] <= 0 {
			delete(l.byAddr, c.group)
		}
	}
}

// connState is the server's ConnState hook: it tracks which connections are idle.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		if !lc.released {
			l.idle[lc] = struct{}{}
		}
	case http.StateActive:
		delete(l.idle, lc)
	case http.StateClosed, http.StateHijacked:
		l.releaseLocked(lc)
	}
}

func (l *limitListener) open() (total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

type limitedConn struct {
	net.Conn
	l        *limitListener
	group    string
	released bool // guarded by l.mu
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
