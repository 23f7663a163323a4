package registry_test

import (
	"net/http"
	"testing"
)

// TestNoProofIsNoSession: cancel, unbind and node reject with neither a bearer nor a body
// answer 401 NO_SESSION; an unknown id is 404 NOT_FOUND before any body is judged; a body
// that is there but malformed is still 400.
func TestNoProofIsNoSession(t *testing.T) {
	h, op, tok := newLoggedIn(t)
	h.strictAPI = true
	n := newNode(t, "n")
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	h.drive(n, op, tok, "bs-pending", "PENDING_NODE_ACCEPTANCE")
	for _, path := range []string{"/v1/bindings/bs-pending/cancel", "/v1/bindings/bs-pending/unbind", "/v1/node/bindings/bs-pending/reject"} {
		h.fails("POST", path, nil, "", http.StatusUnauthorized, "NO_SESSION")
		h.fails("POST", path, " \n", "", http.StatusUnauthorized, "NO_SESSION")
		h.fails("POST", path, "{bad", "", http.StatusBadRequest, "BAD_REQUEST")
	}
	for _, path := range []string{"/v1/bindings/nope/cancel", "/v1/bindings/nope/unbind"} {
		h.fails("POST", path, nil, "", http.StatusNotFound, "NOT_FOUND")
		h.fails("POST", path, "{bad", "", http.StatusNotFound, "NOT_FOUND")
		h.fails("POST", path, `{"node_did":7}`, "", http.StatusNotFound, "NOT_FOUND")
	}
	h.wantState("bs-pending", "PENDING_NODE_ACCEPTANCE")
}

// TestLiveClientBodies: the bodies the live network's clients send, a JSON challenge body and
// a registration with short_did, are answered as the OpenAPI document declares them.
func TestLiveClientBodies(t *testing.T) {
	h := newHarness(t)
	h.strictAPI = true
	h.ok("POST", "/v1/auth/challenge", map[string]string{"operator_did": "did:svrp:o:00000000"}, "", nil)
	n := newNode(t, "live")
	req := n.registration(t, "203.0.113.9:7000")
	body := toTree(t, req).withRaw(t, `"`+n.did+`"`, "short_did")
	h.ok("POST", "/api/v1/register", body, "", nil)
}
