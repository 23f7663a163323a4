package registry_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
)

// resignInitiate signs an initiate request over its current fields.
func (n node) resignInitiate(t *testing.T, r binding.InitiateRequest) binding.InitiateRequest {
	signedMsg := r.BindingSession
	if k, err := didkey.DecodeKey(r.NodePublicKey); err == nil {
		signedMsg.NodePublicKey = k.Base58()
	}
	r.NodeSignature = sign(t, n.priv, signedMsg)
	return r
}

// resignAuthorization signs an authorize request's authorization with op's device key.
func (o operator) resignAuthorization(t *testing.T, r api.AuthorizeRequest) api.AuthorizeRequest {
	r.AuthorizationCredential.Signature = sign(t, o.device, r.AuthorizationCredential.Authorization)
	return r
}

// resignAcceptance signs an acceptance with n's key.
func (n node) resignAcceptance(t *testing.T, r api.AcceptanceRequest) api.AcceptanceRequest {
	r.Acceptance.Signature = sign(t, n.priv, r.Acceptance.Acceptance)
	return r
}

// jsonKeys returns the sorted top-level keys of a JSON object.
func jsonKeys(t *testing.T, raw []byte) []string {
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return sortedKeys(o)
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func TestInitiate(t *testing.T) {
	h := newHarness(t)
	n, other := newNode(t, "n"), newNode(t, "other")

	t.Run("success", func(t *testing.T) {
		h := h.in(t)
		status, raw := h.do("POST", "/v1/bindings/initiate", n.initiate(t, "bs-ok", h.now(), num(10), nil), "")
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, raw)
		}
		if d := cmp.Diff([]string{"binding_session_id", "binding_token", "expires_at", "short_code", "state"}, jsonKeys(t, raw)); d != "" {
			t.Fatalf("fields (-want +got):\n%s", d)
		}
		var res api.InitiateResult
		json.Unmarshal(raw, &res)
		tok, err := base58.Decode(res.BindingToken)
		if res.BindingSessionID != "bs-ok" || res.State != "INITIATED" || res.ExpiresAt != stamp(h.now().Add(10*time.Minute)) || err != nil || len(tok) != 16 {
			t.Fatalf("answer %+v", res)
		}
		if len(res.ShortCode) != 8 || strings.Trim(res.ShortCode, binding.ShortCodeAlphabet) != "" {
			t.Fatalf("short code %q", res.ShortCode)
		}
		st := h.readStatus("bs-ok")
		if st.State != "INITIATED" || st.NodeDID != n.did || st.OperatorDID != nil {
			t.Fatalf("status %+v", st)
		}
		// The code and the token appear in no other answer.
		_, statusRaw := h.do("GET", "/v1/bindings/bs-ok/status", nil, "")
		if bytes.Contains(statusRaw, []byte(res.ShortCode)) || bytes.Contains(statusRaw, []byte(res.BindingToken)) {
			t.Fatalf("status repeats a secret: %s", statusRaw)
		}
	})

	edit := func(f func(r *binding.InitiateRequest)) func(id string, now time.Time) any {
		return func(id string, now time.Time) any {
			r := n.initiate(t, id, now, num(10), nil)
			f(&r)
			return n.resignInitiate(t, r)
		}
	}
	window := func(created, expires time.Duration) func(id string, now time.Time) any {
		return edit(func(r *binding.InitiateRequest) {
			c, _ := canonical.ParseTime(r.CreatedAt)
			r.CreatedAt, r.ExpiresAt = canonical.FormatTime(c.Add(created)), canonical.FormatTime(c.Add(expires))
		})
	}
	unsigned := func(f func(r *binding.InitiateRequest)) func(id string, now time.Time) any {
		return func(id string, now time.Time) any {
			r := n.initiate(t, id, now, num(10), nil)
			f(&r)
			return r
		}
	}
	raw := func(field, value string) func(id string, now time.Time) any {
		return func(id string, now time.Time) any {
			return toTree(t, n.initiate(t, id, now, num(10), nil)).withRaw(t, value, field)
		}
	}
	fallback, _ := didkey.NodeDID(n.key, didkey.FormFallback)

	tests := []struct {
		name   string
		req    func(id string, now time.Time) any
		status int
		code   string
	}{
		{"full DID", edit(func(r *binding.InitiateRequest) { r.NodeDID = n.fullDID() }), 200, ""},
		{"10-hex DID", edit(func(r *binding.InitiateRequest) { r.NodeDID = fallback.String() }), 200, ""},
		{"hex node key", edit(func(r *binding.InitiateRequest) { r.NodePublicKey = n.key.Hex() }), 200, ""},
		{"optional fields absent", edit(func(r *binding.InitiateRequest) {
			r.DeviceSummary, r.OS, r.Region, r.RequestedTaskTypes = "", "", "", nil
			r.RequestedSingleLimit, r.RequestedDailyLimit = nil, nil
		}), 200, ""},
		{"window of 600 s", window(0, 600*time.Second), 200, ""},
		{"window of 1 s", window(0, time.Second), 200, ""},
		{"created 300 s ahead", window(300*time.Second, 900*time.Second), 200, ""},
		{"created in the past and still open", window(-599*time.Second, time.Second), 200, ""},

		{"window of 601 s", window(0, 601*time.Second), 400, "TTL_TOO_LONG"},
		{"window of 0 s", window(0, 0), 400, "TTL_TOO_LONG"},
		{"negative window", window(0, -time.Second), 400, "TTL_TOO_LONG"},
		{"negative window in the past", window(-time.Hour, -time.Hour-time.Minute), 400, "TTL_TOO_LONG"},
		{"window too long and unsigned", func(id string, now time.Time) any {
			r := window(0, time.Hour)(id, now).(binding.InitiateRequest)
			r.NodeSignature = "x"
			return r
		}, 400, "TTL_TOO_LONG"},

		{"expires now", window(-600*time.Second, 0), 400, "ALREADY_EXPIRED"},
		{"expired a minute ago", window(-2*time.Minute, -time.Minute), 400, "ALREADY_EXPIRED"},
		{"expired and badly signed", func(id string, now time.Time) any {
			r := window(-2*time.Minute, -time.Minute)(id, now).(binding.InitiateRequest)
			r.NodeSignature = tamperSig(t, r.NodeSignature)
			return r
		}, 400, "ALREADY_EXPIRED"},

		{"created 301 s ahead", window(301*time.Second, 600*time.Second), 400, "BAD_REQUEST"},
		{"created 301 s ahead and badly signed", func(id string, now time.Time) any {
			r := window(301*time.Second, 600*time.Second)(id, now).(binding.InitiateRequest)
			r.NodeSignature = tamperSig(t, r.NodeSignature)
			return r
		}, 400, "BAD_REQUEST"},

		{"tampered signature", unsigned(func(r *binding.InitiateRequest) { r.NodeSignature = tamperSig(t, r.NodeSignature) }), 401, "BAD_SIGNATURE"},
		{"signed by another key", unsigned(func(r *binding.InitiateRequest) { r.NodeSignature = sign(t, other.priv, r.BindingSession) }), 401, "BAD_SIGNATURE"},
		{"field changed after signing", unsigned(func(r *binding.InitiateRequest) { r.RequestedSingleLimit = num(1000) }), 401, "BAD_SIGNATURE"},
		{"signed over the hex key", unsigned(func(r *binding.InitiateRequest) {
			r.NodePublicKey = n.key.Hex()
			r.NodeSignature = sign(t, n.priv, r.BindingSession)
		}), 401, "BAD_SIGNATURE"},
		{"signature not base58", unsigned(func(r *binding.InitiateRequest) { r.NodeSignature = "0OIl" }), 401, "BAD_SIGNATURE"},
		{"signature empty", unsigned(func(r *binding.InitiateRequest) { r.NodeSignature = "" }), 401, "BAD_SIGNATURE"},

		{"another DID method", edit(func(r *binding.InitiateRequest) { r.NodeDID = "did:web:example.org" }), 401, "ID_BINDING_REQUIRED"},
		{"DID of another key", edit(func(r *binding.InitiateRequest) { r.NodeDID = other.did }), 401, "ID_BINDING_FAILED"},
		{"key of another node", edit(func(r *binding.InitiateRequest) { r.NodePublicKey = other.key.Base58() }), 401, "ID_BINDING_FAILED"},
		{"operator-tagged DID", edit(func(r *binding.InitiateRequest) { r.NodeDID = "did:svrp:o:" + n.key.ShortBody() }), 401, "ID_BINDING_FAILED"},
		{"uppercase DID body", edit(func(r *binding.InitiateRequest) { r.NodeDID = "did:svrp:n:" + strings.ToUpper(n.key.ShortBody()) }), 401, "ID_BINDING_FAILED"},
		{"key of 31 bytes", edit(func(r *binding.InitiateRequest) { r.NodePublicKey = base58.Encode(n.key[:31]) }), 401, "ID_BINDING_FAILED"},
		{"bad DID and window too long", func(id string, now time.Time) any {
			r := window(0, time.Hour)(id, now).(binding.InitiateRequest)
			r.NodeDID = other.did
			return r
		}, 401, "ID_BINDING_FAILED"},

		{"no nonce", raw("nonce", "null"), 400, "BAD_REQUEST"},
		{"no created_at", raw("created_at", "null"), 400, "BAD_REQUEST"},
		{"no node_signature", raw("node_signature", "null"), 400, "BAD_REQUEST"},
		{"node_public_key a number", raw("node_public_key", "5"), 400, "BAD_REQUEST"},
		{"os empty", raw("os", `""`), 400, "BAD_REQUEST"},
		{"task types a string", raw("requested_task_types", `"inference"`), 400, "BAD_REQUEST"},
		{"DID with LF and window too long", func(id string, now time.Time) any {
			r := window(0, time.Hour)(id, now).(binding.InitiateRequest)
			r.NodeDID += "\n"
			return r
		}, 400, "BAD_REQUEST"},
		{"created_at not a timestamp", edit(func(r *binding.InitiateRequest) { r.CreatedAt = "yesterday" }), 400, "BAD_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			id := "bs-" + strings.ReplaceAll(tt.name, " ", "_")
			if tt.code == "" {
				var res api.InitiateResult
				h.ok("POST", "/v1/bindings/initiate", tt.req(id, h.now()), "", &res)
				if res.State != "INITIATED" || h.readStatus(id).State != "INITIATED" {
					t.Fatalf("answer %+v", res)
				}
				// Sessions count against the node's 16 open sessions.
				h.ok("POST", "/v1/bindings/"+id+"/cancel", n.cancelRequest(t, id, n.did, h.now()), "", nil)
				return
			}
			h.fails("POST", "/v1/bindings/initiate", tt.req(id, h.now()), "", tt.status, tt.code)
			h.fails("GET", "/v1/bindings/"+id+"/status", nil, "", http.StatusNotFound, "NOT_FOUND")
		})
	}
}

func TestInitiateRejects(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	for _, c := range rejectVectors(t, 6) {
		t.Run(c.ID, func(t *testing.T) {
			h := h.in(t)
			req := n.initiate(t, "bs-valid", h.now(), num(10), num(100))
			h.fails("POST", "/v1/bindings/initiate", toTree(t, req).withRaw(t, rejectValue(t, c), c.Field), "", c.Expected.HTTP, c.Expected.Code)
		})
	}
	// Nothing was opened: the id is still free.
	h.fails("GET", "/v1/bindings/bs-valid/status", nil, "", http.StatusNotFound, "NOT_FOUND")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-valid", h.now(), num(10), num(100)), "", nil)
}

// TestInitiateSessionExists: a binding_session_id is used once, ever.
func TestInitiateSessionExists(t *testing.T) {
	h := newHarness(t)
	n, other := newNode(t, "n"), newNode(t, "other")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", nil)
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	h.fails("POST", "/v1/bindings/initiate", other.initiate(t, "bs-1", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	// A bad signature is reported before the reuse.
	bad := n.initiate(t, "bs-1", h.now(), nil, nil)
	bad.NodeSignature = tamperSig(t, bad.NodeSignature)
	h.fails("POST", "/v1/bindings/initiate", bad, "", http.StatusUnauthorized, "BAD_SIGNATURE")

	// After the session ended, by cancel or by expiry, the id stays taken.
	h.ok("POST", "/v1/bindings/bs-1/cancel", n.cancelRequest(t, "bs-1", n.did, h.now()), "", nil)
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-2", h.now(), nil, nil), "", nil)
	h.clock.Advance(time.Hour)
	h.wantState("bs-2", "EXPIRED")
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-2", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	if st := h.readStatus("bs-1"); st.State != "CANCELLED" {
		t.Fatalf("reuse attempts changed the first session: %+v", st)
	}
}

// TestInitiateOpenSessionLimit: one node key holds at most 16 non-terminal sessions.
func TestInitiateOpenSessionLimit(t *testing.T) {
	h := newHarness(t)
	n, other := newNode(t, "n"), newNode(t, "other")
	id := func(i int) string { return "bs-" + string(rune('a'+i)) }
	for i := range 16 {
		h.ok("POST", "/v1/bindings/initiate", n.initiate(t, id(i), h.now(), nil, nil), "", nil)
	}
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, id(16), h.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")
	h.fails("GET", "/v1/bindings/"+id(16)+"/status", nil, "", http.StatusNotFound, "NOT_FOUND")
	// The limit is per node key, whatever DID spelling the node uses.
	full := n.initiate(t, id(16), h.now(), nil, nil)
	full.NodeDID = n.fullDID()
	h.fails("POST", "/v1/bindings/initiate", n.resignInitiate(t, full), "", http.StatusTooManyRequests, "RATE_LIMITED")
	h.ok("POST", "/v1/bindings/initiate", other.initiate(t, "bs-other", h.now(), nil, nil), "", nil)

	// A terminal session frees its place.
	h.ok("POST", "/v1/bindings/"+id(0)+"/cancel", n.cancelRequest(t, id(0), n.did, h.now()), "", nil)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, id(16), h.now(), nil, nil), "", nil)
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, id(17), h.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")

	// So does expiry.
	h.clock.Advance(10 * time.Minute)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, id(17), h.now(), nil, nil), "", nil)
}
