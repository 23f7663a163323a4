package registry

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/store"
)

// checkPin and pinOperator by what the body's record holds (docs/protocol.md §10.8): only a
// record a login wrote pins, and a login takes over a record that pins nothing.
func TestCheckPinByRecord(t *testing.T) {
	a, b := testkit.CollisionRoots(t)
	rootA, rootB := didkey.PublicKey(a.Public().(ed25519.PublicKey)), didkey.PublicKey(b.Public().(ed25519.PublicKey))
	did, err := didkey.OperatorDID(rootA, didkey.FormShort)
	if err != nil {
		t.Fatal(err)
	}
	body := did.Body()
	// A message rootA signed, as the login's credential would be: the pin's log entry carries it.
	signed, err := authn.SignRevocation(a, canonical.DefaultPrefix, "", "", "rev", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	proof := rootProof{canonical.DefaultPrefix, signed.Revocation, signed.Signature}
	then, now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		stored    *store.OperatorPin
		collision bool
		pinned    bool               // checkPin's answer for A
		after     *store.OperatorPin // the record once A logged in
	}{
		{name: "none", after: &store.OperatorPin{Body: body, RootKey: rootA, PinnedAt: now, ByLogin: true, LoggedInAt: now}},
		{name: "another key's login", stored: &store.OperatorPin{Body: body, RootKey: rootB, PinnedAt: then, ByLogin: true}, collision: true},
		{name: "another key's successful login, unmarked", stored: &store.OperatorPin{Body: body, RootKey: rootB, PinnedAt: then, LoggedInAt: then}, collision: true},
		{name: "another key's revocations", stored: &store.OperatorPin{Body: body, RootKey: rootB, PinnedAt: then, Revocations: 3},
			after: &store.OperatorPin{Body: body, RootKey: rootA, PinnedAt: now, ByLogin: true, LoggedInAt: now}},
		{name: "own revocations", stored: &store.OperatorPin{Body: body, RootKey: rootA, Revocations: 2},
			after: &store.OperatorPin{Body: body, RootKey: rootA, PinnedAt: now, ByLogin: true, LoggedInAt: now, Revocations: 2}},
		{name: "own failed login", stored: &store.OperatorPin{Body: body, RootKey: rootA, PinnedAt: then, ByLogin: true}, pinned: true,
			after: &store.OperatorPin{Body: body, RootKey: rootA, PinnedAt: then, ByLogin: true, LoggedInAt: now}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := store.NewMemory()
			err := st.Update(context.Background(), func(tx store.Tx) error {
				if tt.stored != nil {
					if err := tx.PutOperatorPin(*tt.stored); err != nil {
						return err
					}
				}
				_, pinned, err := checkPin(tx, did, rootA)
				if got := errors.Is(err, authn.ErrDIDCollision); got != tt.collision {
					t.Fatalf("checkPin = %v, want DID_COLLISION %v", err, tt.collision)
				}
				if err == nil && pinned != tt.pinned {
					t.Errorf("checkPin pinned = %v, want %v", pinned, tt.pinned)
				}
				_, err = pinOperator(tx, did, rootA, now, true, proof)
				if tt.collision {
					if !errors.Is(err, authn.ErrDIDCollision) {
						t.Errorf("pinOperator = %v, want DID_COLLISION", err)
					}
					return nil
				}
				if err != nil {
					return err
				}
				got, err := tx.OperatorPin(body)
				if diff := cmp.Diff(*tt.after, got); diff != "" {
					t.Errorf("record after the login (-want +got):\n%s", diff)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
