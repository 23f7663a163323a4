package registry_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
)

// rootOperator is an operator of a given root key, under the DID form given.
func rootOperator(t *testing.T, root ed25519.PrivateKey, label string, form didkey.Form, now time.Time) operator {
	t.Helper()
	device := testkit.LabelKey(t, label+"/device")
	d, err := didkey.OperatorDID(pub(root), form)
	if err != nil {
		t.Fatal(err)
	}
	cred := authn.DeviceCredential{DeviceCredential: canonical.DeviceCredential{
		CredentialID: "cred-" + label, OperatorDID: d.String(), OperatorRootPublicKey: pub(root).Base58(),
		DeviceID: "laptop", DevicePublicKey: pub(device).Base58(), Permissions: []string{"nodes.bind"},
		IssuedAt: canonical.FormatTime(now.Add(-time.Hour)), ExpiresAt: canonical.FormatTime(now.Add(365 * 24 * time.Hour)),
		RevocationID: "rev-shared",
	}}
	cred.Signature = sign(t, root, cred.DeviceCredential)
	return operator{root: root, device: device, did: d.String(), cred: cred}
}

// TestOperatorPinning: two root keys whose short operator DIDs agree (docs/protocol.md §10.8).
// The first to log in holds the short DID; the other is DID_COLLISION there, after the root
// signature and before the challenge, and with its 10-hex DID shares nothing with the first.
func TestOperatorPinning(t *testing.T) {
	h := newHarness(t)
	rootA, rootB := testkit.CollisionRoots(t)
	a := rootOperator(t, rootA, "a", didkey.FormShort, h.now())
	bShort := rootOperator(t, rootB, "b-short", didkey.FormShort, h.now())
	b := rootOperator(t, rootB, "b", didkey.FormFallback, h.now())
	if a.did != bShort.did || a.did == b.did {
		t.Fatalf("the pair does not collide: %s, %s, %s", a.did, bShort.did, b.did)
	}
	tokenA := a.login(h)

	// B under A's short DID: DID_COLLISION, and the challenge it sent is still good.
	ch := h.challenge()
	body := h.fails("POST", "/v1/auth/device-login", bShort.loginRequest(t, ch, h.now()), "", 409, "DID_COLLISION")
	if !strings.Contains(string(body), "10-hex") {
		t.Errorf("DID_COLLISION answer %s does not point to the 10-hex form", body)
	}
	h.ok("POST", "/v1/auth/device-login", a.loginRequest(t, ch, h.now()), "", nil)
	// A bad root signature is still DC_BAD_SIGNATURE: the pin is decided after it.
	forged := bShort
	forged.cred.Signature = tamperSig(t, forged.cred.Signature)
	ch = h.challenge()
	h.fails("POST", "/v1/auth/device-login", forged.loginRequest(t, ch, h.now()), "", 401, "DC_BAD_SIGNATURE")

	// A binds a node. B, with its 10-hex DID, logs in and shares none of it.
	n := newNode(t, "node-a")
	h.drive(n, a, tokenA, "bs-a", "ACTIVE")
	tokenB := b.login(h)
	if got := h.boundIDs(tokenB); len(got) != 0 {
		t.Errorf("B sees A's nodes: %v", got)
	}
	h.fails("POST", "/v1/bindings/bs-a/unbind", nil, tokenB, 403, "PERMISSION_DENIED")

	// B revokes its own "rev-shared" (A's credential carries the same id): A is untouched.
	var res api.RevokeResult
	h.ok("POST", "/v1/auth/revoke", b.revocation(t, rootB, "rev-shared", h.now()), "", &res)
	if res.AlreadyRevoked || res.EndedSessions != 1 || len(res.EndedBindings) != 0 {
		t.Errorf("B's revocation answered %+v; want B's one session ended and nothing of A's", res)
	}
	if got := h.boundIDs(tokenA); strings.Join(got, ",") != "bs-a" {
		t.Errorf("A's nodes after B's revocation: %v", got)
	}
	a.login(h)
	ch = h.challenge()
	h.fails("POST", "/v1/auth/device-login", b.loginRequest(t, ch, h.now()), "", 401, "DC_REVOKED")

	// A revocation by B under A's short DID is DID_COLLISION and changes nothing.
	h.fails("POST", "/v1/auth/revoke", bShort.revocation(t, rootB, "rev-other", h.now()), "", 409, "DID_COLLISION")
	h.fails("POST", "/v1/auth/revoke", bShort.revocation(t, rootB, "rev-shared", h.now()), "", 409, "DID_COLLISION")
	a.login(h)

	// Revocations are keyed by root key: A revoking under its 10-hex DID revokes the
	// credential it issued under its short one.
	aLong := rootOperator(t, rootA, "a-long", didkey.FormFallback, h.now())
	h.ok("POST", "/v1/auth/revoke", aLong.revocation(t, rootA, "rev-shared", h.now()), "", &res)
	if res.EndedSessions != 4 || len(res.EndedBindings) != 1 {
		t.Errorf("A's revocation under its 10-hex DID answered %+v; want A's four sessions and one binding ended", res)
	}
	ch = h.challenge()
	h.fails("POST", "/v1/auth/device-login", a.loginRequest(t, ch, h.now()), "", 401, "DC_REVOKED")
}

// TestOperatorPinByRevocation: a revocation pins the DID as a login does, so a colliding root
// key that revoked first holds the short DID, and the other's login is DID_COLLISION.
func TestOperatorPinByRevocation(t *testing.T) {
	h := newHarness(t)
	rootA, rootB := testkit.CollisionRoots(t)
	a := rootOperator(t, rootA, "a", didkey.FormShort, h.now())
	bShort := rootOperator(t, rootB, "b-short", didkey.FormShort, h.now())
	h.ok("POST", "/v1/auth/revoke", bShort.revocation(t, rootB, "rev-early", h.now()), "", nil)
	ch := h.challenge()
	h.fails("POST", "/v1/auth/device-login", a.loginRequest(t, ch, h.now()), "", 409, "DID_COLLISION")
	h.fails("POST", "/v1/auth/revoke", a.revocation(t, rootA, "rev-early", h.now()), "", 409, "DID_COLLISION")
	aLong := rootOperator(t, rootA, "a-long", didkey.FormFallback, h.now())
	aLong.login(h)
}
