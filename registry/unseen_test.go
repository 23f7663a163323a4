package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// The sweep ends the binding of a bound node unseen for longer than BoundNodeExpiry: the
// node leaves its operator's view, the session that made the binding says node_unseen,
// and the record, an unbound node's from then on, goes with the node expiry.
func TestUnseenBindingsEnd(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name   string
		limits limits.Limits
		unseen time.Duration
		// session: the session that made the binding is still stored.
		session bool
		// wantBound: the binding stays; wantRecord: the node's record stays.
		wantBound, wantRecord bool
	}{
		{"seen 29 days ago", limits.Limits{}, 29 * day, true, true, true},
		{"unseen for exactly the expiry", limits.Limits{}, 30 * day, true, true, true},
		{"unseen 31 days", limits.Limits{}, 31 * day, true, false, false},
		{"unseen 31 days, its session deleted", limits.Limits{}, 31 * day, false, false, false},
		{"unseen 31 days, a longer node expiry", limits.Limits{NodeExpiry: 60 * day}, 31 * day, true, false, true},
		{"a shorter bound expiry", limits.Limits{BoundNodeExpiry: 2 * time.Hour}, 3 * time.Hour, true, false, true},
		{"a shorter bound expiry, seen within it", limits.Limits{BoundNodeExpiry: 2 * time.Hour}, time.Hour, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, now := quotaService(t, tc.limits)
			ctx := context.Background()
			mustRegister(t, s, 0, "192.0.2.7")
			op := bindActive(t, s, 0, *now, tc.session)
			*now = now.Add(tc.unseen)
			if err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if got := hasBinding(t, s, 0); got != tc.wantBound {
				t.Fatalf("bound after the sweep: %v, want %v", got, tc.wantBound)
			}
			if got := hasNode(t, s, 0); got != tc.wantRecord {
				t.Fatalf("record after the sweep: %v, want %v", got, tc.wantRecord)
			}
			view, err := s.BoundNodes(ctx, authn.Operator{DID: op}, api.NodeFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantBound]; view.Count != want {
				t.Fatalf("the operator's view lists %d nodes, want %d", view.Count, want)
			}
			if !tc.session {
				return
			}
			sess := readSession(t, s, "s0")
			switch {
			case sess.State != binding.Active:
				t.Fatalf("the session is %s, want ACTIVE", sess.State)
			case tc.wantBound && sess.UnboundBy != "":
				t.Fatalf("a bound node's session is marked unbound by %q", sess.UnboundBy)
			case !tc.wantBound && (sess.UnboundBy != binding.UnboundByNodeUnseen || !sess.UnboundAt.Equal(*now)):
				t.Fatalf("the session is unbound by %q at %s, want %q at %s", sess.UnboundBy, sess.UnboundAt, binding.UnboundByNodeUnseen, *now)
			}
		})
	}
}

// A node whose binding the sweep ended and that kept its record (a node expiry longer than
// the bound one) is an ordinary unbound node: stale, its record is reclaimed by a newcomer to
// a full table.
func TestUnseenBindingThenNodeExpiry(t *testing.T) {
	s, now := quotaService(t, limits.Limits{NodeExpiry: 48 * time.Hour, BoundNodeExpiry: 24 * time.Hour, MaxNodes: 1, MaxNodesPerBlock: 1})
	ctx := context.Background()
	mustRegister(t, s, 0, "192.0.2.7")
	bindActive(t, s, 0, *now, true)
	*now = now.Add(25 * time.Hour)
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if hasBinding(t, s, 0) || !hasNode(t, s, 0) {
		t.Fatalf("after a day unseen: bound %v, record %v; want the binding ended and the record kept", hasBinding(t, s, 0), hasNode(t, s, 0))
	}
	// Unbound and stale, the record is one a newcomer to the full table may take the place of.
	if err := registerKey(s, 1, "192.0.2.8"); err != nil {
		t.Fatalf("a newcomer to a full table holding a stale unbound record: %v", err)
	}
	if hasNode(t, s, 0) {
		t.Fatal("the newcomer did not take the stale record's place")
	}
}

// bindActive stores an ACTIVE session "s<i>" of key i made at, and the binding it made, as a
// finished binding would; without session, only the binding (its session deleted since). It
// returns the operator DID.
func bindActive(t *testing.T, s *Service, i int, at time.Time, session bool) string {
	t.Helper()
	const op = "did:svrp:o:00000000"
	bind(t, s, i)
	if !session {
		return op
	}
	err := s.store.Update(context.Background(), func(tx store.Tx) error {
		b, err := tx.Binding(testKey(i))
		if err != nil {
			return err
		}
		return tx.PutBindingSession(binding.BindingSession{
			ID: b.SessionID, State: binding.Active, NodeKey: testKey(i), OperatorDID: b.OperatorDID,
			ExpiresAt: at.Add(10 * time.Minute), ActivatedAt: at, UpdatedAt: at,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func hasBinding(t *testing.T, s *Service, i int) bool {
	t.Helper()
	err := s.store.View(context.Background(), func(tx store.Tx) error {
		_, err := tx.Binding(testKey(i))
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func readSession(t *testing.T, s *Service, id string) binding.BindingSession {
	t.Helper()
	var sess binding.BindingSession
	err := s.store.View(context.Background(), func(tx store.Tx) (err error) {
		sess, err = tx.BindingSession(id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}
