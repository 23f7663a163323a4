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
	"github.com/svrp/svrp/internal/testkit"
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

// resolveFixture is a registry with a logged-in operator.
type resolveFixture struct {
	h     *harness
	n     node
	op    operator
	token string
}

func newResolveFixture(t *testing.T, opts ...harnessOption) *resolveFixture {
	h := newHarness(t, opts...)
	op := newOperator(t, "op", h.now(), "nodes.bind")
	return &resolveFixture{h: h, n: newNode(t, "n"), op: op, token: op.login(h)}
}

func TestResolveSuccess(t *testing.T) {
	f := newResolveFixture(t)
	h, n := f.h, f.n

	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-code", h.now(), num(10), nil), "", &ini)
	status, raw := h.do("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, f.token)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	want := []string{"binding_session_id", "created_at", "device_summary", "expires_at", "node_did", "node_public_key", "node_public_key_fingerprint", "node_signature", "nonce", "os", "region", "requested", "state"}
	if d := cmp.Diff(want, jsonKeys(t, raw)); d != "" {
		t.Fatalf("fields (-want +got):\n%s", d)
	}
	if bytes.Contains(raw, []byte(ini.ShortCode)) || bytes.Contains(raw, []byte(ini.BindingToken)) {
		t.Fatalf("resolve repeats a secret: %s", raw)
	}
	var view api.ResolveView
	json.Unmarshal(raw, &view)
	wantView := api.ResolveView{
		BindingSessionID: "bs-code", State: "PENDING_OPERATOR", NodeDID: n.did,
		NodePublicKey: n.key.Base58(), NodePublicKeyFingerprint: n.key.Fingerprint(),
		DeviceSummary: sptr("8 vCPU"), OS: sptr("linux"), Region: sptr("eu-west"),
		Requested: api.Requested{TaskTypes: []string{"inference", "embedding"}, SingleLimit: num(10), DailyLimit: nil},
		Nonce:     "nonce-bs-code", ExpiresAt: stamp(h.now().Add(10 * time.Minute)),
		CreatedAt: stamp(h.now()), NodeSignature: n.initiate(t, "bs-code", h.now(), num(10), nil).NodeSignature,
	}
	if d := cmp.Diff(wantView, view); d != "" {
		t.Fatalf("view (-want +got):\n%s", d)
	}
	if !bytes.Contains(raw, []byte(`"daily_limit":null`)) {
		t.Fatalf("a null limit is not null: %s", raw)
	}
	st := h.readStatus("bs-code")
	if st.State != "PENDING_OPERATOR" || st.OperatorDID == nil || *st.OperatorDID != f.op.did {
		t.Fatalf("status %+v", st)
	}

	// By binding token, with the optional fields left out at initiate.
	bare := n.initiate(t, "bs-token", h.now(), nil, nil)
	bare.DeviceSummary, bare.OS, bare.Region, bare.RequestedTaskTypes = "", "", "", nil
	h.ok("POST", "/v1/bindings/initiate", n.resignInitiate(t, bare), "", &ini)
	status, raw = h.do("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, f.token)
	json.Unmarshal(raw, &view)
	if status != http.StatusOK || view.BindingSessionID != "bs-token" || view.DeviceSummary != nil || view.OS != nil || view.Region != nil ||
		view.Requested.TaskTypes == nil || len(view.Requested.TaskTypes) != 0 || view.Requested.SingleLimit != nil {
		t.Fatalf("resolve by token: %d %s", status, raw)
	}

	// The code as a person types it: lower case, a dash, spaces.
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-typed", h.now(), nil, nil), "", &ini)
	typed := " " + strings.ToLower(ini.ShortCode[:4]) + " - " + ini.ShortCode[4:] + " "
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: typed}, f.token, &view)
	if view.BindingSessionID != "bs-typed" {
		t.Fatalf("typed code resolved %+v", view)
	}
}

func TestResolveRequestErrors(t *testing.T) {
	f := newResolveFixture(t)
	h := f.h
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", f.n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	code := api.ResolveRequest{ShortCode: ini.ShortCode}

	expiredToken := f.op.login(h)
	h.clock.Advance(time.Second)
	fresh := f.op.login(h)
	h.clock.Advance(3599 * time.Second)
	// The session expires_at has long passed; only the bearer's answer matters here.
	h.fails("POST", "/v1/bindings/resolve", code, expiredToken, http.StatusUnauthorized, "SESSION_EXPIRED")
	h.fails("POST", "/v1/bindings/resolve", code, "", http.StatusUnauthorized, "NO_SESSION")
	h.fails("POST", "/v1/bindings/resolve", code, base58.Encode(make([]byte, 32)), http.StatusUnauthorized, "NO_SESSION")
	// The body's shape is checked before the bearer.
	for _, body := range []any{"{}", `{"short_code":""}`, `{"short_code":7}`, `{"binding_token":null}`, "[]", ""} {
		h.fails("POST", "/v1/bindings/resolve", body, "", http.StatusBadRequest, "BAD_REQUEST")
		h.fails("POST", "/v1/bindings/resolve", body, fresh, http.StatusBadRequest, "BAD_REQUEST")
	}
}

// TestResolveFailuresIdentical: an unknown, expired, already-resolved or cancelled code or
// token gets the same status and the same bytes.
func TestResolveFailuresIdentical(t *testing.T) {
	f := newResolveFixture(t)
	h, n := f.h, f.n

	var resolved, cancelled, expiring api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-resolved", h.now(), nil, nil), "", &resolved)
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: resolved.ShortCode}, f.token, nil)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-cancelled", h.now(), nil, nil), "", &cancelled)
	h.ok("POST", "/v1/bindings/bs-cancelled/cancel", n.cancelRequest(t, "bs-cancelled", n.did, h.now()), "", nil)
	short := n.initiate(t, "bs-expiring", h.now(), nil, nil)
	short.ExpiresAt = canonical.FormatTime(h.now().Add(time.Minute))
	h.ok("POST", "/v1/bindings/initiate", n.resignInitiate(t, short), "", &expiring)
	h.clock.Advance(time.Minute)

	type attempt struct {
		name string
		req  api.ResolveRequest
	}
	attempts := []attempt{
		{"unknown code", api.ResolveRequest{ShortCode: "ZZZZ2222"}},
		{"code of no possible session", api.ResolveRequest{ShortCode: "not even a code"}},
		{"unknown token", api.ResolveRequest{BindingToken: base58.Encode(bytes.Repeat([]byte{7}, 16))}},
		{"expired code", api.ResolveRequest{ShortCode: expiring.ShortCode}},
		{"expired token", api.ResolveRequest{BindingToken: expiring.BindingToken}},
		{"resolved code", api.ResolveRequest{ShortCode: resolved.ShortCode}},
		{"resolved token", api.ResolveRequest{BindingToken: resolved.BindingToken}},
		{"cancelled code", api.ResolveRequest{ShortCode: cancelled.ShortCode}},
		{"cancelled token", api.ResolveRequest{BindingToken: cancelled.BindingToken}},
	}
	var first []byte
	for _, a := range attempts {
		status, raw := h.do("POST", "/v1/bindings/resolve", a.req, f.token)
		if status != http.StatusNotFound {
			t.Fatalf("%s: status %d %s", a.name, status, raw)
		}
		if first == nil {
			first = raw
			if string(raw) != `{"code":"NOT_FOUND","error":"binding code not found"}`+"\n" {
				t.Fatalf("%s: %s", a.name, raw)
			}
		}
		if !bytes.Equal(raw, first) {
			t.Fatalf("%s: %q differs from %q", a.name, raw, first)
		}
	}
	h.wantState("bs-expiring", "EXPIRED")
	h.wantState("bs-cancelled", "CANCELLED")
	h.wantState("bs-resolved", "PENDING_OPERATOR")
}

// scriptedCode returns bytes that make the registry's next short code predictable, and
// that code.
func scriptedCode(t *testing.T, label string) ([]byte, string) {
	seed := testkit.LabelKey(t, label).Seed()
	script := append(bytes.Clone(seed), seed...)
	code, err := binding.NewShortCode(bytes.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	return script, code
}

// TestResolveCodeLimit: the 6th attempt on one code within 600 s of its first failure is
// refused, even with the right code, until the window passes; a success clears the count.
func TestResolveCodeLimit(t *testing.T) {
	rnd := &swapRand{}
	f := newResolveFixture(t, withRand(rnd))
	h, n := f.h, f.n
	script, code := scriptedCode(t, "first")

	// Five failures on a code nobody holds yet, spelled two ways.
	for i := range 5 {
		typed := code
		if i%2 == 1 {
			typed = strings.ToLower(code[:4]) + "-" + code[4:]
		}
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: typed}, f.token, http.StatusNotFound, "NOT_FOUND")
	}
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")
	// Other codes are not affected.
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "QQQQQQQQ"}, f.token, http.StatusNotFound, "NOT_FOUND")

	// Now the code exists, but its count still stands.
	h.clock.Advance(5 * time.Minute)
	rnd.next(script)
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	if ini.ShortCode != code {
		t.Fatalf("scripted code %s, registry issued %s", code, ini.ShortCode)
	}
	h.clock.Advance(5*time.Minute - time.Second)
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")
	h.wantState("bs-1", "INITIATED")
	// 600 s after the first failure the window is over.
	h.clock.Advance(time.Second)
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, nil)
	h.wantState("bs-1", "PENDING_OPERATOR")

	// A success clears the count: three failures, a success, then five more failures
	// before the limit.
	script, code = scriptedCode(t, "second")
	for range 3 {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, http.StatusNotFound, "NOT_FOUND")
	}
	rnd.next(script)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-2", h.now(), nil, nil), "", &ini)
	if ini.ShortCode != code {
		t.Fatalf("scripted code %s, registry issued %s", code, ini.ShortCode)
	}
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, nil)
	for range 5 {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, http.StatusNotFound, "NOT_FOUND")
	}
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")

	// 400 and 401 answers are not failures.
	_, code = scriptedCode(t, "third")
	for range 6 {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, "", http.StatusUnauthorized, "NO_SESSION")
	}
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, f.token, http.StatusNotFound, "NOT_FOUND")
}

// TestResolveTokenLimit: failures count per binding token as they do per code.
func TestResolveTokenLimit(t *testing.T) {
	f := newResolveFixture(t)
	h := f.h
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", f.n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, f.token, nil)
	for range 5 {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, f.token, http.StatusNotFound, "NOT_FOUND")
	}
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")
	// The code of the same session has a count of its own.
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, f.token, http.StatusNotFound, "NOT_FOUND")
}

// TestResolveAddressLimit: past ResolveAddressLimit failures, every resolve from the
// address is refused, whatever the code, until its window passes.
func TestResolveAddressLimit(t *testing.T) {
	f := newResolveFixture(t, resolveAddressLimit(3))
	h, n := f.h, f.n
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	h.clock.Advance(time.Minute)
	for _, c := range []string{"AAAAAAAA", "BBBBBBBB", "CCCCCCCC"} {
		h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: c}, f.token, http.StatusNotFound, "NOT_FOUND")
	}
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")
	// Another operator from the same address is refused too: the limit is the address's.
	other := newOperator(t, "other", h.now(), "nodes.bind")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, other.login(h), http.StatusTooManyRequests, "RATE_LIMITED")
	h.wantState("bs-1", "INITIATED")

	h.clock.Advance(10*time.Minute - time.Second)
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, f.token, http.StatusTooManyRequests, "RATE_LIMITED")
	var reopen api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-2", h.now(), nil, nil), "", &reopen)
	h.clock.Advance(time.Second)
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: reopen.ShortCode}, f.token, nil)
}

// bindFixture is a registry with three logged-in operators: op and other may
// bind, noBind's credential lacks nodes.bind.
type bindFixture struct {
	h                              *harness
	op, other, noBind              operator
	token, otherToken, noBindToken string
}

func newBindFixture(t *testing.T) *bindFixture {
	h := newHarness(t)
	f := &bindFixture{
		h: h, op: newOperator(t, "op", h.now(), "nodes.bind"),
		other:  newOperator(t, "other", h.now(), "nodes.bind"),
		noBind: newOperator(t, "nobind", h.now(), "nodes.read"),
	}
	f.token, f.otherToken, f.noBindToken = f.op.login(h), f.other.login(h), f.noBind.login(h)
	return f
}

func TestAuthorize(t *testing.T) {
	f := newBindFixture(t)
	h, op, other := f.h, f.op, f.other

	// change edits the authorize request of op for session s, re-signed by op's device.
	change := func(g func(r *api.AuthorizeRequest)) func(s flow, n node) any {
		return func(s flow, n node) any {
			r := op.authorize(t, s.view, h.now(), num(5), num(50))
			g(&r)
			return op.resignAuthorization(t, r)
		}
	}
	asIs := func(g func(r *api.AuthorizeRequest)) func(s flow, n node) any {
		return func(s flow, n node) any {
			r := op.authorize(t, s.view, h.now(), num(5), num(50))
			g(&r)
			return r
		}
	}
	credential := func(g func(dc *api.AuthorizeRequest)) func(s flow, n node) any {
		return func(s flow, n node) any {
			r := op.authorize(t, s.view, h.now(), num(5), num(50))
			g(&r)
			r.DeviceCredential = op.signCred(t, r.DeviceCredential)
			return r
		}
	}
	raw := func(value string, path ...string) func(s flow, n node) any {
		return func(s flow, n node) any {
			return toTree(t, op.authorize(t, s.view, h.now(), num(5), num(50))).withRaw(t, value, path...)
		}
	}

	tests := []struct {
		name   string
		token  func() string // default op's
		req    func(s flow, n node) any
		status int
		code   string
	}{
		{"success", nil, change(func(*api.AuthorizeRequest) {}), 200, ""},
		{"node DID in full spelling", nil, func(s flow, n node) any {
			r := op.authorize(t, s.view, h.now(), num(5), num(50))
			r.AuthorizationCredential.NodeDID = n.fullDID()
			return op.resignAuthorization(t, r)
		}, 200, ""},
		{"granted limit equal to the request", nil, change(func(r *api.AuthorizeRequest) { r.AuthorizationCredential.SingleLimit = num(10) }), 200, ""},
		{"any daily limit under a null request", nil, change(func(r *api.AuthorizeRequest) { r.AuthorizationCredential.DailyLimit = num(9007199254740991) }), 200, ""},
		{"null daily limit under a null request", nil, change(func(r *api.AuthorizeRequest) { r.AuthorizationCredential.DailyLimit = nil }), 200, ""},
		{"every requested task type", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.TaskTypes = []string{"embedding", "inference"}
		}), 200, ""},
		{"no task type", nil, change(func(r *api.AuthorizeRequest) { r.AuthorizationCredential.TaskTypes = nil }), 200, ""},
		{"authorization at both edges of its 5 s skew", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.IssuedAt = canonical.FormatTime(h.now().Add(5 * time.Second))
			r.AuthorizationCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-5 * time.Second))
		}), 200, ""},

		{"no bearer", func() string { return "" }, change(func(*api.AuthorizeRequest) {}), 401, "NO_SESSION"},
		{"unknown bearer", func() string { return base58.Encode(make([]byte, 32)) }, change(func(*api.AuthorizeRequest) {}), 401, "NO_SESSION"},
		{"unknown session", nil, change(func(r *api.AuthorizeRequest) {
			r.BindingSessionID = "bs-nobody"
			r.AuthorizationCredential.BindingSessionID = "bs-nobody"
		}), 404, "NOT_FOUND"},
		{"another operator's bearer and credential", func() string { return f.otherToken }, func(s flow, n node) any {
			return other.authorize(t, s.view, h.now(), num(5), num(50))
		}, 403, "PERMISSION_DENIED"},
		{"another operator's bearer", func() string { return f.otherToken }, change(func(*api.AuthorizeRequest) {}), 403, "PERMISSION_DENIED"},
		{"another operator's credential", nil, func(s flow, n node) any {
			return other.authorize(t, s.view, h.now(), num(5), num(50))
		}, 403, "PERMISSION_DENIED"},
		{"another operator's credential, badly signed", nil, func(s flow, n node) any {
			r := other.authorize(t, s.view, h.now(), num(5), num(50))
			r.DeviceCredential.Signature = tamperSig(t, r.DeviceCredential.Signature)
			return r
		}, 403, "PERMISSION_DENIED"},
		{"credential root key of another operator", nil, credential(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.OperatorRootPublicKey = pub(other.root).Base58()
		}), 401, "DC_ID_BINDING"},
		{"credential root key not a key", nil, credential(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.OperatorRootPublicKey = "0xabc"
		}), 401, "DC_ID_BINDING"},
		{"credential signature tampered", nil, asIs(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.Signature = tamperSig(t, r.DeviceCredential.Signature)
		}), 401, "DC_BAD_SIGNATURE"},
		{"credential changed after signing", nil, asIs(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.DeviceID = "another-laptop"
		}), 401, "DC_BAD_SIGNATURE"},
		{"credential expired", nil, credential(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-6 * time.Second))
		}), 401, "DC_EXPIRED"},
		{"credential not yet valid", nil, credential(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.IssuedAt = canonical.FormatTime(h.now().Add(6 * time.Second))
		}), 401, "DC_EXPIRED"},
		{"credential expired and without nodes.bind", nil, credential(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
			r.DeviceCredential.Permissions = nil
		}), 401, "DC_EXPIRED"},
		{"credential without nodes.bind", nil, credential(func(r *api.AuthorizeRequest) {
			r.DeviceCredential.Permissions = []string{"nodes.read"}
		}), 403, "PERMISSION_DENIED"},

		{"authorization for another session", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.BindingSessionID = "bs-elsewhere"
		}), 400, "BAD_REQUEST"},
		{"authorization for another node", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.NodeDID = newNode(t, "stranger").did
		}), 400, "BAD_REQUEST"},
		{"authorization naming the node by an operator DID", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.NodeDID = "did:svrp:o:" + r.AuthorizationCredential.NodeDID[len("did:svrp:n:"):]
		}), 400, "BAD_REQUEST"},
		{"authorization for another operator", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.OperatorDID = other.did
		}), 400, "BAD_REQUEST"},
		{"mismatch and a bad signature", nil, asIs(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.OperatorDID = other.did
		}), 400, "BAD_REQUEST"},

		{"authorization signature tampered", nil, asIs(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.Signature = tamperSig(t, r.AuthorizationCredential.Signature)
		}), 401, "BAD_SIGNATURE"},
		{"authorization signed by the root key", nil, asIs(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.Signature = sign(t, op.root, r.AuthorizationCredential.Authorization)
		}), 401, "BAD_SIGNATURE"},
		{"authorization changed after signing", nil, asIs(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.SingleLimit = num(1)
		}), 401, "BAD_SIGNATURE"},
		{"bad signature on an expired, over-scoped grant", nil, asIs(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
			r.AuthorizationCredential.TaskTypes = []string{"training"}
		}), 401, "BAD_SIGNATURE"},

		{"authorization expired", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-6 * time.Second))
		}), 401, "AUTHZ_EXPIRED"},
		{"authorization not yet valid", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.IssuedAt = canonical.FormatTime(h.now().Add(6 * time.Second))
		}), 401, "AUTHZ_EXPIRED"},
		{"expired and over scope", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
			r.AuthorizationCredential.SingleLimit = num(1000)
		}), 401, "AUTHZ_EXPIRED"},

		{"task type not requested", nil, change(func(r *api.AuthorizeRequest) {
			r.AuthorizationCredential.TaskTypes = []string{"inference", "training"}
		}), 403, "SCOPE_EXCEEDED"},
		{"single limit above the request", nil, change(func(r *api.AuthorizeRequest) { r.AuthorizationCredential.SingleLimit = num(10.5) }), 403, "SCOPE_EXCEEDED"},
		{"null single limit against a requested one", nil, change(func(r *api.AuthorizeRequest) { r.AuthorizationCredential.SingleLimit = nil }), 403, "SCOPE_EXCEEDED"},

		{"no authorization_credential", nil, raw("null", "authorization_credential"), 400, "BAD_REQUEST"},
		{"no device_credential", nil, raw("null", "device_credential"), 400, "BAD_REQUEST"},
		{"no binding_session_id", nil, raw("null", "binding_session_id"), 400, "BAD_REQUEST"},
		{"no revocation_id", nil, raw("null", "authorization_credential", "revocation_id"), 400, "BAD_REQUEST"},
		{"credential without device_id", nil, raw("null", "device_credential", "device_id"), 400, "BAD_REQUEST"},
		{"bad shape and no bearer", func() string { return "" }, raw("7", "binding_session_id"), 400, "BAD_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			n := newNode(t, "n")
			s := h.drive(n, op, f.token, "bs-"+strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(tt.name), "PENDING_OPERATOR")
			token := f.token
			if tt.token != nil {
				token = tt.token()
			}
			if tt.code == "" {
				var res api.StateResult
				h.ok("POST", "/v1/bindings/authorize", tt.req(s, n), token, &res)
				if res != (api.StateResult{BindingSessionID: s.id, State: "PENDING_NODE_ACCEPTANCE"}) {
					t.Fatalf("answer %+v", res)
				}
				h.wantState(s.id, "PENDING_NODE_ACCEPTANCE")
				return
			}
			h.fails("POST", "/v1/bindings/authorize", tt.req(s, n), token, tt.status, tt.code)
			h.wantState(s.id, "PENDING_OPERATOR")
			h.ok("POST", "/v1/bindings/authorize", op.authorize(t, s.view, h.now(), num(5), num(50)), f.token, nil)
		})
	}

	t.Run("operator without nodes.bind", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		s := h.drive(n, f.noBind, f.noBindToken, "bs-nobind", "PENDING_OPERATOR")
		h.fails("POST", "/v1/bindings/authorize", f.noBind.authorize(t, s.view, h.now(), num(5), num(50)), f.noBindToken, http.StatusForbidden, "PERMISSION_DENIED")
		h.wantState(s.id, "PENDING_OPERATOR")
	})
}

// TestAuthorizeState: only a PENDING_OPERATOR session can be authorized.
func TestAuthorizeState(t *testing.T) {
	f := newBindFixture(t)
	h, op := f.h, f.op
	n := newNode(t, "n")
	for _, state := range []string{"INITIATED", "PENDING_NODE_ACCEPTANCE", "ACTIVE", "CANCELLED", "REJECTED_BY_OPERATOR", "REJECTED_BY_NODE"} {
		t.Run(state, func(t *testing.T) {
			h := h.in(t)
			s := h.drive(n, op, f.token, "bs-"+state, state)
			view := s.view
			if state == "INITIATED" || state == "CANCELLED" {
				view = api.ResolveView{BindingSessionID: s.id, NodeDID: n.did}
			}
			h.fails("POST", "/v1/bindings/authorize", op.authorize(t, view, h.now(), num(5), num(50)), f.token, http.StatusConflict, "BAD_STATE")
			h.wantState(s.id, state)
		})
	}
	t.Run("EXPIRED", func(t *testing.T) {
		h := h.in(t)
		m := newNode(t, "m")
		s := h.drive(m, op, f.token, "bs-expired", "PENDING_OPERATOR")
		h.clock.Advance(10 * time.Minute)
		h.fails("POST", "/v1/bindings/authorize", op.authorize(t, s.view, h.now(), num(5), num(50)), f.token, http.StatusConflict, "BAD_STATE")
		h.wantState(s.id, "EXPIRED")
	})
	t.Run("SESSION_EXPIRED", func(t *testing.T) {
		h := h.in(t)
		late := op.login(h)
		h.clock.Advance(3599 * time.Second)
		s := h.drive(newNode(t, "m"), op, late, "bs-late", "PENDING_OPERATOR")
		h.clock.Advance(time.Second)
		h.fails("POST", "/v1/bindings/authorize", op.authorize(t, s.view, h.now(), num(5), num(50)), late, http.StatusUnauthorized, "SESSION_EXPIRED")
		h.wantState(s.id, "PENDING_OPERATOR")
	})
}

// TestAuthorizeRejects sends the message-7 cases of rejects.json to one session, which
// stays authorizable.
func TestAuthorizeRejects(t *testing.T) {
	f := newBindFixture(t)
	h := f.h
	s := h.drive(newNode(t, "n"), f.op, f.token, "bs-1", "PENDING_OPERATOR")
	for _, c := range rejectVectors(t, 7) {
		t.Run(c.ID, func(t *testing.T) {
			body := toTree(t, f.op.authorize(t, s.view, h.now(), num(5), num(50))).withRaw(t, rejectValue(t, c), "authorization_credential", c.Field)
			h.in(t).fails("POST", "/v1/bindings/authorize", body, f.token, c.Expected.HTTP, c.Expected.Code)
		})
	}
	h.wantState(s.id, "PENDING_OPERATOR")
	h.ok("POST", "/v1/bindings/authorize", f.op.authorize(t, s.view, h.now(), num(5), num(50)), f.token, nil)
}

func TestStatus(t *testing.T) {
	f := newBindFixture(t)
	h := f.h
	n := newNode(t, "n")
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	status, raw := h.do("GET", "/v1/bindings/bs-1/status", nil, "")
	want := `{"binding_session_id":"bs-1","state":"INITIATED","node_did":"` + n.did + `","operator_did":null,"expires_at":"` + ini.ExpiresAt + `"}` + "\n"
	if status != http.StatusOK || string(raw) != want {
		t.Fatalf("status: %d %s, want %s", status, raw, want)
	}
	// A full-spelling session reports the DID it was opened under.
	full := n.initiate(t, "bs-full", h.now(), nil, nil)
	full.NodeDID = n.fullDID()
	h.ok("POST", "/v1/bindings/initiate", n.resignInitiate(t, full), "", nil)
	if st := h.readStatus("bs-full"); st.NodeDID != n.fullDID() {
		t.Fatalf("status %+v", st)
	}

	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, f.token, nil)
	if st := h.readStatus("bs-1"); st.State != "PENDING_OPERATOR" || st.OperatorDID == nil || *st.OperatorDID != f.op.did || st.ExpiresAt != ini.ExpiresAt {
		t.Fatalf("after resolve: %+v", st)
	}

	active := h.drive(newNode(t, "m"), f.op, f.token, "bs-active", "ACTIVE")
	h.fails("GET", "/v1/bindings/bs-nobody/status", nil, "", http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/bs-1/status", nil, "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")

	// Expiry is applied on read, from expires_at on; a terminal state does not expire.
	h.clock.Advance(10*time.Minute - time.Second)
	h.wantState("bs-1", "PENDING_OPERATOR")
	h.clock.Advance(time.Second)
	h.wantState("bs-1", "EXPIRED")
	h.wantState("bs-full", "EXPIRED")
	h.wantState(active.id, "ACTIVE")
	if st := h.readStatus("bs-1"); st.OperatorDID == nil || *st.OperatorDID != f.op.did {
		t.Fatalf("an expired session lost its operator: %+v", st)
	}
}

func TestCancel(t *testing.T) {
	f := newBindFixture(t)
	h, op := f.h, f.op
	stale := op.login(h)
	h.clock.Advance(3600 * time.Second)
	f.token, f.otherToken = op.login(h), f.other.login(h)

	t.Run("operator form", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		for _, state := range []string{"PENDING_OPERATOR", "PENDING_NODE_ACCEPTANCE"} {
			s := h.drive(n, op, f.token, "bs-op-"+state, state)
			var res api.StateResult
			// The body of the operator form is ignored, whatever it holds.
			h.ok("POST", "/v1/bindings/"+s.id+"/cancel", "not json", f.token, &res)
			if res != (api.StateResult{BindingSessionID: s.id, State: "CANCELLED"}) {
				t.Fatalf("answer %+v", res)
			}
			h.wantState(s.id, "CANCELLED")
		}
		s := h.drive(n, op, f.token, "bs-op-denied", "PENDING_OPERATOR")
		h.fails("POST", "/v1/bindings/"+s.id+"/cancel", nil, f.otherToken, http.StatusForbidden, "PERMISSION_DENIED")
		h.fails("POST", "/v1/bindings/"+s.id+"/cancel", nil, base58.Encode(make([]byte, 32)), http.StatusUnauthorized, "NO_SESSION")
		h.fails("POST", "/v1/bindings/"+s.id+"/cancel", nil, stale, http.StatusUnauthorized, "SESSION_EXPIRED")
		if status, code := h.withHeader("POST", "/v1/bindings/"+s.id+"/cancel", "Basic abc"); status != 401 || code != "NO_SESSION" {
			t.Fatalf("Basic header: %d %s", status, code)
		}
		// Nobody has resolved an INITIATED session, so no operator may cancel it.
		ini := h.drive(n, op, f.token, "bs-op-initiated", "INITIATED")
		h.fails("POST", "/v1/bindings/"+ini.id+"/cancel", nil, f.token, http.StatusForbidden, "PERMISSION_DENIED")
		// The unknown id is reported first.
		h.fails("POST", "/v1/bindings/bs-nobody/cancel", nil, base58.Encode(make([]byte, 32)), http.StatusNotFound, "NOT_FOUND")
		h.wantState(s.id, "PENDING_OPERATOR")
		h.wantState(ini.id, "INITIATED")
	})

	t.Run("node form", func(t *testing.T) {
		h := h.in(t)
		n, other := newNode(t, "n"), newNode(t, "other")
		fallback, _ := didkey.NodeDID(n.key, didkey.FormFallback)
		for i, did := range []string{n.did, n.fullDID(), fallback.String()} {
			for _, state := range []string{"INITIATED", "PENDING_OPERATOR", "PENDING_NODE_ACCEPTANCE"} {
				s := h.drive(n, op, f.token, "bs-node-"+state+"-"+string(rune('a'+i)), state)
				var res api.StateResult
				h.ok("POST", "/v1/bindings/"+s.id+"/cancel", n.cancelRequest(t, s.id, did, h.now()), "", &res)
				if res != (api.StateResult{BindingSessionID: s.id, State: "CANCELLED"}) {
					t.Fatalf("answer %+v", res)
				}
			}
		}

		s := h.drive(n, op, f.token, "bs-node-refused", "PENDING_OPERATOR")
		path := "/v1/bindings/" + s.id + "/cancel"
		resign := func(r api.NodeCancelRequest) api.NodeCancelRequest {
			r.Signature = sign(t, n.priv, canonical.Cancel{BindingSessionID: s.id, NodeDID: r.NodeDID, TS: r.TS})
			return r
		}
		now := h.now()
		for _, tt := range []struct {
			name   string
			req    any
			status int
			code   string
		}{
			{"node_did of another key", other.cancelRequest(t, s.id, other.did, now), 403, "PERMISSION_DENIED"},
			{"another key, stale", other.cancelRequest(t, s.id, other.did, now.Add(-time.Hour)), 403, "PERMISSION_DENIED"},
			{"ts 301 s behind", n.cancelRequest(t, s.id, n.did, now.Add(-301*time.Second)), 401, "STALE_TS"},
			{"ts 301 s ahead", n.cancelRequest(t, s.id, n.did, now.Add(301*time.Second)), 401, "STALE_TS"},
			{"stale and badly signed", api.NodeCancelRequest{NodeDID: n.did, TS: now.Add(-time.Hour).Unix(), Signature: "x"}, 401, "STALE_TS"},
			{"tampered signature", func() any {
				r := n.cancelRequest(t, s.id, n.did, now)
				r.Signature = tamperSig(t, r.Signature)
				return r
			}(), 401, "BAD_SIGNATURE"},
			{"signature for another session", func() any {
				r := n.cancelRequest(t, "bs-other", n.did, now)
				return r
			}(), 401, "BAD_SIGNATURE"},
			{"signed by another key", func() any {
				r := n.cancelRequest(t, s.id, n.did, now)
				r.Signature = other.cancelRequest(t, s.id, n.did, now).Signature
				return r
			}(), 401, "BAD_SIGNATURE"},
			{"another DID method", resign(api.NodeCancelRequest{NodeDID: "did:key:z6Mk", TS: now.Unix()}), 401, "ID_BINDING_REQUIRED"},
			{"DID grammar", resign(api.NodeCancelRequest{NodeDID: "did:svrp:n:XYZ", TS: now.Unix()}), 401, "ID_BINDING_FAILED"},
			{"operator-tagged DID", resign(api.NodeCancelRequest{NodeDID: "did:svrp:o:" + n.key.ShortBody(), TS: now.Unix()}), 401, "ID_BINDING_FAILED"},
			{"no ts", map[string]any{"node_did": n.did, "signature": "x"}, 400, "BAD_REQUEST"},
			{"no body", nil, 401, "NO_SESSION"},
			{"ts a string", toTree(t, n.cancelRequest(t, s.id, n.did, now)).withRaw(t, `"now"`, "ts"), 400, "BAD_REQUEST"},
			// A control character breaks the DID grammar, which is checked first (see
			// parseNodeDID).
			{"node_did with LF", api.NodeCancelRequest{NodeDID: n.did + "\n", TS: now.Unix(), Signature: "x"}, 401, "ID_BINDING_FAILED"},
		} {
			if status, raw := h.do("POST", path, tt.req, ""); status != tt.status || !bytes.Contains(raw, []byte(`"code":"`+tt.code+`"`)) {
				t.Errorf("%s: %d %s, want %d %s", tt.name, status, raw, tt.status, tt.code)
			}
		}
		for _, c := range rejectVectors(t, 9) {
			h.fails("POST", path, toTree(t, n.cancelRequest(t, s.id, n.did, now)).withRaw(t, rejectValue(t, c), c.Field), "", c.Expected.HTTP, c.Expected.Code)
		}
		h.wantState(s.id, "PENDING_OPERATOR")
		h.fails("POST", "/v1/bindings/bs-nobody/cancel", n.cancelRequest(t, "bs-nobody", n.did, now), "", http.StatusNotFound, "NOT_FOUND")
		h.fails("POST", "/v1/bindings/bs-nobody/cancel", api.NodeCancelRequest{NodeDID: "did:web:x", TS: 1, Signature: "x"}, "", http.StatusNotFound, "NOT_FOUND")
		// ts exactly 300 s off is still fresh.
		h.ok("POST", path, n.cancelRequest(t, s.id, n.did, now.Add(300*time.Second)), "", nil)
	})

	t.Run("terminal states", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		terminal := map[string]flow{}
		for _, state := range []string{"ACTIVE", "REJECTED_BY_OPERATOR", "REJECTED_BY_NODE"} {
			terminal[state] = h.drive(n, op, f.token, "bs-end-"+state, state)
		}
		// Cancelled after op resolved it, so that op's proof holds and the state answers.
		terminal["CANCELLED"] = h.drive(n, op, f.token, "bs-end-CANCELLED", "PENDING_OPERATOR")
		h.ok("POST", "/v1/bindings/bs-end-CANCELLED/cancel", nil, f.token, nil)
		terminal["EXPIRED"] = h.drive(newNode(t, "m"), op, f.token, "bs-end-EXPIRED", "PENDING_NODE_ACCEPTANCE")
		h.clock.Advance(10 * time.Minute)
		for state, s := range terminal {
			status, code := http.StatusConflict, "BAD_STATE"
			if state == "ACTIVE" {
				code = "ALREADY_ACTIVE"
			}
			node := n
			if state == "EXPIRED" {
				node = newNode(t, "m")
			}
			h.fails("POST", "/v1/bindings/"+s.id+"/cancel", nil, f.token, status, code)
			h.fails("POST", "/v1/bindings/"+s.id+"/cancel", node.cancelRequest(t, s.id, node.did, h.now()), "", status, code)
			h.wantState(s.id, state)
		}
	})
}

func TestOperatorReject(t *testing.T) {
	f := newBindFixture(t)
	h, op := f.h, f.op
	stale := op.login(h)
	h.clock.Advance(3600 * time.Second)
	f.token, f.otherToken = op.login(h), f.other.login(h)
	n := newNode(t, "n")

	s := h.drive(n, op, f.token, "bs-1", "PENDING_OPERATOR")
	path := "/v1/bindings/" + s.id + "/reject"
	h.fails("POST", path, nil, "", http.StatusUnauthorized, "NO_SESSION")
	h.fails("POST", path, nil, base58.Encode(make([]byte, 32)), http.StatusUnauthorized, "NO_SESSION")
	h.fails("POST", path, nil, stale, http.StatusUnauthorized, "SESSION_EXPIRED")
	h.fails("POST", path, nil, f.otherToken, http.StatusForbidden, "PERMISSION_DENIED")
	h.fails("POST", "/v1/bindings/bs-nobody/reject", nil, "", http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/bs-nobody/reject", nil, f.token, http.StatusNotFound, "NOT_FOUND")
	h.wantState(s.id, "PENDING_OPERATOR")
	var res api.StateResult
	h.ok("POST", path, nil, f.token, &res)
	if res != (api.StateResult{BindingSessionID: s.id, State: "REJECTED_BY_OPERATOR"}) {
		t.Fatalf("answer %+v", res)
	}
	h.wantState(s.id, "REJECTED_BY_OPERATOR")
	h.fails("POST", path, nil, f.token, http.StatusConflict, "BAD_STATE")

	initiated := h.drive(n, op, f.token, "bs-initiated", "INITIATED")
	h.fails("POST", "/v1/bindings/"+initiated.id+"/reject", nil, f.token, http.StatusForbidden, "PERMISSION_DENIED")

	for _, state := range []string{"PENDING_NODE_ACCEPTANCE", "ACTIVE", "CANCELLED", "REJECTED_BY_NODE"} {
		s := h.drive(n, op, f.token, "bs-"+state, state)
		code := "BAD_STATE"
		if state == "ACTIVE" {
			code = "ALREADY_ACTIVE"
		}
		if state == "CANCELLED" {
			// Cancelled before anyone resolved it: no operator is entitled to it.
			h.fails("POST", "/v1/bindings/"+s.id+"/reject", nil, f.token, http.StatusForbidden, "PERMISSION_DENIED")
			continue
		}
		h.fails("POST", "/v1/bindings/"+s.id+"/reject", nil, f.token, http.StatusConflict, code)
		h.wantState(s.id, state)
	}
	cancelled := h.drive(n, op, f.token, "bs-cancelled-after-resolve", "PENDING_OPERATOR")
	h.ok("POST", "/v1/bindings/"+cancelled.id+"/cancel", nil, f.token, nil)
	h.fails("POST", "/v1/bindings/"+cancelled.id+"/reject", nil, f.token, http.StatusConflict, "BAD_STATE")
	expired := h.drive(n, op, f.token, "bs-expired", "PENDING_OPERATOR")
	h.clock.Advance(10 * time.Minute)
	h.fails("POST", "/v1/bindings/"+expired.id+"/reject", nil, f.token, http.StatusConflict, "BAD_STATE")
	h.wantState(expired.id, "EXPIRED")
}

func TestPending(t *testing.T) {
	f := newBindFixture(t)
	h, op := f.h, f.op
	n, quiet := newNode(t, "n"), newNode(t, "quiet")

	states := map[string]flow{}
	for _, state := range []string{"INITIATED", "PENDING_OPERATOR", "PENDING_NODE_ACCEPTANCE", "ACTIVE", "REJECTED_BY_NODE"} {
		states[state] = h.drive(n, op, f.token, "bs-"+state, state)
	}
	second := h.drive(n, op, f.token, "bs-second", "PENDING_NODE_ACCEPTANCE")

	var pend api.PendingResult
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	got := map[string]api.PendingAuthorization{}
	for _, p := range pend.Pending {
		got[p.BindingSessionID] = p
	}
	if len(pend.Pending) != 2 || len(got) != 2 {
		t.Fatalf("pending: %+v", pend)
	}
	for _, s := range []flow{states["PENDING_NODE_ACCEPTANCE"], second} {
		want := op.authorize(t, s.view, h.now(), num(5), num(50))
		p := got[s.id]
		if d := cmp.Diff(api.PendingAuthorization{
			BindingSessionID: s.id, OperatorDID: op.did, Nonce: "nonce-" + s.id, ExpiresAt: s.ini.ExpiresAt,
			DeviceCredential: want.DeviceCredential, AuthorizationCredential: want.AuthorizationCredential,
		}, p); d != "" {
			t.Fatalf("%s (-want +got):\n%s", s.id, d)
		}
	}

	_, raw := h.do("POST", "/v1/node/bindings/pending", quiet.poll(t, h.now()), "")
	if string(raw) != `{"pending":[]}`+"\n" {
		t.Fatalf("a node with nothing pending: %s", raw)
	}

	// A poll under the full spelling, with the key in hex.
	full := api.PendingRequest{NodeDID: n.fullDID(), NodePublicKey: n.key.Hex(), TS: h.now().Unix()}
	full.Signature = sign(t, n.priv, canonical.Poll{NodeDID: full.NodeDID, TS: full.TS})
	h.ok("POST", "/v1/node/bindings/pending", full, "", &pend)
	if len(pend.Pending) != 2 {
		t.Fatalf("full-DID poll: %+v", pend)
	}

	poll := func(did, key string, ts time.Time) api.PendingRequest {
		r := api.PendingRequest{NodeDID: did, NodePublicKey: key, TS: ts.Unix()}
		r.Signature = sign(t, n.priv, canonical.Poll{NodeDID: did, TS: ts.Unix()})
		return r
	}
	now := h.now()
	tests := []struct {
		name   string
		req    any
		status int
		code   string
	}{
		{"ts 300 s behind", poll(n.did, n.key.Base58(), now.Add(-300*time.Second)), 200, ""},
		{"ts 300 s ahead", poll(n.did, n.key.Base58(), now.Add(300*time.Second)), 200, ""},
		{"ts 301 s behind", poll(n.did, n.key.Base58(), now.Add(-301*time.Second)), 401, "STALE_TS"},
		{"ts 301 s ahead", poll(n.did, n.key.Base58(), now.Add(301*time.Second)), 401, "STALE_TS"},
		{"stale and badly signed", func() any {
			r := poll(n.did, n.key.Base58(), now.Add(-time.Hour))
			r.Signature = tamperSig(t, r.Signature)
			return r
		}(), 401, "STALE_TS"},
		{"tampered signature", func() any {
			r := poll(n.did, n.key.Base58(), now)
			r.Signature = tamperSig(t, r.Signature)
			return r
		}(), 401, "BAD_SIGNATURE"},
		{"signature over another ts", func() any {
			r := poll(n.did, n.key.Base58(), now)
			r.TS++
			return r
		}(), 401, "BAD_SIGNATURE"},
		{"another node's key and DID, signed by n", poll(quiet.did, quiet.key.Base58(), now), 401, "BAD_SIGNATURE"},
		{"another DID method", poll("did:web:x", n.key.Base58(), now), 401, "ID_BINDING_REQUIRED"},
		{"DID of another key", poll(quiet.did, n.key.Base58(), now), 401, "ID_BINDING_FAILED"},
		{"key of 33 bytes", poll(n.did, base58.Encode(append(n.key[:], 0)), now), 401, "ID_BINDING_FAILED"},
		{"operator tag", poll("did:svrp:o:"+n.key.ShortBody(), n.key.Base58(), now), 401, "ID_BINDING_FAILED"},
		{"DID with LF", api.PendingRequest{NodeDID: n.did + "\n", NodePublicKey: n.key.Base58(), TS: now.Unix(), Signature: "x"}, 401, "ID_BINDING_FAILED"},
		{"bad DID and stale", poll("did:web:x", n.key.Base58(), now.Add(-time.Hour)), 401, "ID_BINDING_REQUIRED"},
		{"no node_public_key", map[string]any{"node_did": n.did, "ts": now.Unix(), "signature": "x"}, 400, "BAD_REQUEST"},
		{"ts a float", toTree(t, poll(n.did, n.key.Base58(), now)).withRaw(t, "1.5", "ts"), 400, "BAD_REQUEST"},
	}
	for _, c := range rejectVectors(t, 5) {
		tests = append(tests, struct {
			name   string
			req    any
			status int
			code   string
		}{c.ID, toTree(t, poll(n.did, n.key.Base58(), now)).withRaw(t, rejectValue(t, c), c.Field), c.Expected.HTTP, c.Expected.Code})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			if tt.code == "" {
				h.ok("POST", "/v1/node/bindings/pending", tt.req, "", &pend)
				if len(pend.Pending) != 2 {
					t.Fatalf("pending: %+v", pend)
				}
				return
			}
			h.fails("POST", "/v1/node/bindings/pending", tt.req, "", tt.status, tt.code)
		})
	}

	// An expired session is no longer pending.
	h.clock.Advance(10 * time.Minute)
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	if len(pend.Pending) != 0 {
		t.Fatalf("expired sessions still pending: %+v", pend)
	}
}

func TestAccept(t *testing.T) {
	f := newBindFixture(t)
	h, op, other := f.h, f.op, f.other

	t.Run("success", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		s := h.drive(n, op, f.token, "bs-ok", "PENDING_NODE_ACCEPTANCE")
		h.clock.Advance(time.Second)
		status, raw := h.do("POST", "/v1/node/bindings/bs-ok/accept", n.acceptance(t, s.pend, true, h.now()), "")
		var res api.AcceptResult
		json.Unmarshal(raw, &res)
		if res.LogIndex == nil {
			t.Error("the answer carries no log_index")
		}
		res.LogIndex = nil
		want := api.AcceptResult{BindingSessionID: "bs-ok", State: "ACTIVE", Binding: api.BindingView{
			NodeDID: n.did, OperatorDID: op.did, BoundTerms: api.BoundTerms{TaskTypes: []string{"inference"},
				SingleLimit: num(5), DailyLimit: num(50), RevocationID: "authz-bs-ok", ActivatedAt: stamp(h.now())},
		}}
		if d := cmp.Diff(want, res); status != http.StatusOK || d != "" {
			t.Fatalf("%d (-want +got):\n%s", status, d)
		}
		h.wantState(s.id, "ACTIVE")
		h.fails("POST", "/v1/node/bindings/bs-ok/accept", n.acceptance(t, s.pend, true, h.now()), "", http.StatusConflict, "ALREADY_ACTIVE")
		h.fails("POST", "/v1/node/bindings/bs-ok/reject", n.acceptance(t, s.pend, false, h.now()), "", http.StatusConflict, "ALREADY_ACTIVE")
	})

	t.Run("under the full DID", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		s := h.drive(n, op, f.token, "bs-full", "PENDING_NODE_ACCEPTANCE")
		acc := n.acceptance(t, s.pend, true, h.now())
		acc.Acceptance.NodeDID = n.fullDID()
		h.ok("POST", "/v1/node/bindings/bs-full/accept", n.resignAcceptance(t, acc), "", nil)
		h.wantState(s.id, "ACTIVE")
	})

	t.Run("not found", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		s := h.drive(n, op, f.token, "bs-present", "PENDING_NODE_ACCEPTANCE")
		acc := n.acceptance(t, s.pend, true, h.now())
		acc.Acceptance.BindingSessionID = "bs-absent"
		h.fails("POST", "/v1/node/bindings/bs-absent/accept", n.resignAcceptance(t, acc), "", http.StatusNotFound, "NOT_FOUND")
		h.fails("POST", "/v1/node/bindings/bs-absent/reject", n.resignAcceptance(t, n.acceptance(t, s.pend, false, h.now())), "", http.StatusNotFound, "NOT_FOUND")
	})

	t.Run("wrong state", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		ref := h.drive(n, op, f.token, "bs-ref", "PENDING_NODE_ACCEPTANCE")
		for _, state := range []string{"INITIATED", "PENDING_OPERATOR", "CANCELLED", "REJECTED_BY_NODE", "REJECTED_BY_OPERATOR"} {
			s := h.drive(n, op, f.token, "bs-"+state, state)
			p := ref.pend
			p.BindingSessionID = s.id
			h.fails("POST", "/v1/node/bindings/"+s.id+"/accept", n.acceptance(t, p, true, h.now()), "", http.StatusConflict, "BAD_STATE")
			h.fails("POST", "/v1/node/bindings/"+s.id+"/reject", n.acceptance(t, p, false, h.now()), "", http.StatusConflict, "BAD_STATE")
			h.wantState(s.id, state)
		}
		h.clock.Advance(10 * time.Minute)
		h.fails("POST", "/v1/node/bindings/bs-ref/accept", n.acceptance(t, ref.pend, true, h.now()), "", http.StatusConflict, "BAD_STATE")
		h.fails("POST", "/v1/node/bindings/bs-ref/reject", n.acceptance(t, ref.pend, false, h.now()), "", http.StatusConflict, "BAD_STATE")
		h.wantState("bs-ref", "EXPIRED")
	})

	t.Run("mismatch", func(t *testing.T) {
		h := h.in(t)
		n, stranger := newNode(t, "n"), newNode(t, "stranger")
		s := h.drive(n, op, f.token, "bs-1", "PENDING_NODE_ACCEPTANCE")
		sibling := h.drive(n, op, f.token, "bs-2", "PENDING_NODE_ACCEPTANCE")
		edit := func(g func(a *api.AcceptanceRequest), accepted bool) api.AcceptanceRequest {
			a := n.acceptance(t, s.pend, accepted, h.now())
			g(&a)
			return n.resignAcceptance(t, a)
		}
		for name, body := range map[string]any{
			"session id of a sibling":    n.acceptance(t, sibling.pend, true, h.now()),
			"node_did of another key":    edit(func(a *api.AcceptanceRequest) { a.Acceptance.NodeDID = stranger.did }, true),
			"node_did of another method": edit(func(a *api.AcceptanceRequest) { a.Acceptance.NodeDID = "did:web:x" }, true),
			"operator_did of another":    edit(func(a *api.AcceptanceRequest) { a.Acceptance.OperatorDID = other.did }, true),
			"digest of another grant":    edit(func(a *api.AcceptanceRequest) { a.Acceptance.AuthorizationDigest = strings.Repeat("0", 64) }, true),
			"digest of the sibling": edit(func(a *api.AcceptanceRequest) {
				a.Acceptance.AuthorizationDigest = n.acceptance(t, sibling.pend, true, h.now()).Acceptance.AuthorizationDigest
			}, true),
			"accepted false": n.acceptance(t, s.pend, false, h.now()),
			"mismatch, badly signed": func() any {
				a := n.acceptance(t, s.pend, true, h.now())
				a.Acceptance.OperatorDID = other.did
				return a
			}(),
			"no acceptance":       `{}`,
			"accepted a string":   toTree(t, n.acceptance(t, s.pend, true, h.now())).withRaw(t, `"True"`, "acceptance", "accepted"),
			"issued_at malformed": edit(func(a *api.AcceptanceRequest) { a.Acceptance.IssuedAt = "2026-03-01T12:00:00+00:00" }, true),
		} {
			t.Run(name, func(t *testing.T) {
				h.in(t).fails("POST", "/v1/node/bindings/bs-1/accept", body, "", http.StatusBadRequest, "BAD_REQUEST")
			})
		}
		for _, c := range rejectVectors(t, 8) {
			h.fails("POST", "/v1/node/bindings/bs-1/accept", toTree(t, n.acceptance(t, s.pend, true, h.now())).withRaw(t, rejectValue(t, c), "acceptance", c.Field), "", c.Expected.HTTP, c.Expected.Code)
		}
		h.fails("POST", "/v1/node/bindings/bs-1/reject", n.acceptance(t, s.pend, true, h.now()), "", http.StatusBadRequest, "BAD_REQUEST")
		h.wantState(s.id, "PENDING_NODE_ACCEPTANCE")
		h.ok("POST", "/v1/node/bindings/bs-1/accept", n.acceptance(t, s.pend, true, h.now()), "", nil)
	})

	t.Run("bad signature reverts", func(t *testing.T) {
		h := h.in(t)
		n, stranger := newNode(t, "n"), newNode(t, "stranger")
		s := h.drive(n, op, f.token, "bs-sig", "PENDING_NODE_ACCEPTANCE")
		good := n.acceptance(t, s.pend, true, h.now())
		for _, sig := range []string{tamperSig(t, good.Acceptance.Signature), stranger.resignAcceptance(t, good).Acceptance.Signature, "0OIl", ""} {
			bad := good
			bad.Acceptance.Signature = sig
			h.fails("POST", "/v1/node/bindings/bs-sig/accept", bad, "", http.StatusUnauthorized, "BAD_SIGNATURE")
			h.wantState(s.id, "PENDING_NODE_ACCEPTANCE")
			var pend api.PendingResult
			h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
			if len(pend.Pending) != 1 || pend.Pending[0].BindingSessionID != s.id {
				t.Fatalf("the session is no longer offered to the node: %+v", pend)
			}
		}
		// Signed over a different issued_at than sent.
		skewed := good
		skewed.Acceptance.IssuedAt = canonical.FormatTime(h.now().Add(time.Second))
		h.fails("POST", "/v1/node/bindings/bs-sig/accept", skewed, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		var mine api.OperatorNodes
		h.ok("GET", "/v1/operator/me/nodes", nil, f.token, &mine)
		for _, b := range mine.Nodes {
			if b.Authorization.RevocationID == "authz-bs-sig" {
				t.Fatalf("a failed accept bound the node: %+v", mine)
			}
		}
		var res api.AcceptResult
		h.ok("POST", "/v1/node/bindings/bs-sig/accept", good, "", &res)
		if res.State != "ACTIVE" {
			t.Fatalf("accept after failures: %+v", res)
		}
	})

	t.Run("supersede", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		first := h.drive(n, op, f.token, "bs-first", "ACTIVE")
		var mine api.OperatorNodes
		h.ok("GET", "/v1/operator/me/nodes", nil, f.otherToken, &mine)
		before := mine.Count
		h.drive(n, other, f.otherToken, "bs-second", "ACTIVE")

		h.ok("GET", "/v1/operator/me/nodes", nil, f.otherToken, &mine)
		if mine.Count != before+1 || mine.Nodes[len(mine.Nodes)-1].Authorization.RevocationID != "authz-bs-second" {
			t.Fatalf("new operator's nodes: %+v", mine)
		}
		h.ok("GET", "/v1/operator/me/nodes", nil, f.token, &mine)
		for _, b := range mine.Nodes {
			if b.NodeDID == n.did {
				t.Fatalf("the superseded operator still lists the node: %+v", mine)
			}
		}
		h.wantState(first.id, "ACTIVE")
	})
}

func TestNodeReject(t *testing.T) {
	f := newBindFixture(t)
	h, op := f.h, f.op
	n, stranger := newNode(t, "n"), newNode(t, "stranger")
	s := h.drive(n, op, f.token, "bs-1", "PENDING_NODE_ACCEPTANCE")
	refusal := n.acceptance(t, s.pend, false, h.now())

	for _, sig := range []string{tamperSig(t, refusal.Acceptance.Signature), stranger.resignAcceptance(t, refusal).Acceptance.Signature, "x"} {
		bad := refusal
		bad.Acceptance.Signature = sig
		h.fails("POST", "/v1/node/bindings/bs-1/reject", bad, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		h.wantState(s.id, "PENDING_NODE_ACCEPTANCE")
	}
	h.fails("POST", "/v1/node/bindings/bs-1/reject", n.acceptance(t, s.pend, true, h.now()), "", http.StatusBadRequest, "BAD_REQUEST")
	h.wantState(s.id, "PENDING_NODE_ACCEPTANCE")

	var res api.StateResult
	h.ok("POST", "/v1/node/bindings/bs-1/reject", refusal, "", &res)
	if res != (api.StateResult{BindingSessionID: "bs-1", State: "REJECTED_BY_NODE"}) {
		t.Fatalf("answer %+v", res)
	}
	h.wantState(s.id, "REJECTED_BY_NODE")
	h.fails("POST", "/v1/node/bindings/bs-1/reject", refusal, "", http.StatusConflict, "BAD_STATE")
	h.fails("POST", "/v1/node/bindings/bs-1/accept", n.acceptance(t, s.pend, true, h.now()), "", http.StatusConflict, "BAD_STATE")
	var mine api.OperatorNodes
	h.ok("GET", "/v1/operator/me/nodes", nil, f.token, &mine)
	if mine.Count != 0 {
		t.Fatalf("a refused binding is listed: %+v", mine)
	}
}
