package registry_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
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

// BenchmarkBuildListing100k is GET /nodes over 100,000 nodes held in the node cache, each
// the first after a change: the snapshot taken and the answer encoded as it is written.
func BenchmarkBuildListing100k(b *testing.B) {
	const n = 100_000
	inner := store.NewMemory()
	now := time.Now().UTC().Truncate(time.Second)
	for start := 0; start < n; start += 1000 {
		err := inner.Update(context.Background(), func(tx store.Tx) error {
			for i := start; i < start+1000; i++ {
				var seed [32]byte
				binary.BigEndian.PutUint64(seed[:], uint64(i))
				k := didkey.PublicKey(sha256.Sum256(seed[:]))
				d, _ := didkey.NodeDID(k, didkey.FormShort)
				sig := "5nG1o7rf7Ta39j6dZosAi7PBAmE5uGEYCFAZZ3mr6F3ZJ8huKbWz8d6xVS6EXLbSRVRD8wAwoAC9w5BGDe6Nzr7u"
				if err := tx.PutNode(store.Node{Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.113.%d:7000", i%250), Capabilities: []string{"inference"}, Region: "eu-west", Signature: &sig, SignatureVerified: true, FirstSeen: now, LastSeen: now}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	st, err := store.WithNodeCache(context.Background(), inner)
	if err != nil {
		b.Fatal(err)
	}
	clock := testkit.NewClock(now)
	svc, err := registry.New(registry.Config{Store: st, Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	h := httpapi.New(svc)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clock.Advance(time.Second) // a new second: the cached listing is rebuilt
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/nodes", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		b.SetBytes(int64(w.Body.Len()))
	}
}
