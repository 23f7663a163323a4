package registry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
)

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
