package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// raceResult is one answer of a raceBurst of concurrent requests.
type raceResult struct {
	status int
	code   string
	body   []byte
}

// raceRequest is one request of a raceBurst: body is sent as is, auth as the Authorization
// header when not empty.
type raceRequest struct {
	method, path string
	body         []byte
	auth         string
}

// raceBurst sends every request at once: each goroutine builds its request first and then waits
// for one signal, so the requests reach the server together and the store sees them
// concurrently. Transport errors fail the test; answers come back in request order.
func (h *harness) raceBurst(reqs []raceRequest) []raceResult {
	h.t.Helper()
	out := make([]raceResult, len(reqs))
	errs := make([]error, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(reqs)}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	for i, r := range reqs {
		req, err := http.NewRequest(r.method, h.srv.URL+r.path, bytes.NewReader(r.body))
		if err != nil {
			h.t.Fatal(err)
		}
		if r.auth != "" {
			req.Header.Set("Authorization", r.auth)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				errs[i] = err
				return
			}
			var e api.ErrorBody
			_ = json.Unmarshal(b, &e)
			out[i] = raceResult{status: resp.StatusCode, code: e.Code, body: b}
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			h.t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

// raceTally counts answers by "status code" ("200" for successes).
func raceTally(rs []raceResult) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		if r.status == http.StatusOK {
			m["200"]++
		} else {
			m[fmt.Sprintf("%d %s", r.status, r.code)]++
		}
	}
	return m
}

// raceOneWins checks that exactly one answer is a 200 and every other is one of the
// allowed refusals, and returns the winner's index.
func raceOneWins(t *testing.T, what string, rs []raceResult, allowed ...string) int {
	t.Helper()
	got := raceTally(rs)
	ok := map[string]bool{"200": true}
	for _, a := range allowed {
		ok[a] = true
	}
	for k := range got {
		if !ok[k] {
			t.Errorf("%s: unexpected answer %q; all answers %v", what, k, got)
		}
	}
	if got["200"] != 1 {
		t.Fatalf("%s: %d successes, want exactly 1; all answers %v", what, got["200"], got)
	}
	t.Logf("%s: %v", what, got)
	for i, r := range rs {
		if r.status == http.StatusOK {
			return i
		}
	}
	return -1
}

// TestRaceLoginOneChallenge: 64 device-logins with one challenge at once open exactly one
// bearer session; every other attempt is BAD_CHALLENGE.
func TestRaceLoginOneChallenge(t *testing.T) {
	w := newArena(t)
	before := len(hostileSnapshot(t, w.st).OpSessions)
	ch := w.challenge()
	body := mustJSON(t, w.op.loginRequest(t, ch, w.now()))
	reqs := make([]raceRequest, 64)
	for i := range reqs {
		reqs[i] = raceRequest{method: "POST", path: "/v1/auth/device-login", body: body}
	}
	raceOneWins(t, "64 logins, one challenge", w.raceBurst(reqs), "401 BAD_CHALLENGE")
	if got := len(hostileSnapshot(t, w.st).OpSessions); got != before+1 {
		t.Fatalf("%d bearer sessions were opened, want 1", got-before)
	}
}

// TestRaceAcceptOnce: 32 accepts of one session at once activate it once and store exactly
// one binding; the others see ALREADY_ACTIVE (or BAD_STATE while it is being verified).
func TestRaceAcceptOnce(t *testing.T) {
	w := newArena(t)
	p := w.drive(w.n, w.op, w.token, "bs-race", "PENDING_NODE_ACCEPTANCE").pend
	body := mustJSON(t, w.n.acceptance(t, p, true, w.now()))
	reqs := make([]raceRequest, 32)
	for i := range reqs {
		reqs[i] = raceRequest{method: "POST", path: "/v1/node/bindings/bs-race/accept", body: body}
	}
	rs := w.raceBurst(reqs)
	win := raceOneWins(t, "32 accepts, one session", rs, "409 ALREADY_ACTIVE", "409 BAD_STATE")
	var acc api.AcceptResult
	if err := json.Unmarshal(rs[win].body, &acc); err != nil || acc.State != "ACTIVE" {
		t.Fatalf("winning accept: %s", rs[win].body)
	}
	d := hostileSnapshot(t, w.st)
	if len(d.Bindings) != 1 || len(d.ByOperator[w.op.did]) != 1 {
		t.Fatalf("bindings after the race: %+v, operator index %v", d.Bindings, d.ByOperator)
	}
	if b := d.Bindings[w.n.key.Hex()]; b.SessionID != "bs-race" {
		t.Fatalf("binding %+v", b)
	}
	w.wantState("bs-race", "ACTIVE")
}

// TestRaceResolveOnce: 32 resolves of one code at once, by two operators, move the session
// once, to the operator whose resolve succeeded; the others get the one NOT_FOUND answer or,
// past five failures on the code, RATE_LIMITED.
func TestRaceResolveOnce(t *testing.T) {
	w := newArena(t)
	other := newOperator(t, "other", w.now(), "nodes.bind")
	otherToken := other.login(w.harness)
	ini := w.drive(w.n, w.op, w.token, "bs-race", "INITIATED").ini
	body := mustJSON(t, api.ResolveRequest{ShortCode: ini.ShortCode})
	reqs := make([]raceRequest, 32)
	for i := range reqs {
		tok := w.token
		if i%2 == 1 {
			tok = otherToken
		}
		reqs[i] = raceRequest{method: "POST", path: "/v1/bindings/resolve", body: body, auth: "Bearer " + tok}
	}
	rs := w.raceBurst(reqs)
	win := raceOneWins(t, "32 resolves, one code", rs, "404 NOT_FOUND", "429 RATE_LIMITED")
	winner := w.op.did
	if win%2 == 1 {
		winner = other.did
	}
	st := w.readStatus("bs-race")
	if st.State != "PENDING_OPERATOR" || st.OperatorDID == nil || *st.OperatorDID != winner {
		t.Fatalf("after the race: %+v, want PENDING_OPERATOR by %s", st, winner)
	}
}

// TestRaceInitiateOneID: 32 initiates with one binding_session_id at once, from 32
// different nodes, create one session; the rest are SESSION_EXISTS.
func TestRaceInitiateOneID(t *testing.T) {
	w := newArena(t)
	reqs := make([]raceRequest, 32)
	nodes := make([]node, len(reqs))
	for i := range reqs {
		nodes[i] = newNode(t, fmt.Sprintf("node-%d", i))
		reqs[i] = raceRequest{method: "POST", path: "/v1/bindings/initiate", body: mustJSON(t, nodes[i].initiate(t, "bs-race", w.now(), nil, nil))}
	}
	win := raceOneWins(t, "32 initiates, one id", w.raceBurst(reqs), "409 SESSION_EXISTS")
	st := w.readStatus("bs-race")
	if st.NodeDID != nodes[win].did {
		t.Fatalf("session belongs to %s, want the winner %s", st.NodeDID, nodes[win].did)
	}
	if n := len(hostileSnapshot(t, w.st).Sessions); n != 1 {
		t.Fatalf("%d sessions stored, want 1", n)
	}
}

// gateStore holds every armed request at the door of its write transaction until all of
// them are there: each has then done all it does before writing (parsed, looked up, verified)
// against the store as it was before any of them wrote, and they enter their transactions
// together. That is the widest window two requests can race in on every store, including
// those that run one transaction at a time (Badger, memory), where a gate inside the
// transaction could never gather its parties; so a request that decides outside its
// transaction what it must check inside is caught every time rather than by luck.
type gateStore struct {
	store.Store
	mu      sync.Mutex
	parties int
	arrived int
	all     chan struct{}
	missed  error
}

// arm makes the next n write transactions wait for each other.
func (g *gateStore) arm(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parties, g.arrived, g.all, g.missed = n, 0, make(chan struct{}), nil
}

func (g *gateStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	g.wait()
	return g.Store.Update(ctx, fn)
}

// gateLimit only keeps a broken test from hanging: every armed request reaches its write
// transaction without waiting on anything but the gate, so all parties arrive at once.
const gateLimit = 30 * time.Second

func (g *gateStore) wait() {
	g.mu.Lock()
	if g.parties == 0 {
		g.mu.Unlock()
		return
	}
	all := g.all
	if g.arrived++; g.arrived == g.parties {
		close(all)
		g.parties = 0
	}
	g.mu.Unlock()
	select {
	case <-all:
	case <-time.After(gateLimit):
		g.mu.Lock()
		if g.parties != 0 && g.all == all {
			g.missed = fmt.Errorf("only %d of %d armed requests reached their write transaction", g.arrived, g.parties)
			g.parties = 0
			close(all)
		}
		g.mu.Unlock()
	}
}

// gathered fails t unless every armed request met the others at the gate.
func (g *gateStore) gathered(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.missed != nil {
		t.Fatal(g.missed)
	}
	if g.parties != 0 {
		t.Fatalf("%d of %d armed requests reached their write transaction", g.arrived, g.parties)
	}
}

func newGatedArena(t *testing.T) (*arena, *gateStore) {
	t.Helper()
	g := &gateStore{}
	w := newArenaOver(t, func(st store.Store) store.Store { g.Store = st; return g })
	return w, g
}

// TestRaceOpenSessionCap: a node with 15 open sessions initiates two more at the same
// moment; the cap of 16 holds, so one of them is RATE_LIMITED.
func TestRaceOpenSessionCap(t *testing.T) {
	w, g := newGatedArena(t)
	for i := range binding.MaxOpenSessionsPerNode - 1 {
		w.drive(w.n, w.op, w.token, fmt.Sprintf("bs-%02d", i), "INITIATED")
	}
	g.arm(2)
	rs := w.raceBurst([]raceRequest{
		{method: "POST", path: "/v1/bindings/initiate", body: mustJSON(t, w.n.initiate(t, "bs-a", w.now(), nil, nil))},
		{method: "POST", path: "/v1/bindings/initiate", body: mustJSON(t, w.n.initiate(t, "bs-b", w.now(), nil, nil))},
	})
	g.gathered(t)
	raceOneWins(t, "two initiates at the cap", rs, "429 RATE_LIMITED")
	if n := len(hostileSnapshot(t, w.st).Sessions); n != binding.MaxOpenSessionsPerNode {
		t.Fatalf("%d open sessions, want %d", n, binding.MaxOpenSessionsPerNode)
	}
}

// TestRaceShortDIDCollision: two keys whose short DIDs share a body register at the same
// moment; only one may hold the body, the other is DID_COLLISION.
func TestRaceShortDIDCollision(t *testing.T) {
	w, g := newGatedArena(t)
	c := testkit.DIDs(t).Collision
	// From two client addresses, so that the per-address count of new keys, which every
	// new registration also writes, cannot serialize the two by accident.
	g.arm(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, p := range []testkit.CollisionKey{c.First, c.Second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := api.RegisterRequest{DID: p.DIDShort, PublicKey: p.PublicKeyB58, Endpoint: "198.51.100.1:7000"}
			_, errs[i] = w.svc.Register(context.Background(), req, fmt.Sprintf("192.0.2.%d", i+1))
		}()
	}
	wg.Wait()
	g.gathered(t)
	rs := make([]raceResult, len(errs))
	for i, err := range errs {
		rs[i] = raceResult{status: http.StatusOK}
		if err != nil {
			var e interface{ Code() string }
			if !errors.As(err, &e) {
				t.Fatalf("register %d: %v", i, err)
			}
			rs[i] = raceResult{status: http.StatusConflict, code: e.Code()}
		}
	}
	raceOneWins(t, "two short DIDs, one body", rs, "409 DID_COLLISION")
	d := hostileSnapshot(t, w.st)
	for body, holders := range d.BodyIndex {
		if len(holders) > 1 {
			t.Fatalf("short body %s is held by %d keys", body, len(holders))
		}
	}
}

// TestRaceRegisterAddressLimit: with a limit of 4 new keys per address, 32 new nodes
// registering at once from one address get in 4 times.
func TestRaceRegisterAddressLimit(t *testing.T) {
	h := newHarness(t, func(c *registry.Config) { c.Limits.RegisterAddressLimit = 4 })
	reqs := make([]raceRequest, 32)
	for i := range reqs {
		n := newNode(t, fmt.Sprintf("node-%d", i))
		reqs[i] = raceRequest{method: "POST", path: "/api/v1/register", body: mustJSON(t, n.registration(t, "203.0.113.7:7000"))}
	}
	got := raceTally(h.raceBurst(reqs))
	if got["200"] != 4 || got["429 RATE_LIMITED"] != 28 {
		t.Fatalf("answers %v, want 4 successes and 28 RATE_LIMITED", got)
	}
	if n, _ := h.svc.NodeCount(context.Background()); n != 4 {
		t.Fatalf("%d nodes stored, want 4", n)
	}
}

// TestRaceResolveAddressLimit: with a limit of 3 failures per address, 24 failing resolves
// of different codes at once are counted exactly: 3 NOT_FOUND, then RATE_LIMITED.
func TestRaceResolveAddressLimit(t *testing.T) {
	w := newArena(t, resolveAddressLimit(3))
	reqs := make([]raceRequest, 24)
	for i := range reqs {
		code := fmt.Sprintf("ZZZZZZ%c%c", binding.ShortCodeAlphabet[i%31], binding.ShortCodeAlphabet[i/31])
		reqs[i] = raceRequest{method: "POST", path: "/v1/bindings/resolve", body: mustJSON(t, api.ResolveRequest{ShortCode: code}), auth: "Bearer " + w.token}
	}
	got := raceTally(w.raceBurst(reqs))
	if got["404 NOT_FOUND"] != 3 || got["429 RATE_LIMITED"] != 21 {
		t.Fatalf("answers %v, want 3 NOT_FOUND and 21 RATE_LIMITED", got)
	}
}

// TestRaceSupersede: two sessions of one node accepted at the same moment leave one
// binding, listed by exactly one operator.
func TestRaceSupersede(t *testing.T) {
	w := newArena(t)
	other := newOperator(t, "other", w.now(), "nodes.bind")
	otherToken := other.login(w.harness)
	pa := w.drive(w.n, w.op, w.token, "bs-a", "PENDING_NODE_ACCEPTANCE").pend
	ini := w.drive(w.n, w.op, w.token, "bs-b", "INITIATED").ini
	var view api.ResolveView
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, otherToken, &view)
	w.ok("POST", "/v1/bindings/authorize", other.authorize(t, view, w.now(), num(5), num(50)), otherToken, nil)
	var pend api.PendingResult
	w.ok("POST", "/v1/node/bindings/pending", w.n.poll(t, w.now()), "", &pend)
	var pb api.PendingAuthorization
	for _, p := range pend.Pending {
		if p.BindingSessionID == "bs-b" {
			pb = p
		}
	}
	rs := w.raceBurst([]raceRequest{
		{method: "POST", path: "/v1/node/bindings/bs-a/accept", body: mustJSON(t, w.n.acceptance(t, pa, true, w.now()))},
		{method: "POST", path: "/v1/node/bindings/bs-b/accept", body: mustJSON(t, w.n.acceptance(t, pb, true, w.now()))},
	})
	if got := raceTally(rs); got["200"] != 2 {
		t.Fatalf("answers %v, want both accepts to succeed", got)
	}
	d := hostileSnapshot(t, w.st)
	b, ok := d.Bindings[w.n.key.Hex()]
	if !ok || len(d.Bindings) != 1 {
		t.Fatalf("bindings %+v", d.Bindings)
	}
	listed := len(d.ByOperator[w.op.did]) + len(d.ByOperator[other.did])
	if listed != 1 || len(d.ByOperator[b.OperatorDID]) != 1 {
		t.Fatalf("binding by %s, operator index %v", b.OperatorDID, d.ByOperator)
	}
}
