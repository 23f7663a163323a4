package registry_test

import (
	"context"
	"crypto/ed25519"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/sigverify"
	"github.com/svrp/svrp/store"
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

// TestOperatorPinSquatting: a revocation pins nothing (docs/protocol.md §10.8). A root key B
// whose short DID is also root key A's revokes under it before A's first login here: the
// revocation is recorded, and A still logs in and then holds the short DID. B's revocation
// still revokes B's own credentials of that revocation_id under its 10-hex DID, and never A's.
func TestOperatorPinSquatting(t *testing.T) {
	h := newHarness(t)
	rootA, rootB := testkit.CollisionRoots(t)
	a := rootOperator(t, rootA, "a", didkey.FormShort, h.now())
	aLong := rootOperator(t, rootA, "a-long", didkey.FormFallback, h.now())
	bShort := rootOperator(t, rootB, "b-short", didkey.FormShort, h.now())
	b := rootOperator(t, rootB, "b", didkey.FormFallback, h.now())
	names := map[didkey.PublicKey]string{pub(rootA): "A", pub(rootB): "B"}

	var res api.RevokeResult
	h.ok("POST", "/v1/auth/revoke", bShort.revocation(t, rootB, "rev-shared", h.now()), "", &res)
	if res.AlreadyRevoked {
		t.Fatalf("the squatter's revocation answered %+v", res)
	}
	if got := pinsOf(t, h, names); len(got) != 0 {
		t.Errorf("pins after a revocation: %v, want none", got)
	}
	tokenA := a.login(h) // A's credential carries the same revocation_id as B's revocation
	if got, want := pinsOf(t, h, names), map[string]string{pub(rootA).ShortBody(): "A+login"}; !maps.Equal(got, want) {
		t.Errorf("pins after the victim's login: %v, want %v", got, want)
	}

	// The pin A's login made now refuses B under the short DID, login and revocation alike.
	h.fails("POST", "/v1/auth/device-login", bShort.loginRequest(t, h.challenge(), h.now()), "", 409, "DID_COLLISION")
	h.fails("POST", "/v1/auth/revoke", bShort.revocation(t, rootB, "rev-other", h.now()), "", 409, "DID_COLLISION")
	// B's revocation is B's: it revokes B's credential of that id under B's 10-hex DID.
	h.fails("POST", "/v1/auth/device-login", b.loginRequest(t, h.challenge(), h.now()), "", 401, "DC_REVOKED")

	// A's revocation of the same id under the short DID would take the place of B's, which
	// still revokes B's credentials: DID_COLLISION. Under A's 10-hex DID it is recorded and
	// revokes A's credential of the short DID.
	h.fails("POST", "/v1/auth/revoke", a.revocation(t, rootA, "rev-shared", h.now()), "", 409, "DID_COLLISION")
	h.ok("POST", "/v1/auth/revoke", aLong.revocation(t, rootA, "rev-shared", h.now()), "", &res)
	if res.AlreadyRevoked || res.EndedSessions != 1 {
		t.Errorf("A's revocation under its 10-hex DID answered %+v; want A's one session ended", res)
	}
	h.fails("GET", "/v1/operator/me/nodes", nil, tokenA, 401, "NO_SESSION")
	h.fails("POST", "/v1/auth/device-login", a.loginRequest(t, h.challenge(), h.now()), "", 401, "DC_REVOKED")
	h.fails("POST", "/v1/auth/device-login", b.loginRequest(t, h.challenge(), h.now()), "", 401, "DC_REVOKED")
}

// TestOperatorPinWrittenByRevocation: a store may hold a record a revocation wrote when
// revocations pinned, naming the squatter's root key with no login. It pins nothing: the
// victim logs in and takes the body over.
func TestOperatorPinWrittenByRevocation(t *testing.T) {
	h := newHarness(t)
	rootA, rootB := testkit.CollisionRoots(t)
	a := rootOperator(t, rootA, "a", didkey.FormShort, h.now())
	if err := h.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.PutOperatorPin(store.OperatorPin{Body: pub(rootB).ShortBody(), RootKey: pub(rootB), PinnedAt: h.now(), Revocations: 1})
	}); err != nil {
		t.Fatal(err)
	}
	a.login(h)
	if got, want := pinsOf(t, h, map[didkey.PublicKey]string{pub(rootA): "A", pub(rootB): "B"}), map[string]string{pub(rootA).ShortBody(): "A+login"}; !maps.Equal(got, want) {
		t.Errorf("pins after the victim's login: %v, want %v", got, want)
	}
}

// TestRevokedUnderEitherSpelling: revocations are matched by root key and revocation_id
// (docs/protocol.md §10.8). A revocation made under one spelling of an operator DID (8-hex
// short, 10-hex fallback) refuses a credential of the same root key and revocation_id under
// the other, at login, at authorize and at accept, whether or not a login pinned either
// spelling first.
func TestRevokedUnderEitherSpelling(t *testing.T) {
	forms := map[string]didkey.Form{"short": didkey.FormShort, "10-hex": didkey.FormFallback}
	for _, tt := range []struct{ revokeUnder, credUnder string }{
		{"short", "10-hex"}, {"10-hex", "short"}, {"short", "short"}, {"10-hex", "10-hex"},
	} {
		t.Run("revoked under "+tt.revokeUnder+", credential under "+tt.credUnder, func(t *testing.T) {
			h := newHarness(t)
			root := testkit.LabelKey(t, "spellings/root")
			revoker := rootOperator(t, root, "revoker", forms[tt.revokeUnder], h.now())
			user := rootOperator(t, root, "user", forms[tt.credUnder], h.now())
			spare := user.newDevice(t, "spare", "rev-spare")
			n := newNode(t, "n")

			// Revoked before any login here: no spelling is pinned.
			h.ok("POST", "/v1/auth/revoke", revoker.revocation(t, root, user.cred.RevocationID, h.now()), "", nil)
			h.fails("POST", "/v1/auth/device-login", user.loginRequest(t, h.challenge(), h.now()), "", 401, "DC_REVOKED")
			var res api.RevokeResult
			h.ok("POST", "/v1/auth/revoke", user.revocation(t, root, user.cred.RevocationID, h.now()), "", &res)
			if !res.AlreadyRevoked {
				t.Errorf("the same revocation under the credential's spelling answered %+v, want already revoked", res)
			}

			// Authorize, by a device of the same root key logged in under the credential's
			// spelling: the revoked credential is DC_REVOKED, a revoked authorization
			// AUTHZ_REVOKED, and the session stays as it was.
			token := spare.login(h)
			s := h.drive(n, spare, token, "bs-1", "PENDING_OPERATOR")
			h.fails("POST", "/v1/bindings/authorize", user.authorize(t, s.view, h.now(), num(5), nil), token, 401, "DC_REVOKED")
			h.ok("POST", "/v1/auth/revoke", revoker.revocation(t, root, "authz-bs-1", h.now()), "", nil)
			h.fails("POST", "/v1/bindings/authorize", spare.authorize(t, s.view, h.now(), num(5), nil), token, 401, "AUTHZ_REVOKED")
			h.wantState("bs-1", "PENDING_OPERATOR")

			// Accept, of a session authorized before the revocation: DC_REVOKED, and the
			// revocation ended the spare's session under the other spelling.
			w := h.drive(newNode(t, "n2"), spare, token, "bs-2", "PENDING_NODE_ACCEPTANCE")
			h.ok("POST", "/v1/auth/revoke", revoker.revocation(t, root, "rev-spare", h.now()), "", &res)
			if res.EndedSessions != 1 {
				t.Errorf("the spare's revocation answered %+v, want its one session ended", res)
			}
			h.fails("POST", "/v1/node/bindings/bs-2/accept", newNode(t, "n2").acceptance(t, w.pend, true, h.now()), "", 401, "DC_REVOKED")
			h.wantState("bs-2", "PENDING_NODE_ACCEPTANCE")
			h.fails("POST", "/v1/auth/device-login", spare.loginRequest(t, h.challenge(), h.now()), "", 401, "DC_REVOKED")
		})
	}
}

// TestOperatorPinLoginOrder: the place of the pin in a login (docs/protocol.md §10.8), by a
// root key B whose short DID is also root key A's. The pin is decided after the root
// signature (step 3 of §5.2) and before the credential's window (step 4), the revocation and
// the challenge; a login that passed step 3 pins the DID to its root key however it ends,
// and one that failed at steps 1–3 pins nothing.
func TestOperatorPinLoginOrder(t *testing.T) {
	rootA, rootB := testkit.CollisionRoots(t)
	type login struct {
		h    *harness
		b    operator // B under the short DID, the one that logs in
		cred authn.DeviceCredential
		ch   string
	}
	expire := func(l *login) {
		l.cred.IssuedAt = canonical.FormatTime(l.h.now().Add(-2 * time.Hour))
		l.cred.ExpiresAt = canonical.FormatTime(l.h.now().Add(-time.Hour))
		l.cred = l.b.signCred(t, l.cred)
	}
	for _, tt := range []struct {
		name   string
		pinA   bool         // A has logged in under the short DID first
		revoke bool         // B's credential is on the revocation list, under a DID not pinned
		edit   func(*login) // how B's login is broken
		status int          // what B's login gets
		code   string       // "" for success
		pinned string       // whose root key the short DID is pinned to afterwards ("A", "B"), "+login" when it logged in
		burnt  bool         // the challenge B sent is used up
	}{
		{name: "1-shape", edit: func(l *login) {
			l.cred.CredentialID = ""
			l.cred = l.b.signCred(t, l.cred)
		}, status: 400, code: "BAD_REQUEST"},
		{name: "2-id-binding", edit: func(l *login) {
			l.cred.OperatorDID = rootOperator(t, rootA, "a-long", didkey.FormFallback, l.h.now()).did
			l.cred = l.b.signCred(t, l.cred)
		}, status: 401, code: "DC_ID_BINDING"},
		{name: "3-root-signature", edit: func(l *login) { l.cred.Signature = tamperSig(t, l.cred.Signature) }, status: 401, code: "DC_BAD_SIGNATURE"},
		{name: "3-root-signature-before-pin", pinA: true, edit: func(l *login) { l.cred.Signature = tamperSig(t, l.cred.Signature) },
			status: 401, code: "DC_BAD_SIGNATURE", pinned: "A+login"},
		{name: "3-root-signature-of-expired", edit: func(l *login) {
			expire(l)
			l.cred.Signature = tamperSig(t, l.cred.Signature)
		}, status: 401, code: "DC_BAD_SIGNATURE"},
		{name: "pin", pinA: true, status: 409, code: "DID_COLLISION", pinned: "A+login"},
		{name: "pin-before-window", pinA: true, edit: expire, status: 409, code: "DID_COLLISION", pinned: "A+login"},
		{name: "pin-before-revocation", pinA: true, revoke: true, status: 409, code: "DID_COLLISION", pinned: "A+login"},
		{name: "4-expired-pins", edit: expire, status: 401, code: "DC_EXPIRED", pinned: "B"},
		{name: "4-not-yet-valid-pins", edit: func(l *login) {
			l.cred.IssuedAt = canonical.FormatTime(l.h.now().Add(time.Hour))
			l.cred = l.b.signCred(t, l.cred)
		}, status: 401, code: "DC_EXPIRED", pinned: "B"},
		{name: "4-window-before-revocation", revoke: true, edit: expire, status: 401, code: "DC_EXPIRED", pinned: "B"},
		{name: "revoked-pins", revoke: true, status: 401, code: "DC_REVOKED", pinned: "B"},
		{name: "5-challenge-pins", edit: func(l *login) { l.ch = "not-a-challenge" }, status: 401, code: "BAD_CHALLENGE", pinned: "B"},
		{name: "6-login-signature-pins", edit: func(l *login) { l.b.device = testkit.LabelKey(t, "stranger") }, status: 401, code: "BAD_SIGNATURE", pinned: "B", burnt: true},
		{name: "success-pins", status: 200, pinned: "B+login", burnt: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			a := rootOperator(t, rootA, "a", didkey.FormShort, h.now())
			b := rootOperator(t, rootB, "b", didkey.FormShort, h.now())
			if tt.pinA {
				a.login(h)
			}
			if tt.revoke {
				// A revocation under a DID no root key holds yet: one recorded before the
				// registry pinned, as its store may hold.
				rv := b.revocation(t, rootB, b.cred.RevocationID, h.now())
				if err := h.st.Update(context.Background(), func(tx store.Tx) error {
					return tx.PutRevocation(store.Revocation{
						OperatorDID: b.did, RevocationID: b.cred.RevocationID, RevokedAt: h.now(),
						RootPublicKey: b.cred.OperatorRootPublicKey, Signature: rv.Signature, RecordedAt: h.now(),
					})
				}); err != nil {
					t.Fatal(err)
				}
			}
			l := login{h: h, b: b, cred: b.cred, ch: h.challenge()}
			if tt.edit != nil {
				tt.edit(&l)
			}
			req := l.b.loginWith(t, l.cred, l.ch, h.now())
			if tt.code == "" {
				h.ok("POST", "/v1/auth/device-login", req, "", nil)
			} else {
				h.fails("POST", "/v1/auth/device-login", req, "", tt.status, tt.code)
			}

			want := map[string]string{}
			if tt.pinned != "" {
				want[pub(rootA).ShortBody()] = tt.pinned
			}
			if got := pinsOf(t, h, map[didkey.PublicKey]string{pub(rootA): "A", pub(rootB): "B"}); !maps.Equal(got, want) {
				t.Errorf("pins after the login: %v, want %v", got, want)
			}
			if tt.code != "BAD_CHALLENGE" {
				// Another operator may still use the challenge unless the login burnt it.
				other := newOperator(t, "other", h.now())
				h.challengeLogin(other, l.ch, tt.burnt)
			}
			// What the pin now decides: A under the short DID.
			if strings.HasPrefix(tt.pinned, "B") {
				h.fails("POST", "/v1/auth/device-login", a.loginRequest(t, h.challenge(), h.now()), "", 409, "DID_COLLISION")
			} else {
				a.login(h)
			}
		})
	}
}

// pinsOf returns the operator pins of h's store: for each pinned DID body, the name in names
// of its root key (records that pin nothing left out), with "+login" when the pin records that the root key logged in.
func pinsOf(t *testing.T, h *harness, names map[didkey.PublicKey]string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := h.st.View(context.Background(), func(tx store.Tx) error {
		return tx.EachOperatorPin(func(p store.OperatorPin) error {
			if !p.Pins() {
				return nil
			}
			got[p.Body] = names[p.RootKey]
			if p.LoggedIn() {
				got[p.Body] += "+login"
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestOperatorPinAuthorize: authorize asks the pin of its DeviceCredential's DID as login
// does (docs/protocol.md §10.8), after the credential's root signature and before its window,
// and pins nothing: a credential of root key B under A's short DID, sent with A's bearer, is
// DID_COLLISION and leaves the session as it was.
func TestOperatorPinAuthorize(t *testing.T) {
	h := newHarness(t)
	rootA, rootB := testkit.CollisionRoots(t)
	a := rootOperator(t, rootA, "a", didkey.FormShort, h.now())
	b := rootOperator(t, rootB, "b", didkey.FormShort, h.now())
	tokenA := a.login(h)
	s := h.drive(newNode(t, "n"), a, tokenA, "bs-1", "PENDING_OPERATOR")
	expired := b
	expired.cred.IssuedAt = canonical.FormatTime(h.now().Add(-2 * time.Hour))
	expired.cred.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
	expired.cred = expired.signCred(t, expired.cred)
	forged := expired
	forged.cred.Signature = tamperSig(t, forged.cred.Signature)
	for _, tt := range []struct {
		name   string
		by     operator
		status int
		code   string
	}{
		{"pinned to another root key", b, 409, "DID_COLLISION"},
		{"pin before window", expired, 409, "DID_COLLISION"},
		{"root signature before pin", forged, 401, "DC_BAD_SIGNATURE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.in(t).fails("POST", "/v1/bindings/authorize", tt.by.authorize(t, s.view, h.now(), num(5), num(50)), tokenA, tt.status, tt.code)
		})
	}
	h.wantState(s.id, "PENDING_OPERATOR")
	h.ok("POST", "/v1/bindings/authorize", a.authorize(t, s.view, h.now(), num(5), num(50)), tokenA, nil)
}

// countingVerifier counts the signatures verified through it.
type countingVerifier struct{ n atomic.Int64 }

func (c *countingVerifier) Verify(pub, msg, sig []byte) bool {
	c.n.Add(1)
	return sigverify.Verify(pub, msg, sig)
}

// TestLoginVerifiesOnce: a login verifies each of its signatures once, however often its
// checks run — a registry on a shared store runs them twice, the second time in its write
// transaction, with the first run's verdicts.
func TestLoginVerifiesOnce(t *testing.T) {
	v := &countingVerifier{}
	h := newHarness(t, func(c *registry.Config) { c.Verifier = v })
	op := newOperator(t, "op", h.now())
	expired := op.cred
	expired.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
	expired = op.signCred(t, expired)
	stranger := op
	stranger.device = testkit.LabelKey(t, "stranger")
	for _, tt := range []struct {
		name   string
		req    authn.Login
		status int
		code   string
		want   int64
	}{
		{"success", op.loginRequest(t, h.challenge(), h.now()), 200, "", 2},
		{"expired credential", op.loginWith(t, expired, h.challenge(), h.now()), 401, "DC_EXPIRED", 1},
		{"bad login signature", stranger.loginRequest(t, h.challenge(), h.now()), 401, "BAD_SIGNATURE", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := v.n.Load()
			if tt.code == "" {
				h.ok("POST", "/v1/auth/device-login", tt.req, "", nil)
			} else {
				h.fails("POST", "/v1/auth/device-login", tt.req, "", tt.status, tt.code)
			}
			if got := v.n.Load() - before; got != tt.want {
				t.Errorf("%d signatures verified, want %d", got, tt.want)
			}
		})
	}
}
