package registry_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/svrp/svrp/registry"
)

// TestInitiateKeyBudget: a node key may open DefaultLimits().InitiateKeyLimit sessions per 10 minutes,
// however many it cancels meanwhile; the next is RATE_LIMITED before its signature is
// verified (so a badly signed one is refused the same), and the budget is the key's alone.
func TestInitiateKeyBudget(t *testing.T) {
	h := newHarness(t)
	n, other := newNode(t, "n"), newNode(t, "other")
	for i := range registry.DefaultLimits().InitiateKeyLimit {
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
