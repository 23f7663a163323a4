package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// budgetService is a registry on a memory store under a fake clock, with cfg's bounds.
func budgetService(t *testing.T, cfg registry.Config) (*registry.Service, *testkit.Clock) {
	t.Helper()
	c := testkit.NewClock(epoch)
	cfg.Store, cfg.Clock = store.NewMemory(), c.Now
	svc, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc, c
}

// loginAt logs op in from addr with a fresh challenge and returns the error.
func loginAt(t *testing.T, svc *registry.Service, c *testkit.Clock, op operator, addr string) error {
	t.Helper()
	ch, err := svc.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Login(context.Background(), op.loginRequest(t, ch.Challenge, c.Now()), addr)
	return err
}

// failLoginAt sends a login naming cred's operator whose signature is wrong, from addr.
func failLoginAt(t *testing.T, svc *registry.Service, c *testkit.Clock, op operator, addr string) error {
	t.Helper()
	ch, err := svc.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	l := op.loginRequest(t, ch.Challenge, c.Now())
	l.Signature = tamperSig(t, l.Signature)
	_, err = svc.Login(context.Background(), l, addr)
	return err
}

// TestLoginFailuresNamingAVictimRefuseOnlyTheirSenders: strangers failing 60 logins that
// name a victim's DID from three addresses, and the victim failing once on a spent
// challenge, leave the victim's next correct login from its own address accepted; the
// strangers' addresses are the ones refused for that DID.
func TestLoginFailuresNamingAVictimRefuseOnlyTheirSenders(t *testing.T) {
	svc, c := budgetService(t, registry.Config{})
	victim := newOperator(t, "victim", c.Now(), "nodes.bind")
	strangers := []string{"198.51.100.1", "198.51.100.2", "203.0.113.7"}
	refused := 0
	for i := range 60 {
		err := failLoginAt(t, svc, c, victim, strangers[i%len(strangers)])
		if budget.LimitOf(err) == budget.LimitLoginFailuresPerOperator {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("60 failures naming one DID from 3 addresses were never refused")
	}
	// The victim spends a challenge once: a failure of its own.
	ch, err := svc.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Login(context.Background(), victim.loginRequest(t, ch.Challenge, c.Now()), "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Login(context.Background(), victim.loginRequest(t, ch.Challenge, c.Now()), "192.0.2.10"); proto.CodeOf(err) != proto.BadChallenge {
		t.Fatalf("spent challenge: %v", err)
	}
	if err := loginAt(t, svc, c, victim, "192.0.2.10"); err != nil {
		t.Fatalf("the victim's correct login from its own address: %v", err)
	}
	// The budget the strangers spent refuses them, even with the victim's own signature.
	if err := loginAt(t, svc, c, victim, strangers[0]); budget.LimitOf(err) != budget.LimitLoginFailuresPerOperator {
		t.Fatalf("a stranger that spent the DID's budget from its address: %v", err)
	}
}

// TestLoginFailureTablesFullOfStrangers: failures from more addresses than the tables track,
// each naming a made-up operator, leave an honest operator's login from an untracked
// address accepted, and the tables at their bound.
func TestLoginFailureTablesFullOfStrangers(t *testing.T) {
	testkit.Heavy(t)
	const tracked = 64
	svc, c := budgetService(t, registry.Config{Limits: limits.Limits{MaxTrackedClients: tracked}})
	honest := newOperator(t, "honest", c.Now(), "nodes.bind")
	for a := range 4 * tracked {
		addr := fmt.Sprintf("10.%d.%d.1", a/256, a%256)
		// Each address names three made-up operators, four times each.
		var strangers [3]operator
		for i := range strangers {
			strangers[i] = newOperator(t, fmt.Sprintf("stranger-%d-%d", a, i), c.Now())
		}
		for d := range 12 {
			if err := failLoginAt(t, svc, c, strangers[d%3], addr); err == nil {
				t.Fatal("a failed login was accepted")
			}
		}
	}
	if err := loginAt(t, svc, c, honest, "192.0.2.44"); err != nil {
		t.Fatalf("an honest login with the tables full of strangers: %v", err)
	}
	if err := failLoginAt(t, svc, c, honest, "192.0.2.45"); proto.CodeOf(err) == proto.RateLimited {
		t.Fatalf("an untracked address was charged with strangers' failures: %v", err)
	}
}

// TestAddressBlockBudgets: the addresses of one IPv4 /24, or the /64s of one IPv6 /48, share
// the block's budget of AddressBlockFactor addresses' worth; another block is untouched.
func TestAddressBlockBudgets(t *testing.T) {
	for _, c := range []struct {
		name     string
		addr     func(i int) string
		neighbor string
	}{
		{"IPv4 /24", func(i int) string { return fmt.Sprintf("198.51.100.%d", i) }, "198.51.101.1"},
		{"IPv6 /48", func(i int) string { return fmt.Sprintf("2001:db8:5:%x::/64", i) }, "2001:db8:6::/64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc, _ := budgetService(t, registry.Config{Limits: limits.Limits{RegisterAddressLimit: 2, AddressBlockFactor: 4}})
			register := func(i int, addr string) error {
				n := newNode(t, fmt.Sprintf("%s-%d", c.name, i))
				_, err := svc.Register(context.Background(), n.registration(t, "203.0.113.1:7000"), addr)
				return err
			}
			// 4 addresses' worth of the block's budget: 8 keys, from 8 addresses.
			for i := range 8 {
				if err := register(i, c.addr(i)); err != nil {
					t.Fatalf("key %d: %v", i, err)
				}
			}
			if err := register(8, c.addr(8)); budget.LimitOf(err) != budget.LimitRegisterPerBlock {
				t.Fatalf("a fresh address of a spent block: %v", err)
			}
			if err := register(9, c.neighbor); err != nil {
				t.Fatalf("an address of another block: %v", err)
			}
		})
	}
}

// TestInitiateKeyBudget: a node key may open DefaultLimits().InitiateKeyLimit sessions per 10 minutes,
// however many it cancels meanwhile; the next is RATE_LIMITED before its signature is
// verified (so a badly signed one is refused the same), and the budget is the key's alone.
func TestInitiateKeyBudget(t *testing.T) {
	h := newHarness(t)
	n, other := newNode(t, "n"), newNode(t, "other")
	for i := range limits.DefaultLimits().InitiateKeyLimit {
		id := fmt.Sprintf("bs-%03d", i)
		h.ok("POST", "/v1/bindings/initiate", n.initiate(t, id, h.now(), nil, nil), "", nil)
		h.ok("POST", "/v1/bindings/"+id+"/cancel", n.cancelRequest(t, id, n.did, h.now()), "", nil)
	}
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-over", h.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")
	badly := n.initiate(t, "bs-badly", h.now(), nil, nil)
	badly.NodeSignature = tamperSig(t, badly.NodeSignature)
	h.fails("POST", "/v1/bindings/initiate", badly, "", http.StatusTooManyRequests, "RATE_LIMITED")
	h.ok("POST", "/v1/bindings/initiate", other.initiate(t, "bs-other", h.now(), nil, nil), "", nil)

	h.clock.Advance(10 * time.Minute)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-later", h.now(), nil, nil), "", nil)
}

// TestMalformedBudget: an address that has sent its budget of malformed requests (400, 413)
// is refused at the door — 429 RATE_LIMITED naming the limit, the connection closed — whatever
// it sends next, until the window ends; other addresses and other answers are not counted.
func TestMalformedBudget(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC))
	svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: clock.Now, Limits: limits.Limits{MalformedAddressLimit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var limits []string
	h := httpapi.New(svc, httpapi.WithObserver(func(e httpapi.Exchange) { limits = append(limits, e.Limit) }))
	send := func(from, method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.RemoteAddr = from + ":40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const bad, other = "192.0.2.7", "192.0.2.8"

	// Answers that are not malformed do not count: a wrong method on a known path
	// (registry/httpapi/cheapfloods_test.go has the refusals that do).
	for range 5 {
		send(bad, "DELETE", "/nodes", "")
	}
	for i := range 3 {
		if w := send(bad, "POST", "/api/v1/register", "{"); w.Code != http.StatusBadRequest {
			t.Fatalf("malformed request %d: %d %s, want 400", i, w.Code, w.Body)
		}
	}
	for _, req := range [][3]string{
		{"POST", "/api/v1/register", "{"},
		{"GET", "/health", ""},
	} {
		w := send(bad, req[0], req[1], req[2])
		if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "RATE_LIMITED") || w.Header().Get("Connection") != "close" {
			t.Fatalf("%s %s after the budget: %d %q Connection=%q, want 429 RATE_LIMITED and close", req[0], req[1], w.Code, w.Body, w.Header().Get("Connection"))
		}
	}
	if got := limits[len(limits)-1]; got != budget.LimitMalformedPerAddress {
		t.Errorf("the refusal names limit %q, want %q", got, budget.LimitMalformedPerAddress)
	}
	if w := send(other, "GET", "/health", ""); w.Code != http.StatusOK {
		t.Fatalf("another address: %d %s", w.Code, w.Body)
	}
	clock.Advance(time.Minute)
	if w := send(bad, "GET", "/health", ""); w.Code != http.StatusOK {
		t.Fatalf("after the window: %d %s", w.Code, w.Body)
	}
}

// TestHeartbeatReplayBudget: a heartbeat the mark answers without a verification (a repeat of
// the accepted one, or an older ts) counts against its sender's address and block when it
// comes from another address than the accepted heartbeat's. Within the budget a repeat is 200
// with last_seen unchanged; beyond it the address, or a fresh address of its spent block, is
// refused such heartbeats with the limit's name, and no one else is. The node's own retries
// never count, and a heartbeat with a new ts from a refused address is verified and accepted.
func TestHeartbeatReplayBudget(t *testing.T) {
	svc, c := budgetService(t, registry.Config{Limits: limits.Limits{HeartbeatReplayAddressLimit: 3, AddressBlockFactor: 2}})
	var limits []string
	h := httpapi.New(svc, httpapi.WithObserver(func(e httpapi.Exchange) { limits = append(limits, e.Limit) }))
	type answer struct {
		code     int
		errCode  string
		limit    string
		lastSeen string
	}
	send := func(from, path string, body any) answer {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", path, bytes.NewReader(b))
		r.RemoteAddr = from + ":40000"
		w := httptest.NewRecorder()
		limits = limits[:0]
		h.ServeHTTP(w, r)
		var res struct {
			Code     string `json:"code"`
			LastSeen string `json:"last_seen"`
		}
		json.Unmarshal(w.Body.Bytes(), &res)
		a := answer{code: w.Code, errCode: res.Code, lastSeen: res.LastSeen}
		if len(limits) > 0 {
			a.limit = limits[0]
		}
		return a
	}
	const own = "192.0.2.7"
	n := newNode(t, "replayed")
	if a := send(own, "/api/v1/register", n.registration(t, "203.0.113.7:7000")); a.code != http.StatusOK {
		t.Fatalf("register: %+v", a)
	}
	c.Advance(time.Second)
	captured := n.heartbeat(t, n.did, c.Now())
	first := send(own, "/api/v1/heartbeat", captured)
	if first.code != http.StatusOK {
		t.Fatalf("heartbeat: %+v", first)
	}
	older := n.heartbeat(t, n.did, c.Now().Add(-time.Second))
	c.Advance(time.Second) // an accepted heartbeat would move last_seen now

	ok := answer{code: http.StatusOK, lastSeen: first.lastSeen}
	stale := answer{code: http.StatusUnauthorized, errCode: "STALE_TS"}
	perAddress := answer{code: http.StatusTooManyRequests, errCode: "RATE_LIMITED", limit: budget.LimitHeartbeatReplaysPerAddress}
	perBlock := answer{code: http.StatusTooManyRequests, errCode: "RATE_LIMITED", limit: budget.LimitHeartbeatReplaysPerBlock}
	for i, step := range []struct {
		what string
		from string
		body api.HeartbeatRequest
		want answer
	}{
		{"the node's own retry", own, captured, ok},
		{"the node's own retry", own, captured, ok},
		{"the node's own retry", own, captured, ok},
		{"the node's own retry", own, captured, ok},
		{"the node's own older heartbeat", own, older, stale},
		{"a replay within the budget", "198.51.100.1", captured, ok},
		{"an older one within the budget", "198.51.100.1", older, stale},
		{"a replay within the budget", "198.51.100.1", captured, ok},
		{"a replay past the address's budget", "198.51.100.1", captured, perAddress},
		{"an older one past the address's budget", "198.51.100.1", older, perAddress},
		{"another address of the block", "198.51.100.2", captured, ok},
		{"another address of the block", "198.51.100.2", captured, ok},
		{"another address of the block", "198.51.100.2", captured, ok},
		{"a fresh address of the spent block", "198.51.100.3", captured, perBlock},
		{"an address of another block", "203.0.113.5", captured, ok},
		{"the node's own retry meanwhile", own, captured, ok},
	} {
		if got := send(step.from, "/api/v1/heartbeat", step.body); got != step.want {
			t.Fatalf("step %d, %s from %s: %+v, want %+v", i, step.what, step.from, got, step.want)
		}
	}

	// The budget counts replays only: the node's next heartbeat, from a refused address, is
	// verified and accepted; repeats of it from there are then the node's own.
	next := n.heartbeat(t, n.did, c.Now())
	if a := send("198.51.100.1", "/api/v1/heartbeat", next); a.code != http.StatusOK || a.lastSeen == first.lastSeen {
		t.Fatalf("a new heartbeat from a refused address: %+v, want 200 with a new last_seen", a)
	}
	for range 5 {
		if a := send("198.51.100.1", "/api/v1/heartbeat", next); a.code != http.StatusOK {
			t.Fatalf("the node's own retry from its new address: %+v", a)
		}
	}
	if a := send("198.51.100.3", "/api/v1/heartbeat", next); a != perBlock {
		t.Fatalf("a replay of the new heartbeat from the spent block: %+v", a)
	}

	// The window ends.
	c.Advance(time.Minute)
	if a := send("198.51.100.3", "/api/v1/heartbeat", next); a.code != http.StatusOK {
		t.Fatalf("a replay after the window: %+v", a)
	}
}
