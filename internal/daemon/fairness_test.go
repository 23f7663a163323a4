package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/netblock"
)

func fairConn(group string) *limitedConn {
	l := newLimitListener(nil, 100, 100, nil)
	return &limitedConn{l: l, group: group, block: netblock.BlockOf(group), network: netblock.Of(group, netblock.Network)}
}

// in is f.enter(c) for a test: whether the request was let in, and its flight.
func in(f *fairness, c *limitedConn) (*flight, bool) {
	fl := f.enter(c, nil)
	return fl, fl != nil
}

// TestFairnessBoundsInFlight: requests in flight are bounded per client group, per block and
// in total (twice the connection cap, then up to three times it for groups with nothing in
// flight); a request that leaves makes room.
func TestFairnessBoundsInFlight(t *testing.T) {
	f := newFairness(2, 3, 3, 1) // a total of 6, 9 at most
	a := fairConn("198.51.100.1")
	first, _ := in(f, a)
	if _, ok := in(f, a); !ok || f.enter(a, nil) != nil {
		t.Fatal("the client bound of 2 did not hold")
	}
	b := fairConn("198.51.100.2")
	if _, ok := in(f, b); !ok || f.enter(b, nil) != nil {
		t.Fatal("the block bound of 3 did not hold")
	}
	c := fairConn("192.0.2.1")
	_, ok1 := in(f, c)
	_, ok2 := in(f, c)
	_, ok3 := in(f, fairConn("203.0.113.1"))
	if !ok1 || !ok2 || !ok3 {
		t.Fatal("refused below the total of 6")
	}
	// Past the total, a group with a request in flight is let in only by evicting: 203.0/16
	// holds 1, and 198.51/16 3, of which 198.51.100.1's first request is the one to go.
	if _, ok := in(f, fairConn("203.0.113.1")); !ok {
		t.Fatal("past the total, a group with a request in flight evicted nothing from a network holding two more")
	}
	f.mu.Lock()
	gone := first.evicted
	f.mu.Unlock()
	if !gone {
		t.Fatal("the request evicted was not the first in flight of the client holding the most")
	}
	if f.enter(fairConn("192.0.2.2"), nil) == nil {
		t.Fatal("past the total, a newcomer with nothing in flight was refused below the hard bound")
	}
	if f.enter(fairConn("198.51.100.2"), nil) != nil {
		t.Fatal("past the total, a group with a request in flight was let in with no group two above its own")
	}
	var last *flight
	for i := range 2 {
		if last = f.enter(fairConn(fmt.Sprint("100.64.", i, ".1")), nil); last == nil {
			t.Fatalf("past the total, newcomer %d with nothing in flight was refused below the hard bound", i)
		}
	}
	// At the hard bound 192.0/16 holds the most, 3, one more than 203.0/16.
	if f.enter(fairConn("203.0.99.1"), nil) != nil {
		t.Fatal("a newcomer was let in past the hard bound with no group two above its own")
	}
	f.leave(last)
	if f.enter(fairConn("203.0.99.1"), nil) == nil {
		t.Fatal("a request that left made no room")
	}
}

// TestFairnessEvictsForNewcomer: at the hard total, filled by strangers spread over many
// blocks each within its bounds, a newcomer of a fresh network makes room by evicting the
// request in flight longest of the network, then block, then client group holding the most;
// the evicted request's context ends. Groups at an even share never evict each other.
func TestFairnessEvictsForNewcomer(t *testing.T) {
	f := newFairness(2, 4, 8, 1) // a total of 16, 24 at most
	type req struct {
		fl    *flight
		ended *error
	}
	enter := func(group string) (req, bool) {
		var cause error
		fl := f.enter(fairConn(group), func(err error) { cause = err })
		return req{fl, &cause}, fl != nil
	}
	// 12 blocks of one IPv6 /32, 2 clients each (one per /64), 1 request each: 24.
	var strangers []req
	for blk := range 12 {
		for cl := range 2 {
			r, ok := enter(fmt.Sprintf("2001:db8:%x:%x::/64", blk, cl))
			if !ok {
				t.Fatalf("stranger %d.%d refused below the hard total", blk, cl)
			}
			strangers = append(strangers, r)
		}
	}
	if _, ok := enter("2001:db8:0:5::/64"); ok {
		t.Fatal("a new client of a stranger's block evicted from a group holding less than two more than its own")
	}
	honest, ok := enter("192.0.2.7")
	if !ok {
		t.Fatal("an honest newcomer of a fresh network was refused at a hard total filled by many blocks")
	}
	var gone *flight
	for _, s := range strangers {
		if *s.ended == errEvicted {
			if gone != nil {
				t.Fatal("more than one request evicted for one newcomer")
			}
			gone = s.fl
		}
	}
	if gone == nil {
		t.Fatal("no stranger's request was evicted, its context ended")
	}
	f.mu.Lock()
	marked := gone.evicted
	f.mu.Unlock()
	if !marked {
		t.Fatal("a request's context ended by eviction, yet it is not marked evicted")
	}
	f.leave(gone) // an evicted request leaving frees nothing more
	f.mu.Lock()
	all := f.all
	f.mu.Unlock()
	if all != 24 {
		t.Fatalf("in flight %d after the swap and the evicted request leaving; want 24", all)
	}
	// The honest network holds 1 now: its own next request is no newcomer past the total and
	// evicts too (the strangers' network holds 23), but one of the strangers cannot take back.
	if _, ok := enter("192.0.2.7"); !ok {
		t.Fatal("past the total, an honest client holding one was refused while a network held 22 more")
	}
	if f.enter(gone.conn, nil) != nil {
		t.Fatal("the evicted stranger evicted in turn from its own crowded network")
	}
	f.leave(honest.fl)
}

// TestFairnessRoundRobin: with every turn taken, a flood queued by one network waits behind
// its own requests: the next turns go to each network with waiters in turn, and within a
// network to each client group in turn.
func TestFairnessRoundRobin(t *testing.T) {
	f := newFairness(100, 100, 100, 1)
	ctx := context.Background()
	if !f.turn(ctx, fairConn("192.0.2.99")) {
		t.Fatal("the first turn was not given")
	}
	order := make(chan string, 16)
	queued := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			f.mu.Lock()
			waiting := 0
			for _, q := range f.nets {
				for _, ws := range q.waiters {
					waiting += len(ws)
				}
			}
			f.mu.Unlock()
			if waiting == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting; want %d", waiting, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait := func(group string) {
		go func() {
			if f.turn(ctx, fairConn(group)) {
				order <- group
			}
		}()
	}
	// Queued in this order: the flood's four first, then two of its other client, then
	// the honest one of another network.
	n := 0
	for _, g := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.1", "198.51.100.1", "198.51.200.1", "198.51.200.1", "203.0.113.7"} {
		wait(g)
		n++
		queued(n)
	}
	var got []string
	for range n {
		f.done()
		got = append(got, <-order)
	}
	want := []string{"198.51.100.1", "203.0.113.7", "198.51.200.1", "198.51.100.1", "198.51.200.1", "198.51.100.1", "198.51.100.1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("turns went %v; want %v", got, want)
		}
	}
}

// TestFairnessGiveUp: a waiter whose client goes away leaves its queue, and the turns go on.
func TestFairnessGiveUp(t *testing.T) {
	f := newFairness(100, 100, 100, 1)
	f.turn(context.Background(), fairConn("192.0.2.1"))
	ctx, cancel := context.WithCancel(context.Background())
	gave := make(chan bool)
	go func() { gave <- f.turn(ctx, fairConn("198.51.100.1")) }()
	cancel()
	if <-gave {
		t.Fatal("a waiter whose context ended got a turn")
	}
	f.done()
	if !f.turn(context.Background(), fairConn("203.0.113.1")) {
		t.Fatal("no turn after the waiter gave up")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running != 1 || len(f.nets) != 0 {
		t.Fatalf("running %d, networks waiting %d; want 1 and 0", f.running, len(f.nets))
	}
}

// TestFairnessRefusal: a request over a bound in flight is answered 429 RATE_LIMITED
// before its handler runs.
func TestFairnessRefusal(t *testing.T) {
	f := newFairness(1, 1, 10, 1)
	lc := fairConn("192.0.2.1")
	release := make(chan struct{})
	started := make(chan struct{})
	h := f.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}))
	req := func() *http.Request {
		r := httptest.NewRequest("GET", "/health", nil)
		return r.WithContext(context.WithValue(r.Context(), connKey{}, lc))
	}
	go h.ServeHTTP(httptest.NewRecorder(), req())
	<-started
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req())
	close(release)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "RATE_LIMITED") {
		t.Fatalf("over the bound: %d %q; want 429 RATE_LIMITED with Retry-After", w.Code, w.Body)
	}
}

// TestFairnessTurnHold: a handler that waits without answering (on the store, on a
// listing's turn) gives up its turn after turnHold, so that it holds no one up.
func TestFairnessTurnHold(t *testing.T) {
	f := newFairness(10, 10, 10, 1)
	release := make(chan struct{})
	ran := make(chan string, 2)
	h := f.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran <- r.URL.Path
		if r.URL.Path == "/wait" {
			<-release
		}
	}))
	req := func(path, from string) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		return r.WithContext(context.WithValue(r.Context(), connKey{}, fairConn(from)))
	}
	go h.ServeHTTP(httptest.NewRecorder(), req("/wait", "198.51.100.1"))
	if got := <-ran; got != "/wait" {
		t.Fatalf("ran %s first", got)
	}
	go h.ServeHTTP(httptest.NewRecorder(), req("/next", "192.0.2.1"))
	select {
	case got := <-ran:
		if got != "/next" {
			t.Fatalf("ran %s; want /next", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a handler waiting without answering held its turn")
	}
	close(release)
}

// TestFairnessEvictionResetsRunning: a request evicted while its handler runs ends: its
// context ends by eviction and its HTTP/1.1 connection is closed, while the newcomer's
// handler runs.
func TestFairnessEvictionResetsRunning(t *testing.T) {
	l, _ := testListener(10, 10, 16)
	f := newFairness(4, 8, 1, 4) // a total of 2, 3 at most
	started := make(chan string, 4)
	ended := make(chan error, 4)
	h := f.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.URL.Path
		if r.URL.Path == "/newcomer" {
			return
		}
		<-r.Context().Done()
		ended <- context.Cause(r.Context())
	}))
	send := func(path string, c *limitedConn) {
		r := httptest.NewRequest("GET", path, nil)
		go h.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithValue(r.Context(), connKey{}, c)))
		if got := <-started; got != path {
			t.Fatalf("%s started; want %s", got, path)
		}
	}
	first, firstEnd := budgetConn(t, l, "198.51.100.1")
	second, _ := budgetConn(t, l, "198.51.100.1")
	other, _ := budgetConn(t, l, "198.51.100.2")
	send("/first", first)
	send("/second", second)
	send("/other", other)
	newcomer, _ := budgetConn(t, l, "192.0.2.1")
	send("/newcomer", newcomer)
	if err := <-ended; err != errEvicted {
		t.Fatalf("the evicted handler's context ended with %v; want eviction", err)
	}
	if _, err := firstEnd.Read(make([]byte, 1)); err == nil {
		t.Fatal("the evicted request's connection is still open")
	}
	if !isCut(l, first) || isCut(l, second) {
		t.Fatal("the connection closed was not the one of the request in flight longest")
	}
}
