package abuse

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// rootOperator is an operator of the given root key with a fresh device, under the DID form
// given, whose credential carries revocationID.
func rootOperator(t *testing.T, root ed25519.PrivateKey, form didkey.Form, revocationID string) attack.Operator {
	t.Helper()
	device := testkit.RandomKey()
	cred, err := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{IssuedAt: time.Now().Add(-time.Minute), RevocationID: revocationID})
	if err != nil {
		t.Fatal(err)
	}
	if form != didkey.FormShort {
		k, err := didkey.KeyFromEd25519(root.Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		d, err := didkey.OperatorDID(k, form)
		if err != nil {
			t.Fatal(err)
		}
		cred.OperatorDID = d.String()
		if cred.Signature, err = canonical.Sign(root, canonical.DefaultPrefix, cred.DeviceCredential); err != nil {
			t.Fatal(err)
		}
	}
	return attack.Operator{Root: root, Device: device, Credential: cred}
}

func revocationOf(t *testing.T, o attack.Operator, revocationID string) authn.SignedRevocation {
	t.Helper()
	r, err := client.NewRevocation(o.Root, "", revocationID, time.Time{}, &o.Credential)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFairRow11ShortDIDCollision: two root keys whose short operator DIDs agree (found once by
// brute force, testdata/collision). The victim logs in and binds a node; the other key, under
// the same short DID, gets DID_COLLISION at login (its challenge stays usable) and at revoke,
// and under its own 10-hex DID logs in but cannot see the victim's nodes, unbind them, or
// revoke the victim's credential.
func TestFairRow11ShortDIDCollision(t *testing.T) {
	d := start(t)
	ctx := context.Background()
	rootA, rootB := testkit.CollisionRoots(t)
	victim := rootOperator(t, rootA, didkey.FormShort, "rev-victim")
	thief := rootOperator(t, rootB, didkey.FormShort, "rev-victim")
	own := rootOperator(t, rootB, didkey.FormFallback, "rev-victim")
	if victim.Credential.OperatorDID != thief.Credential.OperatorDID {
		t.Fatalf("the pair does not collide: %s, %s", victim.Credential.OperatorDID, thief.Credential.OperatorDID)
	}
	home := d.api("127.0.0.2")
	op, err := victim.Login(t.Context(), home)
	if err != nil {
		t.Fatal(err)
	}
	node := newNode(t, home)
	s, err := node.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := op.Resolve(ctx, s.ShortCode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Authorize(ctx, v, client.Requested(v)); err != nil {
		t.Fatal(err)
	}
	p, err := node.WaitForAuthorization(ctx, s.BindingSessionID, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Accept(ctx, p); err != nil {
		t.Fatal(err)
	}

	away := d.api(addr(0))
	ch, err := away.Challenge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := away.DeviceLogin(ctx, signedLogin(t, thief, ch.Challenge)); client.CodeOf(err) != proto.DIDCollision {
		t.Fatalf("the colliding key's login under the victim's DID: %v; want DID_COLLISION", err)
	}
	if _, err := home.DeviceLogin(ctx, signedLogin(t, victim, ch.Challenge)); err != nil {
		t.Fatalf("the challenge the refused login carried was consumed: %v", err)
	}
	if _, err := away.Revoke(ctx, revocationOf(t, thief, "rev-victim")); client.CodeOf(err) != proto.DIDCollision {
		t.Fatalf("the colliding key's revocation under the victim's DID: %v; want DID_COLLISION", err)
	}

	other, err := own.Login(t.Context(), away)
	if err != nil {
		t.Fatalf("the colliding key under its 10-hex DID: %v", err)
	}
	if nodes, err := other.Nodes(ctx, 0); err != nil || nodes.Count != 0 {
		t.Fatalf("the colliding key's nodes: %+v, %v; want none", nodes, err)
	}
	if _, err := other.Unbind(ctx, s.BindingSessionID); client.CodeOf(err) != proto.PermissionDenied {
		t.Fatalf("the colliding key unbinding the victim's node: %v; want PERMISSION_DENIED", err)
	}
	if _, err := away.Revoke(ctx, revocationOf(t, own, "rev-victim")); err != nil {
		t.Fatalf("the colliding key revoking its own credential: %v", err)
	}
	if _, err := victim.Login(t.Context(), home); err != nil {
		t.Fatalf("the victim's login after the other key revoked the same revocation_id: %v", err)
	}
	if nodes, err := op.Nodes(ctx, 0); err != nil || nodes.Count != 1 {
		t.Fatalf("the victim's nodes: %+v, %v; want its one node", nodes, err)
	}
}

// TestFairPinSquatting: a root key whose short operator DID is also the victim's revokes under
// it before the victim's first login here (docs/protocol.md §10.8: a revocation pins
// nothing). The victim's logins are accepted, and the squatter under the short DID is then
// DID_COLLISION.
func TestFairPinSquatting(t *testing.T) {
	d := start(t)
	ctx := context.Background()
	rootA, rootB := testkit.CollisionRoots(t)
	victim := rootOperator(t, rootA, didkey.FormShort, "rev-victim")
	squatter := rootOperator(t, rootB, didkey.FormShort, "rev-victim")
	away, home := d.api(addr(0)), d.api("127.0.0.2")
	if _, err := away.Revoke(ctx, revocationOf(t, squatter, "rev-victim")); err != nil {
		t.Fatalf("the squatter's revocation under the victim's short DID: %v", err)
	}
	if _, err := away.Revoke(ctx, revocationOf(t, squatter, "rev-other")); err != nil {
		t.Fatalf("the squatter's second revocation: %v", err)
	}
	for i := range 3 {
		if _, err := victim.Login(ctx, home); err != nil {
			t.Fatalf("the victim's login %d after the squatter's revocations: %v", i+1, err)
		}
	}
	if _, err := squatter.Login(ctx, away); client.CodeOf(err) != proto.DIDCollision {
		t.Fatalf("the squatter's login under the victim's short DID: %v; want DID_COLLISION", err)
	}
}

// TestFairRevokedUnderEitherSpelling: a credential revoked under one spelling of its operator
// DID (8-hex short, 10-hex fallback) is refused under the other at its first login, before
// any login pinned either spelling, and after one did.
func TestFairRevokedUnderEitherSpelling(t *testing.T) {
	d := start(t)
	ctx := context.Background()
	home := d.api("127.0.0.2")
	for _, tt := range []struct {
		name                string
		revokeUnder, credIn didkey.Form
	}{
		{"revoked under the short DID, credential under the 10-hex", didkey.FormShort, didkey.FormFallback},
		{"revoked under the 10-hex DID, credential under the short", didkey.FormFallback, didkey.FormShort},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := testkit.RandomKey()
			revoker := rootOperator(t, root, tt.revokeUnder, "rev-unused")
			stolen := rootOperator(t, root, tt.credIn, "rev-stolen")
			kept := rootOperator(t, root, tt.credIn, "rev-kept")
			if _, err := home.Revoke(ctx, revocationOf(t, revoker, "rev-stolen")); err != nil {
				t.Fatal(err)
			}
			if _, err := stolen.Login(ctx, home); client.CodeOf(err) != proto.DCRevoked {
				t.Fatalf("the revoked credential's first login: %v; want DC_REVOKED", err)
			}
			if _, err := kept.Login(ctx, home); err != nil {
				t.Fatalf("another credential of the root key: %v", err)
			}
			if _, err := stolen.Login(ctx, home); client.CodeOf(err) != proto.DCRevoked {
				t.Fatalf("the revoked credential's login once its spelling is pinned: %v; want DC_REVOKED", err)
			}
		})
	}
}
