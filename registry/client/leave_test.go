package client_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// bind runs the whole handshake for node with op and returns the binding session id.
func (w *world) bind(node *client.Node, op *client.Operator) string {
	w.t.Helper()
	ctx := w.t.Context()
	s, err := node.Initiate(ctx, client.InitiateOptions{TaskTypes: []string{"inference"}, TTL: 5 * time.Minute})
	if err != nil {
		w.t.Fatal(err)
	}
	v, err := op.Resolve(ctx, s.ShortCode)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := op.Authorize(ctx, v, client.Requested(v)); err != nil {
		w.t.Fatal(err)
	}
	p, err := node.WaitForAuthorization(ctx, s.BindingSessionID, time.Millisecond)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := node.Accept(ctx, p); err != nil {
		w.t.Fatal(err)
	}
	return s.BindingSessionID
}

func TestLeaving(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.client()
	op := w.operator(c, "op")
	node := w.node(c, "node")

	// The node leaves.
	id := w.bind(node, op)
	res, err := node.Unbind(ctx, id)
	if err != nil || res.Bound || res.UnboundBy != "node" || res.UnboundAt != canonical.FormatTime(w.clock.Now()) {
		t.Fatalf("node unbind = %+v, %v", res, err)
	}
	if _, err := node.Unbind(ctx, id); client.CodeOf(err) != proto.BadState {
		t.Errorf("second unbind: %v, want BAD_STATE", err)
	}

	// The operator leaves.
	id = w.bind(node, op)
	if res, err := op.Unbind(ctx, id); err != nil || res.UnboundBy != "operator" {
		t.Fatalf("operator unbind = %+v, %v", res, err)
	}
	st, err := c.Status(ctx, id)
	if err != nil || st.Bound == nil || *st.Bound || *st.UnboundBy != "operator" {
		t.Fatalf("status after unbind = %+v, %v", st, err)
	}

	// The device is revoked with a revocation made offline from the root key.
	id = w.bind(node, op)
	root := testkit.LabelKey(t, "op/root")
	rev, err := client.NewRevocation(root, "", op.Credential.RevocationID, w.clock.Now(), &op.Credential)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Revoke(ctx, rev)
	if err != nil || got.AlreadyRevoked || got.EndedSessions != 1 || len(got.EndedBindings) != 1 || got.EndedBindings[0].BindingSessionID != id {
		t.Fatalf("revoke = %+v, %v", got, err)
	}
	if _, err := op.Nodes(ctx, 0); client.CodeOf(err) != proto.NoSession {
		t.Errorf("the revoked device's session: %v, want NO_SESSION", err)
	}
	if _, err := c.Login(ctx, op.DeviceKey, op.Credential); client.CodeOf(err) != proto.DCRevoked {
		t.Errorf("the revoked device's login: %v, want DC_REVOKED", err)
	}
	// Logout of another device's session.
	other := w.operator(c, "other")
	if _, err := other.Logout(ctx); err != nil || other.Token != "" {
		t.Fatalf("logout: %v", err)
	}
}

// NewRevocation reproduces the revocation vector of extensions.json from its root seed.
func TestNewRevocationMatchesTheVector(t *testing.T) {
	root := testkit.SeedKey("3c36adeda57975441484a119843f614c859c04a0440edca7530b19707cca3313")
	at := time.Date(2025, 1, 15, 11, 0, 0, 0, time.UTC)
	rev, err := client.NewRevocation(root, "", "rev-device-1", at, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := canonical.Revocation{
		OperatorDID: "did:svrp:o:c05e0a31", OperatorRootPublicKey: "E8gKx38u6QwwBBsuARXxMwYHiL11BqP8R7cLSnSbgLRo",
		RevocationID: "rev-device-1", RevokedAt: "2025-01-15T11:00:00Z",
	}
	if rev.Revocation != want || rev.Signature != "4MJatZUGXznagm5xPnHrAhSVjSW23BnNyyMiAvDih5WWT3ENh45tR2U5xBVEPFFoS5zS68PHfeiramWH4tkhc3Y" {
		t.Fatalf("NewRevocation = %+v", rev)
	}
	if _, err := authn.VerifyRevocation(rev, canonical.DefaultPrefix, at); err != nil {
		t.Fatal(err)
	}
	other := ed25519.NewKeyFromSeed(make([]byte, 32))
	dc := authn.DeviceCredential{}
	dc.OperatorDID, dc.OperatorRootPublicKey = want.OperatorDID, want.OperatorRootPublicKey
	if _, err := client.NewRevocation(other, "", "r", at, &dc); client.CodeOf(err) != proto.DCIDBinding {
		t.Errorf("another root key for this credential: %v, want DC_ID_BINDING", err)
	}
}
