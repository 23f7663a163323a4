package registry_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// Leaving and revoking (docs/protocol.md §10.4–10.7), over real HTTP on Badger.

// device returns another device of o's operator: the same root key vouches for a new device
// key, with its own revocation_id.
func (o operator) newDevice(t *testing.T, label, revocationID string) operator {
	t.Helper()
	dev := testkit.LabelKey(t, label+"/device")
	now := o.cred.IssuedAt
	cred := authn.DeviceCredential{DeviceCredential: o.cred.DeviceCredential}
	cred.CredentialID, cred.DeviceID = "cred-"+label, label
	cred.DevicePublicKey = pub(dev).Base58()
	cred.IssuedAt, cred.RevocationID = now, revocationID
	cred.Signature = sign(t, o.root, cred.DeviceCredential)
	return operator{root: o.root, device: dev, did: o.did, cred: cred}
}

// revocation is message 11 for o's operator, signed by signer (normally o.root).
func (o operator) revocation(t *testing.T, signer ed25519.PrivateKey, revocationID string, at time.Time) authn.SignedRevocation {
	m := canonical.Revocation{
		OperatorDID: o.did, OperatorRootPublicKey: o.cred.OperatorRootPublicKey,
		RevocationID: revocationID, RevokedAt: canonical.FormatTime(at),
	}
	return authn.SignedRevocation{Revocation: m, Signature: sign(t, signer, m)}
}

func (n node) unbindRequest(t *testing.T, id, did string, ts time.Time) api.NodeUnbindRequest {
	return api.NodeUnbindRequest{
		NodeDID: did, TS: ts.Unix(),
		Signature: sign(t, n.priv, canonical.Unbind{BindingSessionID: id, NodeDID: did, TS: ts.Unix()}),
	}
}

// boundIDs lists the binding session ids of an operator's bound nodes.
func (h *harness) boundIDs(token string) []string {
	h.t.Helper()
	var mine api.OperatorNodes
	h.ok("GET", "/v1/operator/me/nodes", nil, token, &mine)
	ids := []string{}
	for _, n := range mine.Nodes {
		ids = append(ids, n.BindingSessionID)
	}
	sort.Strings(ids)
	return ids
}

// wantUnbound checks the status of an ACTIVE session whose binding ended.
func (h *harness) wantUnbound(id, by string) api.Status {
	h.t.Helper()
	st := h.readStatus(id)
	if st.State != "ACTIVE" || st.Bound == nil || *st.Bound || st.UnboundBy == nil || *st.UnboundBy != by || st.UnboundAt == nil {
		raw, _ := json.Marshal(st)
		h.t.Fatalf("session %s: status %s, want ACTIVE, bound false, unbound_by %s", id, raw, by)
	}
	return st
}

func (h *harness) wantBound(id string) {
	h.t.Helper()
	st := h.readStatus(id)
	if st.State != "ACTIVE" || st.Bound == nil || !*st.Bound || st.UnboundBy != nil || st.UnboundAt != nil {
		raw, _ := json.Marshal(st)
		h.t.Fatalf("session %s: status %s, want ACTIVE and bound", id, raw)
	}
}

func TestLoseADevice(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")
	lost := op.newDevice(t, "phone", "rev-phone")
	kept := op.newDevice(t, "laptop2", "rev-laptop2")
	lostToken, keptToken := lost.login(h), kept.login(h)
	lostToken2 := lost.login(h)

	n1, n2 := newNode(t, "n1"), newNode(t, "n2")
	h.drive(n1, lost, lostToken, "bs-lost", "ACTIVE")
	h.drive(n2, kept, keptToken, "bs-kept", "ACTIVE")
	if got := h.boundIDs(keptToken); strings.Join(got, ",") != "bs-kept,bs-lost" {
		t.Fatalf("before: bound %v", got)
	}

	h.clock.Advance(time.Minute)
	first := h.now()
	var res api.RevokeResult
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "rev-phone", first), "", &res)
	if !res.OK || res.AlreadyRevoked || res.OperatorDID != op.did || res.RevocationID != "rev-phone" || res.RevokedAt != canonical.FormatTime(first) ||
		res.EndedSessions != 2 || len(res.EndedBindings) != 1 || res.EndedBindings[0].BindingSessionID != "bs-lost" {
		t.Fatalf("revoke answered %+v", res)
	}

	// The lost device's sessions die at once, everywhere.
	for _, tok := range []string{lostToken, lostToken2} {
		h.fails("GET", "/v1/operator/me/nodes", nil, tok, 401, "NO_SESSION")
		h.fails("POST", "/v1/auth/logout", nil, tok, 401, "NO_SESSION")
	}
	// Its login fails DC_REVOKED before the challenge is consumed: the same challenge then
	// logs the kept device in.
	ch := h.challenge()
	h.fails("POST", "/v1/auth/device-login", lost.loginRequest(t, ch, h.now()), "", 401, "DC_REVOKED")
	h.ok("POST", "/v1/auth/device-login", kept.loginRequest(t, ch, h.now()), "", nil)

	// The binding the lost device authorized is gone from the list; the other stays.
	if got := h.boundIDs(keptToken); strings.Join(got, ",") != "bs-kept" {
		t.Fatalf("after: bound %v", got)
	}
	h.wantUnbound("bs-lost", "revocation")
	h.wantBound("bs-kept")

	// Sent twice: 200, the first revoked_at, nothing more ended.
	h.clock.Advance(time.Hour)
	var again api.RevokeResult
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "rev-phone", h.now()), "", &again)
	if again.RevokedAt != canonical.FormatTime(first) || !again.AlreadyRevoked || again.EndedSessions != 0 || len(again.EndedBindings) != 0 {
		t.Fatalf("second revoke answered %+v, want revoked_at %s and nothing ended", again, canonical.FormatTime(first))
	}

	// A new device under the same root keeps working, binding included.
	fresh := op.newDevice(t, "phone2", "rev-phone2")
	freshToken := fresh.login(h)
	n3 := newNode(t, "n3")
	h.drive(n3, fresh, freshToken, "bs-fresh", "ACTIVE")
	h.wantBound("bs-fresh")

	// The revocation is durable.
	h = h.restart()
	ch = h.challenge()
	h.fails("POST", "/v1/auth/device-login", lost.loginRequest(t, ch, h.now()), "", 401, "DC_REVOKED")
	h.wantUnbound("bs-lost", "revocation")
}

func TestRevokedCredentialCannotAuthorize(t *testing.T) {
	h, op, token := newLoggedIn(t)
	n := newNode(t, "n")

	// A session waiting for the node when the device is revoked does not become a binding.
	f := h.drive(n, op, token, "bs-wait", "PENDING_NODE_ACCEPTANCE")
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, op.cred.RevocationID, h.now()), "", nil)
	h.fails("POST", "/v1/node/bindings/bs-wait/accept", n.acceptance(t, f.pend, true, h.now()), "", 401, "DC_REVOKED")
	h.wantState("bs-wait", "PENDING_NODE_ACCEPTANCE")

	// Authorize with the revoked credential, through another device's session: DC_REVOKED.
	other := op.newDevice(t, "other", "rev-other")
	otherToken := other.login(h)
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-2", h.now(), num(10), nil), "", &ini)
	var v api.ResolveView
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, otherToken, &v)
	h.fails("POST", "/v1/bindings/authorize", op.authorize(t, v, h.now(), num(5), nil), otherToken, 401, "DC_REVOKED")

	// An authorization revocation_id revoked in advance: AUTHZ_REVOKED.
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "authz-bs-2", h.now()), "", nil)
	h.fails("POST", "/v1/bindings/authorize", other.authorize(t, v, h.now(), num(5), nil), otherToken, 401, "AUTHZ_REVOKED")
	h.wantState("bs-2", "PENDING_OPERATOR")
}

func TestRevokeAuthorizationEndsItsBinding(t *testing.T) {
	h, op, token := newLoggedIn(t)
	n1, n2 := newNode(t, "n1"), newNode(t, "n2")
	h.drive(n1, op, token, "bs-1", "ACTIVE")
	h.drive(n2, op, token, "bs-2", "ACTIVE")
	var res api.RevokeResult
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "authz-bs-1", h.now()), "", &res)
	if res.EndedSessions != 0 || len(res.EndedBindings) != 1 || res.EndedBindings[0].NodeDID != n1.did {
		t.Fatalf("revoke answered %+v", res)
	}
	if got := h.boundIDs(token); strings.Join(got, ",") != "bs-2" {
		t.Fatalf("bound %v", got)
	}
	h.wantUnbound("bs-1", "revocation")
}

func TestRevocationChecks(t *testing.T) {
	h, op, token := newLoggedIn(t)
	stranger := newOperator(t, "stranger", h.now())
	n := newNode(t, "n")
	h.drive(n, op, token, "bs-1", "ACTIVE")
	valid := op.revocation(t, op.root, op.cred.RevocationID, h.now())

	edit := func(f func(b jsonTree)) []byte {
		b := toTree(t, valid)
		f(b)
		return b.encode(t, "")
	}
	rev := func(field string) []string { return []string{"revocation", field} }
	wrongRoot := op.revocation(t, stranger.root, op.cred.RevocationID, h.now())
	strangerOwn := stranger.revocation(t, stranger.root, op.cred.RevocationID, h.now())
	hexKey := op.revocation(t, op.root, "rev-hex", h.now())
	hexKey.Revocation.OperatorRootPublicKey = pub(op.root).Hex()
	hexKey.Signature = sign(t, op.root, hexKey.Revocation)

	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"not an object", `[]`, 400, "BAD_REQUEST"},
		{"no revocation", edit(func(b jsonTree) { b.del([]string{"revocation"}) }), 400, "BAD_REQUEST"},
		{"no signature", edit(func(b jsonTree) { b.del([]string{"signature"}) }), 400, "BAD_REQUEST"},
		{"revocation_id a number", edit(func(b jsonTree) { b.set(rev("revocation_id"), 7) }), 400, "BAD_REQUEST"},
		{"empty revocation_id", edit(func(b jsonTree) { b.set(rev("revocation_id"), "") }), 400, "BAD_REQUEST"},
		{"revocation_id of 257 bytes", edit(func(b jsonTree) { b.set(rev("revocation_id"), strings.Repeat("r", 257)) }), 400, "BAD_REQUEST"},
		{"revocation_id with LF", edit(func(b jsonTree) { b.set(rev("revocation_id"), "a\nb") }), 400, "BAD_REQUEST"},
		{"revoked_at with a fraction", edit(func(b jsonTree) { b.set(rev("revoked_at"), "2026-03-01T12:00:00.5Z") }), 400, "BAD_REQUEST"},
		{"revoked_at 6 s ahead", op.revocation(t, op.root, "r6", h.now().Add(6*time.Second)), 400, "BAD_REQUEST"},
		// Shape comes before id-binding: a bad DID with a bad revoked_at is BAD_REQUEST.
		{"shape before id-binding", edit(func(b jsonTree) { b.set(rev("operator_did"), "did:web:x"); b.set(rev("revoked_at"), "soon") }), 400, "BAD_REQUEST"},
		{"operator_did of another key", edit(func(b jsonTree) { b.set(rev("operator_did"), stranger.did) }), 401, "DC_ID_BINDING"},
		{"operator_did not a DID", edit(func(b jsonTree) { b.set(rev("operator_did"), "root") }), 401, "DC_ID_BINDING"},
		{"node DID", edit(func(b jsonTree) { b.set(rev("operator_did"), n.did) }), 401, "DC_ID_BINDING"},
		{"root key not 32 bytes", edit(func(b jsonTree) { b.set(rev("operator_root_public_key"), "abc") }), 401, "DC_ID_BINDING"},
		// id-binding comes before the signature.
		{"id-binding before signature", edit(func(b jsonTree) { b.set(rev("operator_did"), stranger.did); b["signature"] = "x" }), 401, "DC_ID_BINDING"},
		{"signed by another root", wrongRoot, 401, "DC_BAD_SIGNATURE"},
		{"signature not base58", edit(func(b jsonTree) { b["signature"] = "0OIl" }), 401, "DC_BAD_SIGNATURE"},
		{"signature over another id", edit(func(b jsonTree) { b.set(rev("revocation_id"), "rev-other") }), 401, "DC_BAD_SIGNATURE"},
		{"signature under another prefix", func() authn.SignedRevocation {
			r := valid
			r.Signature, _ = canonical.Sign(op.root, "libertynet", r.Revocation)
			return r
		}(), 401, "DC_BAD_SIGNATURE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := h.in(t)
			before := hostileSnapshot(t, h.st)
			h.fails("POST", "/v1/auth/revoke", c.body, "", c.status, c.code)
			hostileSameStore(t, c.name, before, hostileSnapshot(t, h.st))
		})
	}
	// Nothing above revoked anything: the session and the binding are intact.
	h.ok("GET", "/v1/operator/me/nodes", nil, token, nil)
	h.wantBound("bs-1")

	// A stranger's own root may revoke the stranger's credentials, never the operator's.
	h.ok("POST", "/v1/auth/revoke", strangerOwn, "", nil)
	h.fails("POST", "/v1/auth/revoke", edit(func(b jsonTree) { b.set(rev("operator_root_public_key"), stranger.cred.OperatorRootPublicKey) }), "", 401, "DC_ID_BINDING")
	h.wantBound("bs-1")
	// revoked_at 5 s ahead is within the skew; a hex root key is signed as given.
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "r5", h.now().Add(5*time.Second)), "", nil)
	h.ok("POST", "/v1/auth/revoke", hexKey, "", nil)
	h.wantBound("bs-1")
}

func TestRevocationBounds(t *testing.T) {
	h := newHarness(t, func(c *registry.Config) { c.Limits.RevokeAddressLimit = 2; c.Limits.MaxRevocations = 3 })
	op := newOperator(t, "op", h.now())
	other := newOperator(t, "other", h.now())
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "a", h.now()), "", nil)
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "b", h.now()), "", nil)
	before := hostileSnapshot(t, h.st)
	h.fails("POST", "/v1/auth/revoke", op.revocation(t, op.root, "c", h.now()), "", 429, "RATE_LIMITED")
	hostileSameStore(t, "over the address limit", before, hostileSnapshot(t, h.st))
	// A repeat adds nothing to the list and is never limited.
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "a", h.now()), "", nil)

	// The address window passes; the global cap still holds.
	h.clock.Advance(time.Hour)
	h.ok("POST", "/v1/auth/revoke", other.revocation(t, other.root, "c", h.now()), "", nil)
	h.fails("POST", "/v1/auth/revoke", other.revocation(t, other.root, "d", h.now()), "", 429, "RATE_LIMITED")
	h.ok("POST", "/v1/auth/revoke", other.revocation(t, other.root, "c", h.now()), "", nil)
}

func TestLogout(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now())
	token, other := op.login(h), op.login(h)
	status, raw := h.do("POST", "/v1/auth/logout", nil, token)
	if status != http.StatusOK || strings.TrimSpace(string(raw)) != `{"ok":true}` {
		t.Fatalf("logout: %d %s", status, raw)
	}
	h.fails("GET", "/v1/operator/me/nodes", nil, token, 401, "NO_SESSION")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ABCDEFGH"}, token, 401, "NO_SESSION")
	h.fails("POST", "/v1/auth/logout", nil, token, 401, "NO_SESSION")
	h.fails("POST", "/v1/auth/logout", nil, "", 401, "NO_SESSION")
	// Only that session ended.
	h.ok("GET", "/v1/operator/me/nodes", nil, other, nil)
	h.fails("GET", "/v1/auth/logout", nil, other, 405, "METHOD_NOT_ALLOWED")
	// An expired session stays SESSION_EXPIRED, as on every bearer endpoint.
	h.clock.Advance(authn.SessionTTL)
	h.fails("POST", "/v1/auth/logout", nil, other, 401, "SESSION_EXPIRED")
}

func TestUnbindByOperator(t *testing.T) {
	h, op, token := newLoggedIn(t)
	rival := newOperator(t, "rival", h.now(), "nodes.bind")
	rivalToken := rival.login(h)
	n := newNode(t, "n")
	h.drive(n, op, token, "bs-1", "ACTIVE")
	h.drive(newNode(t, "p"), op, token, "bs-pending", "PENDING_NODE_ACCEPTANCE")

	h.fails("POST", "/v1/bindings/nope/unbind", nil, token, 404, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/nope/unbind", nil, "not-a-token", 404, "NOT_FOUND") // unknown id first
	h.fails("POST", "/v1/bindings/bs-1/unbind", nil, "not-a-token", 401, "NO_SESSION")
	h.fails("POST", "/v1/bindings/bs-1/unbind", nil, rivalToken, 403, "PERMISSION_DENIED")
	h.fails("POST", "/v1/bindings/bs-pending/unbind", nil, rivalToken, 403, "PERMISSION_DENIED") // caller before state
	h.fails("POST", "/v1/bindings/bs-pending/unbind", nil, token, 409, "BAD_STATE")
	h.fails("GET", "/v1/bindings/bs-1/unbind", nil, token, 405, "METHOD_NOT_ALLOWED")
	h.wantBound("bs-1")

	h.clock.Advance(time.Minute)
	var res api.UnbindResult
	h.ok("POST", "/v1/bindings/bs-1/unbind", `{"anything":1}`, token, &res)
	if res.LogIndex == nil {
		t.Error("the answer carries no log_index")
	}
	res.LogIndex = nil
	want := api.UnbindResult{BindingSessionID: "bs-1", State: "ACTIVE", Bound: false, UnboundAt: canonical.FormatTime(h.now()), UnboundBy: "operator"}
	if res != want {
		t.Fatalf("unbind answered %+v, want %+v", res, want)
	}
	if got := h.boundIDs(token); len(got) != 0 {
		t.Fatalf("still bound: %v", got)
	}
	st := h.wantUnbound("bs-1", "operator")
	if *st.UnboundAt != res.UnboundAt {
		t.Fatalf("status unbound_at %s, unbind said %s", *st.UnboundAt, res.UnboundAt)
	}
	h.fails("POST", "/v1/bindings/bs-1/unbind", nil, token, 409, "BAD_STATE")
	h.fails("POST", "/v1/bindings/bs-1/unbind", n.unbindRequest(t, "bs-1", n.did, h.now()), "", 409, "BAD_STATE")
	// The session stays ACTIVE: its history does not move.
	h.wantState("bs-1", "ACTIVE")
	// The node may bind again, to anyone.
	h.drive(n, rival, rivalToken, "bs-2", "ACTIVE")
	h.wantBound("bs-2")
	h.wantUnbound("bs-1", "operator")
}

func TestUnbindByNode(t *testing.T) {
	h, op, token := newLoggedIn(t)
	n, stranger := newNode(t, "n"), newNode(t, "stranger")
	h.drive(n, op, token, "bs-1", "ACTIVE")
	h.drive(newNode(t, "p"), op, token, "bs-init", "INITIATED")
	now := h.now()
	badSig := n.unbindRequest(t, "bs-1", n.did, now)
	badSig.Signature = tamperSig(t, badSig.Signature)
	otherID := n.unbindRequest(t, "bs-2", n.did, now)
	cases := []struct {
		name   string
		id     string
		body   any
		status int
		code   string
	}{
		{"no body", "bs-1", nil, 401, "NO_SESSION"},
		{"ts a string", "bs-1", `{"node_did":"` + n.did + `","ts":"1","signature":"x"}`, 400, "BAD_REQUEST"},
		{"unknown id", "nope", n.unbindRequest(t, "nope", n.did, now), 404, "NOT_FOUND"},
		{"not a did:svrp DID", "bs-1", n.unbindRequest(t, "bs-1", "did:web:n", now), 401, "ID_BINDING_REQUIRED"},
		{"operator DID", "bs-1", n.unbindRequest(t, "bs-1", op.did, now), 401, "ID_BINDING_FAILED"},
		{"another node", "bs-1", stranger.unbindRequest(t, "bs-1", stranger.did, now), 403, "PERMISSION_DENIED"},
		{"stale ts", "bs-1", n.unbindRequest(t, "bs-1", n.did, now.Add(-301*time.Second)), 401, "STALE_TS"},
		{"bad signature", "bs-1", badSig, 401, "BAD_SIGNATURE"},
		{"signed for another session", "bs-1", otherID, 401, "BAD_SIGNATURE"},
		{"signed as a cancel", "bs-1", n.cancelRequest(t, "bs-1", n.did, now), 401, "BAD_SIGNATURE"},
		{"state checked last", "bs-init", newNode(t, "p").unbindRequest(t, "bs-init", newNode(t, "p").did, now), 409, "BAD_STATE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := h.in(t)
			before := hostileSnapshot(t, h.st)
			h.fails("POST", "/v1/bindings/"+c.id+"/unbind", c.body, "", c.status, c.code)
			hostileSameStore(t, c.name, before, hostileSnapshot(t, h.st))
		})
	}
	h.wantBound("bs-1")
	var res api.UnbindResult
	h.ok("POST", "/v1/bindings/bs-1/unbind", n.unbindRequest(t, "bs-1", n.fullDID(), now), "", &res)
	if res.Bound || res.UnboundBy != "node" || res.State != "ACTIVE" {
		t.Fatalf("unbind answered %+v", res)
	}
	if got := h.boundIDs(token); len(got) != 0 {
		t.Fatalf("still bound: %v", got)
	}
	h.wantUnbound("bs-1", "node")
	h.fails("POST", "/v1/bindings/bs-1/unbind", n.unbindRequest(t, "bs-1", n.did, now), "", 409, "BAD_STATE")
}

func TestSupersededStatus(t *testing.T) {
	h, a, ta := newLoggedIn(t)
	b := newOperator(t, "b", h.now(), "nodes.bind")
	tb := b.login(h)
	n := newNode(t, "n")
	h.drive(n, a, ta, "bs-a", "ACTIVE")
	h.wantBound("bs-a")
	h.clock.Advance(time.Minute)
	h.drive(n, b, tb, "bs-b", "ACTIVE")
	st := h.wantUnbound("bs-a", "superseded")
	if *st.UnboundAt != canonical.FormatTime(h.now()) {
		t.Fatalf("superseded at %s, want %s", *st.UnboundAt, canonical.FormatTime(h.now()))
	}
	h.wantBound("bs-b")
	// The older operator cannot end the newer binding through its old session.
	h.fails("POST", "/v1/bindings/bs-a/unbind", nil, ta, 409, "BAD_STATE")
	h.wantBound("bs-b")
	// A later revocation of the older credential does not rewrite the superseded mark.
	h.ok("POST", "/v1/auth/revoke", a.revocation(t, a.root, a.cred.RevocationID, h.now()), "", nil)
	h.wantUnbound("bs-a", "superseded")
	// Sessions that are not ACTIVE carry no bound field.
	h.drive(newNode(t, "m"), b, tb, "bs-i", "INITIATED")
	if st := h.readStatus("bs-i"); st.Bound != nil || st.UnboundBy != nil {
		t.Fatalf("INITIATED session with bound fields: %+v", st)
	}
}

// TestEndedSessionsFreeTheBearerCap: sessions that a logout or a revocation ends no longer
// count against the global cap of bearer sessions; while every session is in use, another
// operator's login waits, and the operator who holds them logs in again by ending its own
// least recently used one.
func TestEndedSessionsFreeTheBearerCap(t *testing.T) {
	h := newHarness(t, func(c *registry.Config) { c.Limits.MaxBearerSessions = 2 })
	op := newOperator(t, "op", h.now(), "nodes.bind")
	other := newOperator(t, "other", h.now(), "nodes.bind")
	phone := op.newDevice(t, "phone", "rev-phone")
	first := op.login(h)
	phone.login(h)
	h.fails("POST", "/v1/auth/device-login", other.loginRequest(t, h.challenge(), h.now()), "", http.StatusTooManyRequests, "RATE_LIMITED")

	h.ok("POST", "/v1/auth/logout", nil, first, nil)
	second := other.login(h)
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "rev-phone", h.now()), "", nil)
	third := op.login(h)
	h.fails("POST", "/v1/auth/device-login", newOperator(t, "third", h.now(), "nodes.bind").loginRequest(t, h.challenge(), h.now()), "", http.StatusTooManyRequests, "RATE_LIMITED")
	// op logs in again: its own session, not other's, gives up its place.
	op.login(h)
	h.ok("GET", "/v1/operator/me/credits", nil, second, nil)
	h.fails("GET", "/v1/operator/me/credits", nil, third, http.StatusUnauthorized, "NO_SESSION")
}

// BenchmarkRevoke times one new revocation on Badger while the registry holds many bearer
// sessions of other operators: a revocation finds its operator's sessions through the
// store's operator index, so its cost must not grow with the session table.
func BenchmarkRevoke(b *testing.B) {
	for _, sessions := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			st, err := badger.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			svc, err := registry.New(registry.Config{Store: st, Clock: func() time.Time { return epoch }, Limits: limits.Limits{RevokeAddressLimit: 1 << 30, RevocationsPerRoot: 1 << 30, RevocationsPerBlock: 1 << 30}})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < sessions; i += 1000 {
				err := st.Update(context.Background(), func(tx store.Tx) error {
					for j := i; j < i+1000 && j < sessions; j++ {
						s := authn.NewBearerSession(fmt.Sprintf("did:svrp:o:%08x", j), epoch)
						s.RevocationID = "rev"
						if err := tx.PutBearerSession(sha256.Sum256([]byte(fmt.Sprint(j))), s); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			root := testkit.TextKey("bench root")
			revs := make([]authn.SignedRevocation, b.N)
			for i := range revs {
				if revs[i], err = authn.SignRevocation(root, canonical.DefaultPrefix, "", "", fmt.Sprintf("rev-%d", i), epoch); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range revs {
				if _, err := svc.Revoke(context.Background(), revs[i], "192.0.2.1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A bound node unseen for longer than --bound-node-expiry loses its binding at the sweep: it
// leaves its operator's view, its session's status says node_unseen, and its record, unseen
// for the node expiry too, goes in the same sweep. A bound node that heartbeats keeps its
// binding, and the node that went unseen registers and binds again when it comes back.
func TestUnseenBoundNode(t *testing.T) {
	h, op, _ := newLoggedIn(t)
	gone, kept := newNode(t, "gone"), newNode(t, "kept")
	h.ok("POST", "/api/v1/register", gone.registration(t, "203.0.113.7:7000"), "", nil)
	h.ok("POST", "/api/v1/register", kept.registration(t, "203.0.113.8:7000"), "", nil)
	token := op.login(h)
	h.drive(gone, op, token, "bs-gone", "ACTIVE")
	h.drive(kept, op, token, "bs-kept", "ACTIVE")
	sweep := func() {
		t.Helper()
		if err := h.svc.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	// Day 29: both are still bound; only one of them heartbeats.
	h.clock.Advance(29 * 24 * time.Hour)
	h.ok("POST", "/api/v1/heartbeat", kept.heartbeat(t, kept.did, h.now()), "", nil)
	sweep()
	token = op.login(h)
	if got := strings.Join(h.boundIDs(token), ","); got != "bs-gone,bs-kept" {
		t.Fatalf("bound after 29 days: %s", got)
	}
	h.wantBound("bs-gone")

	// Day 31: the node unseen since day 0 is not bound any more, nor listed.
	h.clock.Advance(2 * 24 * time.Hour)
	sweep()
	token = op.login(h)
	if got := strings.Join(h.boundIDs(token), ","); got != "bs-kept" {
		t.Fatalf("bound after 31 days: %s", got)
	}
	h.wantBound("bs-kept")
	if st := h.wantUnbound("bs-gone", "node_unseen"); *st.UnboundAt != canonical.FormatTime(h.now()) {
		t.Fatalf("unbound at %s, want %s", *st.UnboundAt, canonical.FormatTime(h.now()))
	}
	if listed := h.listedNodes(); len(listed) != 1 || listed[0].DID != kept.did {
		t.Fatalf("listed after 31 days: %+v", listed)
	}
	h.fails("POST", "/api/v1/heartbeat", gone.heartbeat(t, gone.did, h.now()), "", 404, "UNKNOWN_DID")
	h.fails("POST", "/v1/bindings/bs-gone/unbind", nil, token, 409, "BAD_STATE")

	// It comes back: it registers and is bound again; the old session keeps its mark.
	h.ok("POST", "/api/v1/register", gone.registration(t, "203.0.113.7:7000"), "", nil)
	h.drive(gone, op, token, "bs-back", "ACTIVE")
	h.wantBound("bs-back")
	h.wantUnbound("bs-gone", "node_unseen")
}
