package registry_test

import (
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
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
