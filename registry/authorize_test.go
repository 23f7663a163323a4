package registry_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
)

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
