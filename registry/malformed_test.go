package registry_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// TestMalformedBudget: an address that has sent its budget of malformed requests (400, 413)
// is refused at the door — 429 RATE_LIMITED naming the limit, the connection closed — whatever
// it sends next, until the window ends; other addresses and other answers are not counted.
func TestMalformedBudget(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC))
	svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: clock.Now, Limits: registry.Limits{MalformedAddressLimit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var limits []string
	h := registry.NewHandler(svc, registry.WithObserver(func(e registry.Exchange) { limits = append(limits, e.Limit) }))
	send := func(from, method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.RemoteAddr = from + ":40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const bad, other = "192.0.2.7", "192.0.2.8"

	// Answers that are not malformed do not count: an unknown path, a wrong method, a
	// well-formed heartbeat of an unknown node.
	for range 5 {
		send(bad, "GET", "/no/such/path", "")
		send(bad, "DELETE", "/nodes", "")
		send(bad, "POST", "/api/v1/heartbeat", `{"did":"did:svrp:n:0123abcd","ts":1,"signature":"x"}`)
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
	if got := limits[len(limits)-1]; got != registry.LimitMalformedPerAddress {
		t.Errorf("the refusal names limit %q, want %q", got, registry.LimitMalformedPerAddress)
	}
	if w := send(other, "GET", "/health", ""); w.Code != http.StatusOK {
		t.Fatalf("another address: %d %s", w.Code, w.Body)
	}
	clock.Advance(time.Minute)
	if w := send(bad, "GET", "/health", ""); w.Code != http.StatusOK {
		t.Fatalf("after the window: %d %s", w.Code, w.Body)
	}
}
