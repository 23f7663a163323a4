package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// budgetConn is a connection admitted by l from group, and the client's end of it.
func budgetConn(t *testing.T, l *limitListener, group string) (*limitedConn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	c := l.admit(a, group)
	if c == nil {
		t.Fatalf("connection from %s refused", group)
	}
	return c, b
}

// TestCancelBudgetClosesRapidReset: a connection whose cancelled streams pass the budget
// within the window is closed; one cancelling as many spread over more than the window, or
// a few among many answered, is not; nor is a trusted proxy's.
func TestCancelBudgetClosesRapidReset(t *testing.T) {
	l, clk := testListener(10, 10, 16)
	attacker, attackerEnd := budgetConn(t, l, "192.0.2.1")
	honest, _ := budgetConn(t, l, "198.51.100.1")
	patient, _ := budgetConn(t, l, "203.0.113.1")
	proxy, _ := budgetConn(t, l, "")

	for range cancelBudget {
		l.noteStream(attacker, true)
		l.noteStream(proxy, true)
	}
	for i := range 10 * cancelBudget {
		l.noteStream(honest, i%100 == 0)
	}
	if isCut(l, attacker) {
		t.Fatal("a connection at the budget was closed; want it closed only past it")
	}
	l.noteStream(attacker, true)
	l.noteStream(proxy, true)
	if !isCut(l, attacker) {
		t.Fatal("a connection past the budget of cancelled streams was not closed")
	}
	if _, err := attackerEnd.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the client's end of a closed connection read %v; want EOF", err)
	}
	for range 2 {
		for range cancelBudget {
			l.noteStream(patient, true)
		}
		clk.t = clk.t.Add(cancelWindow)
	}
	for name, c := range map[string]*limitedConn{"a few cancelled among many": honest, "the budget spread over two windows": patient, "a trusted proxy": proxy} {
		if isCut(l, c) {
			t.Fatalf("connection with %s was closed", name)
		}
	}
}

// TestCancelledStreamTakesNoTurn: a request cancelled before its turn leaves at once, without
// a turn and without waiting in a queue, and counts against its connection's budget.
func TestCancelledStreamTakesNoTurn(t *testing.T) {
	l, _ := testListener(10, 10, 16)
	c, _ := budgetConn(t, l, "192.0.2.1")
	f := newFairness(100, 100, 100, 1)
	ran := false
	h := f.serve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), connKey{}, c))
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/health", nil).WithContext(ctx))
	f.mu.Lock()
	running, waiting, all := f.running, len(f.nets), f.all
	f.mu.Unlock()
	l.mu.Lock()
	cancels := c.cancels
	l.mu.Unlock()
	if ran || running != 0 || waiting != 0 || all != 0 || cancels != 1 {
		t.Fatalf("handler ran %v, turns running %d, networks waiting %d, in flight %d, cancels %d; want false, 0, 0, 0, 1", ran, running, waiting, all, cancels)
	}
}
