package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestConnCapCutsSlowReader: at the cap, a connection whose request is complete but whose
// answer drains below the floor rate is cut for a newcomer; one draining fast is not.
func TestConnCapCutsSlowReader(t *testing.T) {
	l, clk := testListener(2, 10, 16)
	l.sendFloor = 4 << 10
	fast := l.admit(pipeConn(t), "192.0.2.1")
	slow := l.admit(pipeConn(t), "198.51.100.1")
	for _, c := range []*limitedConn{fast, slow} {
		l.markDelivered(c)
	}
	// slow has had a piece of its answer under way for longer than the floor allows.
	pw := &progressWriter{ResponseWriter: httptest.NewRecorder(), l: l, conn: slow}
	pw.rc = http.NewResponseController(pw.ResponseWriter)
	pw.start(writeChunk)
	if c := l.admit(pipeConn(t), "203.0.113.1"); c != nil {
		t.Fatal("a newcomer cut a connection whose answer is within its due time")
	}
	clk.t = clk.t.Add(time.Duration(writeChunk/(4<<10)+1) * time.Second)
	if c := l.admit(pipeConn(t), "203.0.113.2"); c == nil || !isCut(l, slow) || isCut(l, fast) {
		t.Fatal("the slow reader was not the connection cut")
	}
	pw.end()
}

// TestConnCapLifetime: a connection making progress past the lifetime is cut, at the cap,
// for a newcomer of a group holding less; one within it is not, unless the newcomer's group
// holds nothing and the connection's group holds more than one.
func TestConnCapLifetime(t *testing.T) {
	l, clk := testListener(2, 10, 16)
	l.lifetime = time.Minute
	a := l.admit(pipeConn(t), "198.51.100.1")
	b := l.admit(pipeConn(t), "192.0.2.1")
	l.markDelivered(a)
	l.markDelivered(b)
	if c := l.admit(pipeConn(t), "192.0.2.1"); c != nil {
		t.Fatal("a group holding a connection cut one serving within its lifetime")
	}
	if c := l.admit(pipeConn(t), "203.0.113.1"); c != nil {
		t.Fatal("a newcomer cut another client's only connection, serving within its lifetime")
	}
	clk.t = clk.t.Add(2 * time.Minute)
	if c := l.admit(pipeConn(t), "203.0.113.1"); c == nil || isCut(l, a) == isCut(l, b) {
		t.Fatal("past the lifetime, a newcomer was not let in by cutting one aged connection")
	}
}

// TestConnCapHonestNewcomerAlwaysIn: whatever the crowd's connections do, a client holding
// none is let in at the cap while any group holds more than one.
func TestConnCapHonestNewcomerAlwaysIn(t *testing.T) {
	l, _ := testListener(8, 4, 16)
	for _, a := range []string{"198.51.100.1", "198.51.100.2"} {
		for range 4 {
			l.markDelivered(l.admit(pipeConn(t), a))
		}
	}
	for i, a := range []string{"192.0.2.1", "203.0.113.1", "192.0.2.2"} {
		if c := l.admit(pipeConn(t), a); c == nil {
			t.Fatalf("newcomer %d refused with groups holding four serving connections", i)
		}
	}
}

// TestConnCapHierarchy: of stalled connections, the one of the network holding the most goes
// first, even when a group of another network holds more at the client level.
func TestConnCapHierarchy(t *testing.T) {
	l, clk := testListener(6, 10, 16)
	var spread []*limitedConn
	for _, a := range []string{"198.51.1.1", "198.51.2.1", "198.51.3.1", "198.51.4.1"} {
		spread = append(spread, l.admit(pipeConn(t), a))
		clk.t = clk.t.Add(time.Millisecond)
	}
	big1, big2 := l.admit(pipeConn(t), "192.0.2.1"), l.admit(pipeConn(t), "192.0.2.1")
	clk.t = clk.t.Add(5 * time.Second)
	if c := l.admit(pipeConn(t), "203.0.113.1"); c == nil || !isCut(l, spread[0]) || isCut(l, big1) || isCut(l, big2) {
		t.Fatal("the cut did not come from the network holding the most")
	}
}

// TestProgressMovesWriteDeadline: each piece of an answer moves the connection's write
// deadline to the send timeout from its start, so an answer is bounded by its progress and
// not by its size.
func TestProgressMovesWriteDeadline(t *testing.T) {
	l, _ := testListener(10, 10, 16)
	l.sendTimeout, l.now = time.Hour, time.Now
	lc := l.admit(pipeConn(t), "192.0.2.1")
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	w := l.progress(rec, lc)
	w.Write(make([]byte, 3*writeChunk+1))
	if len(rec.deadlines) != 4 {
		t.Fatalf("%d deadlines set for an answer of four pieces; want 4", len(rec.deadlines))
	}
	if d := time.Until(rec.deadlines[3]); d < 59*time.Minute {
		t.Errorf("the last deadline is %v away; want the send timeout", d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(lc.writes) != 0 {
		t.Error("pieces written are still counted under way")
	}
}

type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (r *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	r.deadlines = append(r.deadlines, t)
	return nil
}
