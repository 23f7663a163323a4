package registry_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// snapshot is everything the restart test reads back over HTTP.
type snapshot struct {
	nodes    []api.NodeView
	peers    []byte
	statuses map[string]api.Status
	mine     api.OperatorNodes
	theirs   api.OperatorNodes
	pending  api.PendingResult
}

func (h *harness) snapshot(ids []string, token, otherToken string, n node) snapshot {
	h.t.Helper()
	s := snapshot{nodes: h.listedNodes(), statuses: map[string]api.Status{}}
	_, s.peers = h.do("GET", "/peers", nil, "")
	for _, id := range ids {
		s.statuses[id] = h.readStatus(id)
	}
	h.ok("GET", "/v1/operator/me/nodes", nil, token, &s.mine)
	h.ok("GET", "/v1/operator/me/nodes", nil, otherToken, &s.theirs)
	h.ok("POST", "/v1/node/bindings/pending", n.poll(h.t, h.now()), "", &s.pending)
	return s
}

// TestRestart writes through one service and its Badger store, closes both, and reads
// everything back through a new service on the reopened directory.
func TestRestart(t *testing.T) {
	opts := []harnessOption{registerAddressLimit(4), resolveAddressLimit(7)}
	h := newHarness(t, opts...)
	n, m, lan := newNode(t, "n"), newNode(t, "m"), newNode(t, "lan")
	op := newOperator(t, "op", h.now(), "nodes.bind")
	other := newOperator(t, "other", h.now(), "nodes.bind")

	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	h.clock.Advance(time.Second)
	unsigned := m.registration(t, "node.example.org:443")
	unsigned.Signature = sptr("grace")
	h.ok("POST", "/api/v1/register", unsigned, "", nil)
	h.clock.Advance(time.Second)
	h.ok("POST", "/api/v1/register", lan.registration(t, "10.0.0.5:7000"), "", nil)
	h.clock.Advance(time.Minute)
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.fullDID(), h.now()), "", nil)

	token, otherToken := op.login(h), other.login(h)
	states := map[string]string{
		"bs-initiated": "INITIATED", "bs-resolved": "PENDING_OPERATOR", "bs-authorized": "PENDING_NODE_ACCEPTANCE",
		"bs-active": "ACTIVE", "bs-cancelled": "CANCELLED", "bs-refused": "REJECTED_BY_NODE", "bs-declined": "REJECTED_BY_OPERATOR",
	}
	flows := map[string]flow{}
	var ids []string
	for _, id := range []string{"bs-active", "bs-initiated", "bs-resolved", "bs-authorized", "bs-cancelled", "bs-refused", "bs-declined"} {
		flows[id] = h.drive(n, op, token, id, states[id])
		ids = append(ids, id)
	}
	// The other operator's binding of m.
	h.drive(m, other, otherToken, "bs-theirs", "ACTIVE")
	ids = append(ids, "bs-theirs")

	// Counters: five failures on one code, one on another (six for the address), and three
	// of the four new keys this address may register.
	for range 5 {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "XXXXXXXX"}, token, http.StatusNotFound, "NOT_FOUND")
	}
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "YYYYYYYY"}, token, http.StatusNotFound, "NOT_FOUND")

	before := h.snapshot(ids, token, otherToken, n)
	if before.mine.Count != 1 || before.theirs.Count != 1 || len(before.pending.Pending) != 1 || len(before.nodes) != 3 {
		t.Fatalf("before the restart: %+v", before)
	}

	h = h.restart(opts...)

	after := h.snapshot(ids, token, otherToken, n)
	if d := cmp.Diff(before, after, cmp.AllowUnexported(snapshot{})); d != "" {
		t.Fatalf("read back after a restart (-before +after):\n%s", d)
	}
	for id, st := range after.statuses {
		if id != "bs-theirs" && st.State != states[id] {
			t.Errorf("%s: %s, want %s", id, st.State, states[id])
		}
	}

	// The counters survived.
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "XXXXXXXX"}, token, http.StatusTooManyRequests, "RATE_LIMITED")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ZZZZZZZZ"}, token, http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "WWWWWWWW"}, token, http.StatusTooManyRequests, "RATE_LIMITED")
	h.ok("POST", "/api/v1/register", newNode(t, "fourth").registration(t, "203.0.113.4:1"), "", nil)
	h.fails("POST", "/api/v1/register", newNode(t, "fifth").registration(t, "203.0.113.5:1"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	// A verified record keeps refusing an unverified re-registration.
	bad := n.registration(t, "198.51.100.1:1")
	bad.Signature = nil
	h.fails("POST", "/api/v1/register", bad, "", http.StatusUnauthorized, "BAD_SIGNATURE")

	// Sessions go on where they stopped: the stored chain verifies after the restart.
	h.ok("POST", "/v1/node/bindings/bs-authorized/accept", n.acceptance(t, flows["bs-authorized"].pend, true, h.now()), "", nil)
	h.ok("POST", "/v1/bindings/authorize", op.authorize(t, flows["bs-resolved"].view, h.now(), num(5), num(50)), token, nil)
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-cancelled", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	var mine api.OperatorNodes
	h.ok("GET", "/v1/operator/me/nodes", nil, token, &mine)
	if mine.Count != 1 || mine.Nodes[0].Authorization.RevocationID != "authz-bs-authorized" {
		t.Fatalf("after accepting post-restart: %+v", mine)
	}
	// Bearer sessions still end an hour after they were issued.
	h.clock.Advance(time.Hour)
	h.fails("GET", "/v1/operator/me/nodes", nil, token, http.StatusUnauthorized, "SESSION_EXPIRED")
}

// setState rewrites a session's state directly in the store, as a process stopped in the
// middle of an accept would have left it.
func (h *harness) setState(id string, st binding.State) {
	h.t.Helper()
	err := h.st.Update(context.Background(), func(tx store.Tx) error {
		s, err := tx.BindingSession(id)
		if err != nil {
			return err
		}
		s.State = st
		return tx.PutBindingSession(s)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// TestRepairAtStart: a session found VERIFYING at start-up goes back to
// PENDING_NODE_ACCEPTANCE (or EXPIRED once past its expires_at), and the node can then
// accept it.
func TestRepairAtStart(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	op := newOperator(t, "op", h.now(), "nodes.bind")
	token := op.login(h)

	early := h.drive(n, op, token, "bs-early", "PENDING_NODE_ACCEPTANCE")
	h.clock.Advance(5 * time.Minute)
	late := h.drive(n, op, token, "bs-late", "PENDING_NODE_ACCEPTANCE")
	h.setState(early.id, binding.Verifying)
	h.setState(late.id, binding.Verifying)
	h.wantState(late.id, "VERIFYING")
	// While VERIFYING the session is neither offered nor acceptable.
	var pend api.PendingResult
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	if len(pend.Pending) != 0 {
		t.Fatalf("VERIFYING sessions offered to the node: %+v", pend)
	}
	h.fails("POST", "/v1/node/bindings/bs-late/accept", n.acceptance(t, late.pend, true, h.now()), "", http.StatusConflict, "BAD_STATE")

	h.clock.Advance(5 * time.Minute) // bs-early reaches its expires_at
	h = h.restart()
	repaired, err := h.svc.RepairAtStart(context.Background())
	if err != nil || repaired != 2 {
		t.Fatalf("RepairAtStart = %d, %v; want 2", repaired, err)
	}
	var states []string
	err = h.st.View(context.Background(), func(tx store.Tx) error {
		for _, id := range []string{early.id, late.id} {
			s, err := tx.BindingSession(id)
			if err != nil {
				return err
			}
			states = append(states, s.State.String())
		}
		return nil
	})
	if err != nil || !cmp.Equal(states, []string{"EXPIRED", "PENDING_NODE_ACCEPTANCE"}) {
		t.Fatalf("stored states %v, %v", states, err)
	}
	h.wantState(late.id, "PENDING_NODE_ACCEPTANCE")
	if again, err := h.svc.RepairAtStart(context.Background()); err != nil || again != 0 {
		t.Fatalf("second RepairAtStart = %d, %v", again, err)
	}

	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	if len(pend.Pending) != 1 || pend.Pending[0].BindingSessionID != late.id {
		t.Fatalf("pending after repair: %+v", pend)
	}
	var res api.AcceptResult
	h.ok("POST", "/v1/node/bindings/bs-late/accept", n.acceptance(t, late.pend, true, h.now()), "", &res)
	if res.State != "ACTIVE" {
		t.Fatalf("accept after repair: %+v", res)
	}
	var mine api.OperatorNodes
	h.ok("GET", "/v1/operator/me/nodes", nil, token, &mine)
	if mine.Count != 1 {
		t.Fatalf("operator nodes after repair: %+v", mine)
	}
}

// storeState is what Sweep may change in the store.
type storeState struct {
	states   map[string]binding.State
	bearers  int
	counters map[string]store.Counter
}

func (h *harness) storeState() storeState {
	h.t.Helper()
	s := storeState{states: map[string]binding.State{}, counters: map[string]store.Counter{}}
	err := h.st.View(context.Background(), func(tx store.Tx) error {
		if err := tx.EachBindingSession(func(b binding.BindingSession) error {
			s.states[b.ID] = b.State
			return nil
		}); err != nil {
			return err
		}
		if err := tx.EachBearerSession(func([32]byte, authn.BearerSession) error {
			s.bearers++
			return nil
		}); err != nil {
			return err
		}
		return tx.EachCounter(func(k string, c store.Counter) error {
			s.counters[k] = c
			return nil
		})
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// TestSweep: Sweep stores EXPIRED for sessions past expires_at, and removes bearer
// sessions and counters whose time is over; nothing else changes.
func TestSweep(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	n, m := newNode(t, "n"), newNode(t, "m")
	op := newOperator(t, "op", h.now(), "nodes.bind")
	t0 := h.now()

	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	h.ok("POST", "/api/v1/register", m.registration(t, "203.0.113.8:7000"), "", nil)
	first := op.login(h)
	h.drive(n, op, first, "bs-initiated", "INITIATED")
	h.drive(n, op, first, "bs-pending", "PENDING_NODE_ACCEPTANCE")
	h.drive(n, op, first, "bs-active", "ACTIVE")
	h.drive(n, op, first, "bs-cancelled", "CANCELLED")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "XXXXXXXX"}, first, http.StatusNotFound, "NOT_FOUND")

	h.clock.Advance(5 * time.Minute)
	second := op.login(h)
	h.drive(m, op, second, "bs-young", "INITIATED")

	s := h.storeState()
	// register and initiate-addr, each of the address and of its block, initiate-key of
	// each node, and the five resolve budgets: code, address, block, operator, all; on a
	// shared store also the login budgets of the address and of its block.
	counters := len(s.counters)
	if onPostgres(t) {
		counters -= 2
	}
	if counters != 11 || s.bearers != 2 {
		t.Fatalf("before sweeping: %+v", s)
	}
	if err := h.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(s, h.storeState(), cmp.AllowUnexported(storeState{})); d != "" {
		t.Fatalf("a sweep with nothing due changed the store (-before +after):\n%s", d)
	}

	// At t0+10m the first sessions, the resolve counters and n's initiate counters (600 s)
	// are due; the register counter (one hour), m's initiate counter (made at t0+5m) and
	// both bearer sessions are not.
	h.clock.Advance(5 * time.Minute)
	if err := h.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	s = h.storeState()
	want := map[string]binding.State{
		"bs-initiated": binding.Expired, "bs-pending": binding.Expired, "bs-active": binding.Active,
		"bs-cancelled": binding.Cancelled, "bs-young": binding.Initiated,
	}
	if d := cmp.Diff(want, s.states); d != "" {
		t.Fatalf("session states after the sweep (-want +got):\n%s", d)
	}
	if len(s.counters) != 3 || s.bearers != 2 {
		t.Fatalf("after the first sweep: %+v", s)
	}
	for k, c := range s.counters {
		switch {
		case strings.HasPrefix(k, "register/") && c.Count == 2 && c.Start.Equal(t0):
		case k == "initiate-key/"+m.key.Hex() && c.Count == 1 && c.Start.Equal(t0.Add(5*time.Minute)):
		default:
			t.Fatalf("remaining counter %s %+v is neither a register counter of two keys nor m's initiate counter", k, c)
		}
	}
	h.wantState("bs-initiated", "EXPIRED")
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-initiated", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	// The per-code count is gone with its counter.
	for range 5 {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "XXXXXXXX"}, second, http.StatusNotFound, "NOT_FOUND")
	}

	// At t0+1h the first bearer session, the register counter and the resolve counters
	// of t0+10m are over; the second bearer session still has five minutes.
	h.clock.Advance(50 * time.Minute)
	if err := h.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	s = h.storeState()
	if s.bearers != 1 {
		t.Fatalf("bearer sessions after an hour: %d", s.bearers)
	}
	if len(s.counters) != 0 {
		t.Fatalf("counters after their windows: %+v", s.counters)
	}
	// A swept bearer session is unknown now; the other still works.
	h.fails("GET", "/v1/operator/me/credits", nil, first, http.StatusUnauthorized, "NO_SESSION")
	h.ok("GET", "/v1/operator/me/credits", nil, second, nil)
	if got := len(h.listedNodes()); got != 2 {
		t.Fatalf("sweep removed node records: %d left", got)
	}
	var mine api.OperatorNodes
	h.ok("GET", "/v1/operator/me/nodes", nil, second, &mine)
	if mine.Count != 1 {
		t.Fatalf("sweep removed a binding: %+v", mine)
	}

	// A day after they ended, sessions are deleted and their ids stay reserved; the session
	// that made the active binding stays with it, for a revocation to read.
	h.clock.Advance(binding.MinTerminalRetention)
	if err := h.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if s = h.storeState(); !cmp.Equal(s.states, map[string]binding.State{"bs-active": binding.Active}) {
		t.Fatalf("sessions a day after they ended: %+v", s.states)
	}
	h.fails("GET", "/v1/bindings/bs-cancelled/status", nil, "", http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-cancelled", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	third := op.login(h)
	h.ok("GET", "/v1/operator/me/nodes", nil, third, &mine)
	if mine.Count != 1 {
		t.Fatalf("deleting sessions removed a binding: %+v", mine)
	}
}
