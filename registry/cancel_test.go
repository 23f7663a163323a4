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

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
)

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
