package registry_test

import (
	"testing"
	"time"

	"github.com/svrp/svrp/registry/api"
)

// TestListingFreshness: a registration shows in the listings at once; a heartbeat's
// last_seen may lag by the rest of the second in which the listing was built, never more.
func TestListingFreshness(t *testing.T) {
	h := newHarness(t)
	a, b := newNode(t, "a"), newNode(t, "b")
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.7:7000"), "", nil)
	if n := len(h.listedNodes()); n != 1 {
		t.Fatalf("%d nodes listed, want 1", n)
	}
	h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.8:7000"), "", nil)
	var list struct {
		Count int            `json:"count"`
		Nodes []api.NodeView `json:"nodes"`
	}
	h.ok("GET", "/nodes", nil, "", &list)
	if list.Count != 2 {
		t.Fatalf("a registration in the same second is not listed: count %d", list.Count)
	}

	h.clock.Advance(10 * time.Second)
	h.listedNodes()
	h.ok("POST", "/api/v1/heartbeat", a.heartbeat(t, a.did, h.now()), "", nil)
	h.clock.Advance(time.Second)
	for _, n := range h.listedNodes() {
		if n.DID == a.did && n.LastSeen != h.now().Add(-time.Second).Format(time.RFC3339) {
			t.Fatalf("one second after a heartbeat the listing still shows last_seen %s", n.LastSeen)
		}
	}
}
