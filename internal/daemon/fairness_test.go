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

// TestFairnessBoundsInFlight: requests in flight are bounded per client group, per block and
// in total (twice the connection cap, then up to three times it for groups with nothing in
// flight); a request that leaves makes room.
func TestFairnessBoundsInFlight(t *testing.T) {
	f := newFairness(2, 3, 3, 1) // a total of 6, 9 at most
	a := fairConn("198.51.100.1")
	if !f.enter(a) || !f.enter(a) || f.enter(a) {
		t.Fatal("the client bound of 2 did not hold")
	}
	b := fairConn("198.51.100.2")
	if !f.enter(b) || f.enter(b) {
		t.Fatal("the block bound of 3 did not hold")
	}
	c := fairConn("192.0.2.1")
	if !f.enter(c) || !f.enter(c) || !f.enter(fairConn("203.0.113.1")) {
		t.Fatal("refused below the total of 6")
	}
	// Past the total, only a group with nothing in flight, up to three times the cap.
	if f.enter(fairConn("203.0.113.1")) {
		t.Fatal("past the total, a group with a request in flight was let in")
	}
	for i := range 3 {
		if !f.enter(fairConn(fmt.Sprint("203.0.", 10+i, ".1"))) {
			t.Fatalf("past the total, newcomer %d with nothing in flight was refused below the hard bound", i)
		}
	}
	if f.enter(fairConn("203.0.99.1")) {
		t.Fatal("a newcomer was let in past the hard bound")
	}
	f.leave(a)
	if !f.enter(fairConn("203.0.99.1")) {
		t.Fatal("a request that left made no room")
	}
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
