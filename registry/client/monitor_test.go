package client_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/move"
	"github.com/svrp/svrp/internal/storekit"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
	"github.com/svrp/svrp/translog"
)

// wantFinding runs a monitoring pass and checks that it reports exactly one finding, which
// contains want ("" wants none).
func wantFinding(t *testing.T, v *client.LogVerifier, want string) {
	t.Helper()
	m, err := v.Monitor(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case want == "" && len(m.Findings) != 0:
		t.Fatalf("findings on an untouched registry:\n%s", m)
	case want != "" && (len(m.Findings) != 1 || !strings.Contains(m.Findings[0], want)):
		t.Fatalf("findings:\n%s\nwant one about %q", m, want)
	}
}

// TestMonitorCatchesTampering changes the store behind the registry's back, on every store,
// in each way the log is there to catch: a node's key changed, a revocation deleted, the
// store rolled back to an earlier copy. The monitor reports each, and a client that saw a
// later checkpoint refuses the rolled-back one.
func TestMonitorCatchesTampering(t *testing.T) {
	for name, open := range storekit.All() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			st := open(t)
			w := newWorldOn(t, st)
			c := w.client()
			node := w.registered(c, "node", "203.0.113.5:7000", nil, "")
			op := w.operator(c, "op")
			bound := w.bind(node, op)
			rev, err := client.NewRevocation(testkit.LabelKey(t, "op/root"), "", "rev-lost", w.clock.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Revoke(ctx, rev); err != nil {
				t.Fatal(err)
			}
			key, err := c.LogKey(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v, err := client.NewLogVerifier(c, key, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantFinding(t, v, "")
			m, _ := v.Monitor(ctx)
			if b := m.State.Bindings[bound]; b == nil || b.EndedBy != "" || len(m.State.Revocations) != 1 || len(m.State.Pins) != 1 {
				t.Fatalf("the replayed state: %+v", m.State)
			}

			// An earlier copy of the store, to roll back to.
			earlier := store.NewMemory()
			if _, err := move.Copy(ctx, st, earlier, &strings.Builder{}); err != nil {
				t.Fatal(err)
			}
			w.registered(c, "later", "203.0.113.6:7000", nil, "")
			wantFinding(t, v, "")

			// A node's key changed in the store: the registry now serves another key under
			// the node's DID.
			other := w.node(c, "impostor")
			storetest.Update(t, st, func(tx store.Tx) error {
				rec, err := tx.Node(node.PublicKey())
				if err != nil {
					return err
				}
				rec.Key = other.PublicKey()
				return tx.PutNode(rec)
			})
			w.restart(st)
			wantFinding(t, v, "node "+node.DID+" is served with key "+other.PublicKey().Hex())
			storetest.Update(t, st, func(tx store.Tx) error { return tx.DeleteNode(other.PublicKey()) })

			// A revocation deleted: the monitor finds it gone and sends it again.
			did, _ := client.OperatorDID(testkit.LabelKey(t, "op/root").Public().(ed25519.PublicKey))
			storetest.Update(t, st, func(tx store.Tx) error { return tx.DeleteRevocation(did, "rev-lost") })
			w.restart(st)
			wantFinding(t, v, "revocation rev-lost of "+did+" is in force in the log, and the registry did not hold it")
			wantFinding(t, v, "")

			// Rolled back to the earlier copy: the verifier that saw later checkpoints
			// refuses the earlier one, and a monitor that remembered one reports it.
			w.restart(earlier)
			if _, err := v.Latest(ctx); !errors.Is(err, translog.ErrBadCheckpoint) {
				t.Fatalf("the rolled-back checkpoint: %v", err)
			}
			if _, err := v.Monitor(ctx); !errors.Is(err, translog.ErrBadCheckpoint) {
				t.Fatalf("a monitoring pass over the rolled-back registry: %v", err)
			}
			w.clock.Advance(time.Second)
		})
	}
}
