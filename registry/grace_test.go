package registry_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
)

// graceHijacks are registrations an attacker can send for a key whose owner registered with
// a verified signature: each would move the node's endpoint, and none carries the owner's
// signature over what it asks for.
func graceHijacks(t *testing.T, owner node, signed api.RegisterRequest) map[string]api.RegisterRequest {
	attacker := newNode(t, "attacker")
	evil := func(did, pk string, sig *string) api.RegisterRequest {
		return api.RegisterRequest{DID: did, PublicKey: pk, Endpoint: "198.51.100.66:6666", Capabilities: []string{"inference"}, Region: "eu-west", Signature: sig}
	}
	s := func(v string) *string { return &v }
	ten, _ := didkey.NodeDID(owner.key, didkey.FormFallback)
	full := owner.fullDID()
	hex, b58 := owner.key.Hex(), owner.key.Base58()
	byAttacker := sign(t, attacker.priv, canonical.Register{DID: owner.did, PublicKey: b58, Endpoint: "198.51.100.66:6666", Capabilities: []string{"inference"}, Region: "eu-west"})
	return map[string]api.RegisterRequest{
		"unsigned":                     evil(owner.did, hex, nil),
		"unsigned-full-did":            evil(full, hex, nil),
		"unsigned-10-hex-did":          evil(ten.String(), b58, nil),
		"unsigned-base58-key":          evil(owner.did, b58, nil),
		"empty-signature":              evil(owner.did, hex, s("")),
		"not-base58":                   evil(owner.did, hex, s("0OIl+/=")),
		"63-bytes":                     evil(owner.did, hex, s(base58.Encode(make([]byte, 63)))),
		"65-bytes":                     evil(owner.did, hex, s(base58.Encode(make([]byte, 65)))),
		"zero-signature":               evil(owner.did, hex, s(base58.Encode(make([]byte, 64)))),
		"signed-by-attacker":           evil(owner.did, hex, &byAttacker),
		"owner-signature-replayed":     evil(owner.did, hex, signed.Signature),
		"owner-signature-full-did":     evil(full, hex, signed.Signature),
		"owner-signature-tampered":     evil(owner.did, hex, s(tamperSignature(t, *signed.Signature))),
		"same-endpoint-other-region":   {DID: owner.did, PublicKey: hex, Endpoint: signed.Endpoint, Capabilities: signed.Capabilities, Region: "us-east", Signature: signed.Signature},
		"same-endpoint-no-region":      {DID: owner.did, PublicKey: hex, Endpoint: signed.Endpoint, Capabilities: signed.Capabilities, Signature: signed.Signature},
		"same-endpoint-more-abilities": {DID: owner.did, PublicKey: hex, Endpoint: signed.Endpoint, Capabilities: []string{"inference", "solver"}, Region: signed.Region, Signature: signed.Signature},
		"control-in-signature":         evil(owner.did, hex, s("abc\ndef")),
		"longest-signature":            evil(owner.did, hex, s(strings.Repeat("z", 256))),
	}
}

// tamperSignature flips one bit of a base58 signature, keeping it well-formed.
func tamperSignature(t *testing.T, sig string) string {
	t.Helper()
	raw, err := base58.Decode(sig)
	if err != nil || len(raw) != 64 {
		t.Fatalf("%q is not a signature", sig)
	}
	raw[7] ^= 0x10
	return base58.Encode(raw)
}

// TestGraceCannotHijack: once a key's registration verified, no registration for that key
// that fails to verify, under any DID spelling or key encoding, changes anything; it is
// BAD_SIGNATURE, and the record still says what its owner signed.
func TestGraceCannotHijack(t *testing.T) {
	h := newHarness(t)
	owner := newNode(t, "owner")
	signed := owner.registration(t, "203.0.113.7:7000")
	var reg api.RegisterResult
	h.ok("POST", "/api/v1/register", signed, "", &reg)
	if !reg.Signed || !reg.Data.SignatureVerified {
		t.Fatalf("owner's registration did not verify: %+v", reg)
	}
	for name, req := range graceHijacks(t, owner, signed) {
		before := hostileSnapshot(t, h.st)
		raw := h.fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		hostileErrorBody(t, name, raw, "BAD_SIGNATURE")
		hostileSameStore(t, "hijack "+name, before, hostileSnapshot(t, h.st))
	}
	views := h.nodeViewsByKey()
	v := views[owner.key.Hex()]
	if v.Endpoint != "203.0.113.7:7000" || v.DID != owner.did || !v.SignatureVerified || len(views) != 1 {
		t.Fatalf("after the attempts the record is %+v", v)
	}
	// The owner can still move its own node, under another spelling too.
	moved := api.RegisterRequest{DID: owner.fullDID(), PublicKey: owner.key.Base58(), Endpoint: "203.0.113.8:7000", Capabilities: []string{"inference"}}
	sig := sign(t, owner.priv, canonical.Register{DID: moved.DID, PublicKey: owner.key.Base58(), Endpoint: moved.Endpoint, Capabilities: moved.Capabilities})
	moved.Signature = &sig
	h.ok("POST", "/api/v1/register", moved, "", nil)
	if got := h.nodeViewsByKey()[owner.key.Hex()].Endpoint; got != "203.0.113.8:7000" {
		t.Fatalf("the owner's own update was not recorded: endpoint %s", got)
	}
}

// TestGraceUnverifiedThenOwner: before any verified registration grace mode records
// unsigned announcements (marked unverified), but the key's owner takes the record over
// with one signed registration, after which unsigned ones are refused.
func TestGraceUnverifiedThenOwner(t *testing.T) {
	h := newHarness(t)
	owner := newNode(t, "owner")
	unsigned := api.RegisterRequest{DID: owner.did, PublicKey: owner.key.Hex(), Endpoint: "198.51.100.66:6666"}
	var reg api.RegisterResult
	h.ok("POST", "/api/v1/register", unsigned, "", &reg)
	if reg.Signed || reg.Data.SignatureVerified || reg.Data.SignaturePresent {
		t.Fatalf("unsigned registration: %+v", reg)
	}
	h.ok("POST", "/api/v1/register", owner.registration(t, "203.0.113.7:7000"), "", &reg)
	if !reg.Signed || reg.Data.Endpoint != "203.0.113.7:7000" {
		t.Fatalf("owner's registration: %+v", reg)
	}
	before := hostileSnapshot(t, h.st)
	h.fails("POST", "/api/v1/register", unsigned, "", http.StatusUnauthorized, "BAD_SIGNATURE")
	hostileSameStore(t, "unsigned after the owner's", before, hostileSnapshot(t, h.st))
}

// TestGraceStrict: with StrictSignatures no registration that fails to verify is recorded,
// new key or known, and each changes nothing.
func TestGraceStrict(t *testing.T) {
	h := newHarness(t, strictSignatures())
	owner := newNode(t, "owner")
	fresh := newNode(t, "fresh")
	s := func(v string) *string { return &v }
	refusedNew := map[string]api.RegisterRequest{
		"unsigned":      {DID: fresh.did, PublicKey: fresh.key.Hex(), Endpoint: "203.0.113.9:7000"},
		"empty":         {DID: fresh.did, PublicKey: fresh.key.Hex(), Endpoint: "203.0.113.9:7000", Signature: s("")},
		"garbage":       {DID: fresh.did, PublicKey: fresh.key.Hex(), Endpoint: "203.0.113.9:7000", Signature: s("0OIl")},
		"other-message": {DID: fresh.did, PublicKey: fresh.key.Hex(), Endpoint: "203.0.113.9:7000", Signature: owner.registration(t, "203.0.113.7:7000").Signature},
		"other-fields":  {DID: fresh.did, PublicKey: fresh.key.Hex(), Endpoint: "203.0.113.10:7000", Signature: fresh.registration(t, "203.0.113.9:7000").Signature},
	}
	for name, req := range refusedNew {
		before := hostileSnapshot(t, h.st)
		h.fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		hostileSameStore(t, "strict "+name, before, hostileSnapshot(t, h.st))
	}
	if n, _ := h.svc.NodeCount(t.Context()); n != 0 {
		t.Fatalf("strict mode recorded %d unverified nodes", n)
	}
	signed := owner.registration(t, "203.0.113.7:7000")
	h.ok("POST", "/api/v1/register", signed, "", nil)
	for name, req := range graceHijacks(t, owner, signed) {
		before := hostileSnapshot(t, h.st)
		h.fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		hostileSameStore(t, "strict "+name, before, hostileSnapshot(t, h.st))
	}
}

// nodeViewsByKey lists GET /nodes by hex key.
func (h *harness) nodeViewsByKey() map[string]api.NodeView {
	h.t.Helper()
	var list struct {
		Nodes []api.NodeView `json:"nodes"`
	}
	h.ok("GET", "/nodes", nil, "", &list)
	out := map[string]api.NodeView{}
	for _, v := range list.Nodes {
		out[v.PublicKey] = v
	}
	return out
}
