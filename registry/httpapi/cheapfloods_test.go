package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// TestCheapRefusalsMetered: unknown paths, heartbeats of unknown nodes and heartbeats
// outside the window count against their sender's malformed-request budget, so a flood of
// them is refused at the door once the budget is spent; another address is not refused.
func TestCheapRefusalsMetered(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC))
	svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: clock.Now, Limits: limits.Limits{MalformedAddressLimit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(svc)
	send := func(from, method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.RemoteAddr = from + ":40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	now := clock.Now().Unix()
	for i, flood := range [][3]string{
		{"GET", "/no/such/path", ""},
		{"POST", "/api/v1/heartbeat", fmt.Sprintf(`{"did":"did:svrp:n:0123abcd","ts":%d,"signature":"x"}`, now)},
		{"POST", "/heartbeat", `{"did":"did:svrp:n:0123abcd","ts":1,"signature":"x"}`},
	} {
		from := fmt.Sprintf("192.0.%d.7", i+2)
		for j := range 3 {
			if w := send(from, flood[0], flood[1], flood[2]); w.Code == http.StatusTooManyRequests || w.Code < 400 {
				t.Fatalf("%s %s #%d: %d %s; want its refusal", flood[0], flood[1], j, w.Code, w.Body)
			}
		}
		if w := send(from, "GET", "/health", ""); w.Code != http.StatusTooManyRequests {
			t.Fatalf("after 3 of %s %s: %d; want 429 at the door", flood[0], flood[1], w.Code)
		}
		if w := send(fmt.Sprintf("198.51.100.%d", i+1), "GET", "/health", ""); w.Code != http.StatusOK {
			t.Fatalf("another address after %s %s: %d", flood[0], flood[1], w.Code)
		}
	}
}
