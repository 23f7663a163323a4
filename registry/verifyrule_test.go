package registry_test

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/sigverify"
)

// TestRegisterRefusesKeysTheRuleRefuses: a key under which no signature is accepted
// (docs/protocol.md §1.1) is refused at registration, signed or not, and nothing is stored.
func TestRegisterRefusesKeysTheRuleRefuses(t *testing.T) {
	h := newHarness(t)
	for name, keyHex := range map[string]string{
		"the identity":               "0100000000000000000000000000000000000000000000000000000000000000",
		"order 4":                    "0000000000000000000000000000000000000000000000000000000000000000",
		"order 8":                    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"the identity, y = p + 1":    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"the identity, sign bit set": "0100000000000000000000000000000000000000000000000000000000000080",
		"y = 2^255 - 1, above p":     "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	} {
		raw, _ := hex.DecodeString(keyHex)
		key, err := didkey.KeyFromEd25519(raw)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := didkey.NodeDID(key, didkey.FormFull)
		req := api.RegisterRequest{DID: d.String(), PublicKey: keyHex, Endpoint: "203.0.113.7:7000"}
		t.Run(name, func(t *testing.T) {
			h.fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "ID_BINDING_FAILED")
		})
	}
	var list struct {
		Count int `json:"count"`
	}
	h.ok("GET", "/nodes", nil, "", &list)
	if list.Count != 0 {
		t.Fatalf("%d nodes stored after refusals", list.Count)
	}
}

// TestHeartbeatsThroughABatcher sends heartbeats from many nodes at once, a third of them
// forged, to a registry whose signatures a sigverify.Batcher checks: each gets the answer
// it gets checked alone, however the batches formed.
func TestHeartbeatsThroughABatcher(t *testing.T) {
	b := sigverify.NewBatcher()
	t.Cleanup(b.Close)
	h := newHarness(t, func(c *registry.Config) { c.Verifier = b })
	var nodes []node
	for i := range 30 {
		n := newNode(t, fmt.Sprintf("batched-%d", i))
		h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
		nodes = append(nodes, n)
	}
	now := h.now()
	for round := range 3 {
		ts := now.Add(time.Duration(round-2) * time.Second)
		var wg sync.WaitGroup
		statuses := make([]int, len(nodes))
		bodies := make([][]byte, len(nodes))
		for i, n := range nodes {
			beat := n.heartbeat(t, n.did, ts)
			if i%3 == 0 {
				// Signed over the next second's message: a valid signature, on other bytes.
				beat.Signature = n.heartbeat(t, n.did, ts.Add(time.Second)).Signature
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], bodies[i] = h.do("POST", "/api/v1/heartbeat", beat, "")
			}()
		}
		wg.Wait()
		for i, got := range statuses {
			want, code := http.StatusOK, ""
			if i%3 == 0 {
				want, code = http.StatusUnauthorized, "BAD_SIGNATURE"
			}
			if got != want || !strings.Contains(string(bodies[i]), code) {
				t.Errorf("round %d, node %d: %d %s, want %d %s", round, i, got, bodies[i], want, code)
			}
		}
	}
}
