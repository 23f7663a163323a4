package daemon

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// testListener is a limitListener with no network under it, at a fake clock.
func testListener(max, perAddr, factor int) (*limitListener, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	l := newLimitListener(nil, max, perAddr, nil)
	l.blockFactor, l.grace, l.now = factor, time.Second, clk.now
	return l, clk
}

func pipeConn(t *testing.T) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

// isCut reports whether l no longer counts c.
func isCut(l *limitListener, c *limitedConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.conns[c]
	return !ok
}

// TestConnCapCutsSlowestGroupFirst: at the cap, a new connection makes room by cutting a
// connection that has not delivered its request within the grace, from the group holding
// the most, the one waiting longest; a connection whose request is complete is not cut.
func TestConnCapCutsSlowestGroupFirst(t *testing.T) {
	l, clk := testListener(5, 10, 16)
	lone := l.admit(pipeConn(t), "192.0.2.1") // the oldest, alone in its group
	clk.t = clk.t.Add(100 * time.Millisecond)
	var crowd []*limitedConn
	for range 3 {
		crowd = append(crowd, l.admit(pipeConn(t), "198.51.100.1"))
		clk.t = clk.t.Add(100 * time.Millisecond)
	}
	done := l.admit(pipeConn(t), "203.0.113.1")
	l.markDelivered(done)
	clk.t = clk.t.Add(2 * time.Second)
	for i := range 2 {
		if c := l.admit(pipeConn(t), fmt.Sprint("203.0.113.", 10+i)); c == nil {
			t.Fatalf("newcomer %d refused with slow connections to cut", i)
		}
		if !isCut(l, crowd[i]) {
			t.Fatalf("newcomer %d: the crowd's oldest slow connection was not cut", i)
		}
		if isCut(l, lone) || isCut(l, done) {
			t.Fatalf("newcomer %d cut the lone or the delivered connection before the crowd's", i)
		}
	}
	// The crowd now holds as many as the lone group: the one waiting longest goes.
	if c := l.admit(pipeConn(t), "203.0.113.20"); c == nil || !isCut(l, lone) || isCut(l, crowd[2]) || isCut(l, done) {
		t.Fatal("with the groups even, the connection waiting longest was not the one cut")
	}
	if n := l.open(); n != 5 {
		t.Fatalf("%d connections open; want the cap 5", n)
	}
}

// TestConnCapNewGroupCutsWithinGrace: when every connection is within its grace, a group
// that holds some is refused, and a group holding nothing cuts one of the crowd's.
func TestConnCapNewGroupCutsWithinGrace(t *testing.T) {
	l, clk := testListener(3, 10, 16)
	lone := l.admit(pipeConn(t), "192.0.2.1")
	clk.t = clk.t.Add(10 * time.Millisecond)
	a1 := l.admit(pipeConn(t), "198.51.100.1")
	clk.t = clk.t.Add(10 * time.Millisecond)
	a2 := l.admit(pipeConn(t), "198.51.100.1")
	if c := l.admit(pipeConn(t), "192.0.2.1"); c != nil {
		t.Fatal("a group holding a connection cut one within its grace")
	}
	if c := l.admit(pipeConn(t), "203.0.113.9"); c == nil || !isCut(l, a1) || isCut(l, a2) || isCut(l, lone) {
		t.Fatal("a new group did not cut the crowd's oldest connection")
	}
}

// TestConnCapEvenGroupsDoNotChurn: a newcomer whose group already holds as many connections
// as any slow group is refused rather than let cut one; a group holding fewer gets in.
func TestConnCapEvenGroupsDoNotChurn(t *testing.T) {
	l, clk := testListener(4, 10, 16)
	a1, a2 := l.admit(pipeConn(t), "198.51.100.1"), l.admit(pipeConn(t), "198.51.100.1")
	b1, b2 := l.admit(pipeConn(t), "198.51.100.2"), l.admit(pipeConn(t), "198.51.100.2")
	clk.t = clk.t.Add(5 * time.Second)
	if c := l.admit(pipeConn(t), "198.51.100.1"); c != nil {
		t.Fatal("a group at an even share cut a connection to come in")
	}
	for _, c := range []*limitedConn{a1, a2, b1, b2} {
		if isCut(l, c) {
			t.Fatal("a refused newcomer cut a connection")
		}
	}
	if c := l.admit(pipeConn(t), "203.0.113.1"); c == nil {
		t.Fatal("a group holding nothing was refused with slow connections to cut")
	}
}

// TestConnCapCutsIdleWithoutGrace: an idle keep-alive connection may be cut at once.
func TestConnCapCutsIdleWithoutGrace(t *testing.T) {
	l, _ := testListener(2, 10, 16)
	a := l.admit(pipeConn(t), "192.0.2.1")
	b := l.admit(pipeConn(t), "192.0.2.2")
	l.markDelivered(a)
	l.markDelivered(b)
	l.connState(b, http.StateIdle)
	if c := l.admit(pipeConn(t), "192.0.2.3"); c == nil || !isCut(l, b) || isCut(l, a) {
		t.Fatal("the idle connection was not the one cut")
	}
}

// TestConnBlockCap: one /24 holds at most factor addresses' worth of connections; another
// /24 is not affected.
func TestConnBlockCap(t *testing.T) {
	l, _ := testListener(100, 2, 3)
	admitted := 0
	for i := range 10 {
		for range 2 {
			if l.admit(pipeConn(t), fmt.Sprint("198.51.100.", i+1)) != nil {
				admitted++
			}
		}
	}
	if admitted != 6 {
		t.Fatalf("%d connections admitted from one /24; want 2 per address × factor 3 = 6", admitted)
	}
	if l.admit(pipeConn(t), "198.51.101.1") == nil {
		t.Fatal("an address of another /24 was refused")
	}
	if l.admit(pipeConn(t), "2001:db8:1:1::/64") == nil || l.admit(pipeConn(t), "2001:db8:2:1::/64") == nil {
		t.Fatal("IPv6 /64s of fresh /48s were refused")
	}
}

// TestConnBlockCapCutsItsOwn: a block at its cap makes room from its own idle connections,
// never from another block's.
func TestConnBlockCapCutsItsOwn(t *testing.T) {
	l, _ := testListener(100, 2, 2)
	other := l.admit(pipeConn(t), "198.51.101.1")
	l.markDelivered(other)
	l.connState(other, http.StateIdle)
	var mine []*limitedConn
	for _, a := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.2"} {
		c := l.admit(pipeConn(t), a)
		l.markDelivered(c)
		l.connState(c, http.StateIdle)
		mine = append(mine, c)
	}
	if c := l.admit(pipeConn(t), "198.51.100.3"); c == nil {
		t.Fatal("a block at its cap with idle connections refused a newcomer")
	}
	if isCut(l, other) {
		t.Fatal("a block at its cap cut another block's connection")
	}
	cut := 0
	for _, c := range mine {
		if isCut(l, c) {
			cut++
		}
	}
	if cut != 1 {
		t.Fatalf("%d of the block's idle connections cut; want 1", cut)
	}
}

// TestDeliveredAfterBody: a request with a body counts as delivered once its handler has
// read the body to the end, not when its headers arrive.
func TestDeliveredAfterBody(t *testing.T) {
	l, _ := testListener(10, 10, 16)
	lc := l.admit(pipeConn(t), "192.0.2.1")
	waiting := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !lc.waiting.IsZero()
	}
	var beforeRead, afterRead bool
	h := l.delivered(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		beforeRead = waiting()
		io.Copy(io.Discard, r.Body)
		afterRead = waiting()
	}))
	r := httptest.NewRequest("POST", "/v1/auth/device-login", strings.NewReader(`{"a":1}`))
	r = r.WithContext(l.connContext(r.Context(), lc))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if !beforeRead || afterRead {
		t.Fatalf("waiting before the body was read: %v, after: %v; want true, false", beforeRead, afterRead)
	}
}

// refusalServer serves, on a loopback listener capped at max connections, 429 at /refuse
// and 200 elsewhere, holding refusals back for delay; refused reports each refusal written.
func refusalServer(t *testing.T, max int, delay time.Duration) (url string, refused <-chan struct{}) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(tcp, max, max, nil)
	l.refusalDelay = delay
	ch := make(chan struct{}, 16)
	srv := &http.Server{Handler: l.delivered(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusTooManyRequests)
			ch <- struct{}{}
			return
		}
		w.WriteHeader(http.StatusOK)
	})), ConnState: l.connState, ConnContext: l.connContext}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + tcp.Addr().String(), ch
}

// clientFrom is an HTTP client whose connections come from the loopback address from.
func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: time.Minute}
}

// TestRefusalDelay: a 429 answer reaches the client only after the delay; any other answer
// is not held.
func TestRefusalDelay(t *testing.T) {
	const delay = 2 * time.Second
	url, _ := refusalServer(t, 8, delay)
	c := clientFrom("127.0.0.1")
	for _, tc := range []struct {
		path     string
		status   int
		withheld bool
	}{{"/ok", http.StatusOK, false}, {"/refuse", http.StatusTooManyRequests, true}} {
		start := time.Now()
		resp, err := c.Get(url + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != tc.status || (took >= delay) != tc.withheld {
			t.Errorf("GET %s: %d after %v; want %d, held back %v: %v", tc.path, resp.StatusCode, took, tc.status, delay, tc.withheld)
		}
	}
}

// TestRefusalDelayCutFirst: at the connection cap, a connection whose refusal is being held
// back is cut for a newcomer, which is served; the refused client learns at once.
func TestRefusalDelayCutFirst(t *testing.T) {
	url, refused := refusalServer(t, 1, time.Minute)
	done := make(chan error, 1)
	go func() {
		resp, err := clientFrom("127.0.0.1").Get(url + "/refuse")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-refused
	resp, err := clientFrom("127.0.0.2").Get(url + "/ok")
	if err != nil {
		t.Fatalf("newcomer at the cap: %v; want it served", err)
	}
	resp.Body.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the refused client got its answer; want its connection cut")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the refused client still waits after its connection was cut")
	}
}
