package registry_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
)

// TestRegisterGraceMode sends registrations whose signature is missing, null, not base58,
// the wrong length or wrong: each is recorded, unsigned, with the string as given.
func TestRegisterGraceMode(t *testing.T) {
	h := newHarness(t)
	quoted := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	tests := []struct {
		name string
		// signature returns the JSON of the signature field (nil leaves it out) and the
		// string the record must keep.
		signature func(n node, req api.RegisterRequest) (json.RawMessage, *string)
	}{
		{"missing", func(node, api.RegisterRequest) (json.RawMessage, *string) { return nil, nil }},
		{"null", func(node, api.RegisterRequest) (json.RawMessage, *string) { return json.RawMessage("null"), nil }},
		{"empty string", func(node, api.RegisterRequest) (json.RawMessage, *string) { return quoted(""), sptr("") }},
		{"not base58", func(node, api.RegisterRequest) (json.RawMessage, *string) {
			return quoted("0OIl-not-base58"), sptr("0OIl-not-base58")
		}},
		{"base58 of 32 bytes", func(node, api.RegisterRequest) (json.RawMessage, *string) {
			s := base58.Encode(make([]byte, 32))
			return quoted(s), &s
		}},
		{"base58 of 65 bytes", func(node, api.RegisterRequest) (json.RawMessage, *string) {
			s := base58.Encode(make([]byte, 65))
			return quoted(s), &s
		}},
		{"over another message", func(n node, req api.RegisterRequest) (json.RawMessage, *string) {
			s := *n.registration(t, "203.0.113.8:7000").Signature
			return quoted(s), &s
		}},
		{"by another key", func(n node, req api.RegisterRequest) (json.RawMessage, *string) {
			s := *signedReg(t, newNode(t, "another"), req)
			return quoted(s), &s
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			h.clock.Advance(time.Second) // so the new record sorts last
			n := newNode(t, "n")
			req := n.registration(t, "203.0.113.7:7000")
			sig, stored := tt.signature(n, req)
			body := toTree(t, req)
			body.del([]string{"signature"})
			if sig != nil {
				body.set([]string{"signature"}, rawMarker)
			}
			var res api.RegisterResult
			h.ok("POST", "/api/v1/register", body.encode(t, string(sig)), "", &res)
			if !res.OK || !res.Registered || res.Signed || !res.IDBound {
				t.Fatalf("result %+v", res)
			}
			if d := cmp.Diff(stored, res.Data.Signature); d != "" {
				t.Errorf("stored signature (-want +got):\n%s", d)
			}
			if res.Data.SignaturePresent != (stored != nil) || res.Data.SignatureVerified {
				t.Errorf("present=%v verified=%v", res.Data.SignaturePresent, res.Data.SignatureVerified)
			}
			list := h.listedNodes()
			if len(list) != i+1 || cmp.Diff(res.Data, list[len(list)-1]) != "" {
				t.Errorf("GET /nodes does not end with the record: %+v", list)
			}
		})
	}
	t.Run("signed", func(t *testing.T) {
		h := h.in(t)
		var res api.RegisterResult
		h.ok("POST", "/api/v1/register", newNode(t, "n").registration(t, "203.0.113.7:7000"), "", &res)
		if !res.Signed || !res.Data.SignaturePresent || !res.Data.SignatureVerified {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("signature not a string", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		for _, v := range []string{"42", "true", `["x"]`, `{"s":"x"}`} {
			h.fails("POST", "/api/v1/register", toTree(t, n.registration(t, "203.0.113.7:7000")).withRaw(t, v, "signature"), "", http.StatusBadRequest, "BAD_REQUEST")
		}
		if got := len(h.listedNodes()); got != len(tests)+1 {
			t.Fatalf("%d records after refused registrations, want %d", got, len(tests)+1)
		}
	})
}

// TestRegisterNoDowngrade: once a key's record verified, an unverified registration for it
// is refused and changes nothing; an unverified record may still be upgraded.
func TestRegisterNoDowngrade(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")

	// Unverified records stay in grace mode: re-registering unsigned is fine.
	unsigned := n.registration(t, "203.0.113.7:7000")
	unsigned.Signature = nil
	h.ok("POST", "/api/v1/register", unsigned, "", nil)
	h.ok("POST", "/api/v1/register", unsigned, "", nil)

	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", &res)
	if !res.Signed {
		t.Fatalf("signed registration: %+v", res)
	}
	before := h.listedNodes()

	h.clock.Advance(time.Minute)
	hijack := n.registration(t, "198.51.100.66:7000")
	for name, sig := range map[string]*string{
		"missing":                     nil,
		"garbage":                     sptr("garbage"),
		"old signature":               res.Data.Signature,
		"tampered":                    sptr(tamperSig(t, *hijack.Signature)),
		"another key":                 signedReg(t, newNode(t, "attacker"), hijack),
		"wrong length":                sptr(base58.Encode(make([]byte, 63))),
		"empty":                       sptr(""),
		"missing, under the full DID": nil,
	} {
		t.Run(name, func(t *testing.T) {
			req := hijack
			req.Signature = sig
			if name == "missing, under the full DID" {
				req.DID = n.fullDID()
			}
			h.in(t).fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		})
	}
	if d := cmp.Diff(before, h.listedNodes()); d != "" {
		t.Fatalf("a refused registration changed the record (-before +after):\n%s", d)
	}
	// The owner can still move its node.
	h.ok("POST", "/api/v1/register", hijack, "", &res)
	if res.Data.Endpoint != "198.51.100.66:7000" || !res.Signed {
		t.Fatalf("owner's re-registration: %+v", res)
	}
}

func TestRegisterStrict(t *testing.T) {
	h := newHarness(t, strictSignatures())
	for name, sig := range map[string]*string{
		"missing":   nil,
		"garbage":   sptr("garbage"),
		"wrong key": signedReg(t, newNode(t, "other"), newNode(t, "n").registration(t, "203.0.113.7:7000")),
	} {
		t.Run(name, func(t *testing.T) {
			req := newNode(t, "n").registration(t, "203.0.113.7:7000")
			req.Signature = sig
			h.in(t).fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		})
	}
	if n := len(h.listedNodes()); n != 0 {
		t.Fatalf("strict mode recorded %d unverified registrations", n)
	}
	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", newNode(t, "n").registration(t, "203.0.113.7:7000"), "", &res)
	if !res.Signed || len(h.listedNodes()) != 1 {
		t.Fatalf("strict mode refused a signed registration: %+v", res)
	}
}

// TestReregistration: a re-registration updates the DID spelling, endpoint, capabilities,
// region, signature and last_seen, and keeps first_seen.
func TestReregistration(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	first := h.now()
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)

	h.clock.Advance(90 * time.Minute)
	again := api.RegisterRequest{
		DID: n.fullDID(), PublicKey: n.key.Base58(), Endpoint: "https://gpu.example.org",
		Capabilities: []string{"storage", "proof"},
	}
	again.Signature = signedReg(t, n, again)
	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", again, "", &res)
	want := api.NodeView{
		DID: n.fullDID(), PublicKey: n.key.Hex(), Endpoint: "https://gpu.example.org",
		Capabilities: []string{"storage", "proof"}, Region: nil, Status: "active",
		LastSeen: stamp(h.now()), FirstSeen: stamp(first), Signature: again.Signature,
		SignaturePresent: true, SignatureVerified: true, Reachability: "public",
	}
	if d := cmp.Diff(want, res.Data); d != "" {
		t.Fatalf("answer (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]api.NodeView{want}, h.listedNodes()); d != "" {
		t.Fatalf("GET /nodes (-want +got):\n%s", d)
	}
	// The record now answers to the full spelling, and still to the short one.
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.fullDID(), h.now()), "", nil)
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now()), "", nil)
}

func vectorNode(t *testing.T, seedHex string) node {
	priv := testkit.SeedKey(seedHex)
	k := pub(priv)
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	return node{priv: priv, key: k, did: d.String()}
}

// TestRegisterDIDVectors registers every node DID of dids.json: each positive spelling is
// accepted, each negative gets its code and records nothing.
func TestRegisterDIDVectors(t *testing.T) {
	v := testkit.DIDs(t)
	h := newHarness(t)
	for _, neg := range didNegatives(t, "POST /api/v1/register", 50) {
		t.Run(neg.ID, func(t *testing.T) {
			req := api.RegisterRequest{DID: neg.DID, PublicKey: neg.PublicKey, Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"}}
			h.in(t).fails("POST", "/api/v1/register", req, "", neg.Expected.HTTP, neg.Expected.Code)
		})
	}
	if got := len(h.listedNodes()); got != 0 {
		t.Fatalf("refused DIDs left %d records", got)
	}

	// Positives: every node spelling of a key names one record. The collision keys are left
	// to TestRegisterCollision, since one of them under a short DID excludes the other.
	seeds := map[string]string{}
	for _, k := range v.Keys {
		seeds[k.Name] = k.SeedHex
	}
	keys := map[string]bool{}
	for _, p := range v.Positive {
		name := strings.Split(p.ID, "/")[0]
		if p.Role != "node" || strings.HasPrefix(name, "collision") {
			continue
		}
		keys[p.PublicKey] = true
		t.Run(p.ID, func(t *testing.T) {
			req := api.RegisterRequest{DID: p.DID, PublicKey: p.PublicKey, Endpoint: "203.0.113.7:7000"}
			if seed, ok := seeds[name]; ok {
				req.Signature = signedReg(t, vectorNode(t, seed), req)
			}
			var res api.RegisterResult
			h.in(t).ok("POST", "/api/v1/register", req, "", &res)
			k, err := didkey.DecodeKey(p.PublicKey)
			if err != nil || res.Data.PublicKey != k.Hex() || res.Data.DID != p.DID || res.Signed != (req.Signature != nil) {
				t.Fatalf("answer %+v", res)
			}
		})
	}
	distinct := map[string]bool{}
	for k := range keys {
		dk, _ := didkey.DecodeKey(k)
		distinct[dk.Hex()] = true
	}
	if got := len(h.listedNodes()); got != len(distinct) {
		t.Fatalf("%d records for %d keys", got, len(distinct))
	}
}

// TestRegisterCollision uses the two keys of dids.json that share the short body 60121c8f.
// Once one has a record under any spelling, the other cannot take the short DID, but can
// register under its 10-hex or full DID.
func TestRegisterCollision(t *testing.T) {
	v := testkit.DIDs(t)
	sides := map[string]testkit.CollisionKey{"first": v.Collision.First, "second": v.Collision.Second}
	for _, order := range [][2]string{{"first", "second"}, {"second", "first"}} {
		holderSide, otherSide := sides[order[0]], sides[order[1]]
		holder, other := vectorNode(t, holderSide.SeedHex), vectorNode(t, otherSide.SeedHex)
		if holder.did != holderSide.DIDShort || other.did != otherSide.DIDShort || holder.key.ShortBody() != v.Collision.ShortBody || other.key.ShortBody() != v.Collision.ShortBody {
			t.Fatalf("collision vectors do not share %s", v.Collision.ShortBody)
		}
		spellings := func(n node, s testkit.CollisionKey) map[string]string {
			return map[string]string{"short": s.DIDShort, "fallback": s.DIDFallback, "full": n.fullDID()}
		}
		for _, form := range []string{"short", "fallback", "full"} {
			t.Run(order[0]+" holds "+form, func(t *testing.T) {
				h := newHarness(t)
				reg := func(n node, did string) api.RegisterRequest {
					r := api.RegisterRequest{DID: did, PublicKey: n.key.Base58(), Endpoint: "203.0.113.7:7000"}
					r.Signature = signedReg(t, n, r)
					return r
				}
				h.ok("POST", "/api/v1/register", reg(holder, spellings(holder, holderSide)[form]), "", nil)
				h.clock.Advance(time.Second)
				h.fails("POST", "/api/v1/register", reg(other, otherSide.DIDShort), "", http.StatusConflict, "DID_COLLISION")
				if got := len(h.listedNodes()); got != 1 {
					t.Fatalf("a colliding registration was recorded: %d records", got)
				}
				// Another tag on the same short body is the same short body.
				h.fails("POST", "/api/v1/register", reg(other, "did:svrp:h:"+v.Collision.ShortBody), "", http.StatusConflict, "DID_COLLISION")
				h.ok("POST", "/api/v1/register", reg(other, otherSide.DIDFallback), "", nil)
				h.ok("POST", "/api/v1/register", reg(other, other.fullDID()), "", nil)
				// Still refused once the other key has a record of its own.
				h.fails("POST", "/api/v1/register", reg(other, otherSide.DIDShort), "", http.StatusConflict, "DID_COLLISION")
				list := h.listedNodes()
				if len(list) != 2 || list[1].DID != other.fullDID() {
					t.Fatalf("records: %+v", list)
				}
				// Each key heartbeats under its unambiguous spellings.
				h.ok("POST", "/api/v1/heartbeat", other.heartbeat(t, otherSide.DIDFallback, h.now()), "", nil)
				h.ok("POST", "/api/v1/heartbeat", holder.heartbeat(t, holderSide.DIDFallback, h.now()), "", nil)
				h.ok("POST", "/api/v1/heartbeat", holder.heartbeat(t, holder.fullDID(), h.now()), "", nil)
				// The shared short DID names the key registered under exactly it, and
				// nothing when neither was.
				if form == "short" {
					h.ok("POST", "/api/v1/heartbeat", holder.heartbeat(t, holderSide.DIDShort, h.now()), "", nil)
					h.fails("POST", "/api/v1/heartbeat", other.heartbeat(t, otherSide.DIDShort, h.now()), "", http.StatusUnauthorized, "BAD_SIGNATURE")
				} else {
					h.fails("POST", "/api/v1/heartbeat", holder.heartbeat(t, holderSide.DIDShort, h.now()), "", http.StatusNotFound, "UNKNOWN_DID")
					h.fails("POST", "/api/v1/heartbeat", other.heartbeat(t, otherSide.DIDShort, h.now()), "", http.StatusNotFound, "UNKNOWN_DID")
				}
			})
		}
	}
}

// TestRegisterAddressLimit: a client address may register RegisterAddressLimit new keys
// per hour; re-registrations of known keys do not count.
func TestRegisterAddressLimit(t *testing.T) {
	h := newHarness(t, registerAddressLimit(2))
	a, b, c := newNode(t, "a"), newNode(t, "b"), newNode(t, "c")
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:1"), "", nil)
	h.clock.Advance(10 * time.Minute)
	h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:1"), "", nil)
	h.fails("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	for range 5 {
		h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:2"), "", nil)
		h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:2"), "", nil)
	}
	if got := len(h.listedNodes()); got != 2 {
		t.Fatalf("%d records, want 2", got)
	}
	// The hour counts from the first new key.
	h.clock.Advance(50*time.Minute - time.Second)
	h.fails("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	h.clock.Advance(time.Second)
	h.ok("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", nil)
}

// TestRegisterBadRequest covers shapes and limits beyond the vectors, and the order of the
// checks: DID before field limits before the collision.
func TestRegisterBadRequest(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	valid := n.registration(t, "203.0.113.7:7000")
	without := func(field string) []byte {
		body := toTree(t, valid)
		body.del([]string{field})
		return body.encode(t, "")
	}
	with := func(field, raw string) []byte { return toTree(t, valid).withRaw(t, raw, field) }
	tests := []struct {
		name string
		body any
		code string
	}{
		{"empty body", "", "BAD_REQUEST"},
		{"array", "[]", "BAD_REQUEST"},
		{"not JSON", "{did:", "BAD_REQUEST"},
		{"trailing garbage", string(with("region", `"eu-west"`)) + "x", "BAD_REQUEST"},
		{"no did", without("did"), "BAD_REQUEST"},
		{"no public_key", without("public_key"), "BAD_REQUEST"},
		{"no endpoint", without("endpoint"), "BAD_REQUEST"},
		{"did a number", with("did", "7"), "BAD_REQUEST"},
		{"public_key null", with("public_key", "null"), "BAD_REQUEST"},
		{"region empty", with("region", `""`), "BAD_REQUEST"},
		{"region a number", with("region", "1"), "BAD_REQUEST"},
		{"endpoint with NBSP", with("endpoint", `"203.0.113.7\u00a0:7000"`), "BAD_REQUEST"},
		{"endpoint with NEL", with("endpoint", `"203.0.113.7\u0085:7000"`), "BAD_REQUEST"},
		{"endpoint with ideographic space", with("endpoint", `"203.0.113.7\u3000:7000"`), "BAD_REQUEST"},
		{"endpoint with line separator", with("endpoint", `"203.0.113.7\u2028:7000"`), "BAD_REQUEST"},
		{"endpoint with paragraph separator", with("endpoint", `"203.0.113.7\u2029:7000"`), "BAD_REQUEST"},
		// DID comes first: a bad DID with a bad endpoint is a DID failure.
		{"bad DID and bad endpoint", api.RegisterRequest{DID: "did:web:x", PublicKey: n.key.Hex(), Endpoint: "a b"}, "ID_BINDING_REQUIRED"},
		{"unbound DID and bad endpoint", api.RegisterRequest{DID: newNode(t, "m").did, PublicKey: n.key.Hex(), Endpoint: "a b"}, "ID_BINDING_FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := http.StatusBadRequest
			if tt.code != "BAD_REQUEST" {
				status = http.StatusUnauthorized
			}
			h.in(t).fails("POST", "/api/v1/register", tt.body, "", status, tt.code)
		})
	}
	if got := len(h.listedNodes()); got != 0 {
		t.Fatalf("%d records after refused registrations", got)
	}
	// Field limits come before the collision check.
	v := testkit.DIDs(t)
	holder, other := vectorNode(t, v.Collision.First.SeedHex), vectorNode(t, v.Collision.Second.SeedHex)
	h.ok("POST", "/api/v1/register", api.RegisterRequest{DID: holder.did, PublicKey: holder.key.Hex(), Endpoint: "203.0.113.7:7000"}, "", nil)
	h.fails("POST", "/api/v1/register", api.RegisterRequest{DID: other.did, PublicKey: other.key.Hex(), Endpoint: " "}, "", http.StatusBadRequest, "BAD_REQUEST")
}

// rejectValue is the case's offending value as JSON text, sent as is.
func rejectValue(t *testing.T, c testkit.Reject) string {
	if c.RawValue != "" {
		return c.RawValue
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(c.Fields, &fields); err != nil {
		t.Fatalf("%s: fields: %v", c.ID, err)
	}
	v, ok := fields[c.Field]
	if !ok {
		t.Fatalf("%s: no value for %s", c.ID, c.Field)
	}
	return string(v)
}

// rejectVectors returns the cases of rejects.json for one message.
func rejectVectors(t *testing.T, message int) []testkit.Reject {
	var out []testkit.Reject
	for _, c := range testkit.Rejects(t).Cases {
		if c.Message == message {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("rejects.json has no case for message %d", message)
	}
	return out
}

// didNegatives returns the negative cases of dids.json sent to endpoint; fewer than least
// fails the test.
func didNegatives(t *testing.T, endpoint string, least int) []testkit.DIDCase {
	var out []testkit.DIDCase
	for _, neg := range testkit.DIDs(t).Negative {
		if neg.Endpoint == endpoint {
			out = append(out, neg)
		}
	}
	if len(out) < least {
		t.Fatalf("dids.json has %d cases for %s, want at least %d", len(out), endpoint, least)
	}
	return out
}

// TestRegisterRejects sends every message-3 case of rejects.json, the offending value put in
// an otherwise valid registration: 400, and nothing recorded.
func TestRegisterRejects(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	for _, c := range rejectVectors(t, 3) {
		t.Run(c.ID, func(t *testing.T) {
			body := toTree(t, n.registration(t, "203.0.113.7:7000")).withRaw(t, rejectValue(t, c), c.Field)
			h.in(t).fails("POST", "/api/v1/register", body, "", c.Expected.HTTP, c.Expected.Code)
		})
	}
	if got := len(h.listedNodes()); got != 0 {
		t.Fatalf("%d records after refused registrations", got)
	}
}
