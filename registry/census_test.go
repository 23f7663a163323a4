package registry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/budget"

	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
)

func TestCensus(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "census operator", h.now(), "nodes.bind")
	token := op.login(h)
	a, b := newNode(t, "census a"), newNode(t, "census b")
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:1"), "", nil)
	h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:1"), "", nil)
	h.clock.Advance(11 * time.Minute) // a and b go offline
	c := newNode(t, "census c")
	h.ok("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", nil)
	h.drive(a, op, token, "bs-initiated", "INITIATED")
	h.drive(b, op, token, "bs-pending", "PENDING_OPERATOR")
	h.drive(c, op, token, "bs-active", "ACTIVE")
	h.drive(c, op, token, "bs-cancelled", "CANCELLED")

	got, err := h.svc.Census(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := registry.Census{
		Nodes: 3, Online: 1,
		OpenSessions:   map[string]int{"INITIATED": 1, "PENDING_OPERATOR": 1, "PENDING_NODE_ACCEPTANCE": 0},
		BearerSessions: 1, ChallengesUsed: 1, ChallengeCapacity: got.ChallengeCapacity,
	}
	if got.ChallengeCapacity <= 0 || !censusEqual(got, want) {
		t.Errorf("Census = %+v, want %+v", got, want)
	}

	// Expiry applies: past their expiry the open sessions are no longer counted, nor is the
	// bearer session after its hour.
	h.clock.Advance(61 * time.Minute)
	got, err = h.svc.Census(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.OpenSessions["INITIATED"] != 0 || got.OpenSessions["PENDING_OPERATOR"] != 0 || got.BearerSessions != 0 || got.Online != 0 {
		t.Errorf("Census after expiry = %+v, want no open session, no bearer session, nobody online", got)
	}
}

func censusEqual(a, b registry.Census) bool {
	if a.Nodes != b.Nodes || a.Online != b.Online || a.BearerSessions != b.BearerSessions ||
		a.ChallengesUsed != b.ChallengesUsed || a.ChallengeCapacity != b.ChallengeCapacity || len(a.OpenSessions) != len(b.OpenSessions) {
		return false
	}
	for k, v := range b.OpenSessions {
		if a.OpenSessions[k] != v {
			return false
		}
	}
	return true
}

// Each RATE_LIMITED answer names, to the observer, the limit that made it; other answers
// name none.
func TestRefusalsNameTheirLimit(t *testing.T) {
	h := newHarness(t, resolveAddressLimit(1000))
	op := newOperator(t, "limits operator", h.now())
	token := op.login(h)
	var mu sync.Mutex
	var seen []httpapi.Exchange
	srv := httptest.NewServer(httpapi.New(h.svc, httpapi.WithObserver(func(e httpapi.Exchange) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
	})))
	defer srv.Close()
	observed := *h
	observed.srv = srv
	for i := 0; i < 5; i++ {
		observed.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ABCD-EFGH"}, token, http.StatusNotFound, "NOT_FOUND")
	}
	observed.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ABCD-EFGH"}, token, http.StatusTooManyRequests, "RATE_LIMITED")
	observed.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "abcd-efgh"}, token, http.StatusTooManyRequests, "RATE_LIMITED")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 7 {
		t.Fatalf("observed %d exchanges, want 7", len(seen))
	}
	for i, e := range seen {
		want := httpapi.Exchange{Method: "POST", Route: "/v1/bindings/resolve", Status: 404, Code: "NOT_FOUND"}
		if i >= 5 {
			want.Status, want.Code, want.Limit = 429, "RATE_LIMITED", budget.LimitResolvePerCode
		}
		e.Duration = 0
		if e != want {
			t.Errorf("exchange %d = %+v, want %+v", i, e, want)
		}
	}
	if !slices.Contains(budget.Names(), budget.LimitResolvePerCode) {
		t.Error("budget.Names() lacks resolve_per_code")
	}
}
