package registry

import (
	"context"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// An operator at its quota of sessions keeps logging in: each login ends its oldest session,
// and the operator never holds more than the quota.
func TestBearerQuotaPerOperatorEndsOldest(t *testing.T) {
	s, now := quotaService(t, limits.Limits{MaxBearerSessionsPerOperator: 2})
	ctx := context.Background()
	var hashes [][32]byte
	for i := range 4 {
		var h [32]byte
		h[0] = byte(i + 1)
		*now = now.Add(time.Second)
		err := s.store.Update(ctx, func(tx store.Tx) error {
			if err := s.holdBearer(tx, "did:svrp:o:0a1b2c3d", nil); err != nil {
				return err
			}
			return tx.PutBearerSession(h, authn.NewBearerSession("did:svrp:o:0a1b2c3d", *now))
		})
		if err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
		hashes = append(hashes, h)
	}
	err := s.store.View(ctx, func(tx store.Tx) error {
		mine, err := tx.BearerSessionsOf("did:svrp:o:0a1b2c3d")
		if err != nil {
			return err
		}
		if len(mine) != 2 {
			t.Fatalf("the operator holds %d sessions; want its quota 2", len(mine))
		}
		for i, h := range hashes {
			_, err := tx.BearerSession(h)
			if alive := err == nil; alive != (i >= 2) {
				t.Errorf("session %d alive %v; want only the two newest", i, alive)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sessionReads counts the bearer sessions read through it.
type sessionReads struct {
	store.Tx
	n *int
}

func (r sessionReads) BearerSession(h [32]byte) (authn.BearerSession, error) {
	*r.n++
	return r.Tx.BearerSession(h)
}

// TestOldestBearerReadsOnlyWhatMemoryLacks: the oldest of an operator's sessions is found
// from the ends the bearer table holds; only a session it does not hold (another daemon's,
// since the last count) is read from the store.
func TestOldestBearerReadsOnlyWhatMemoryLacks(t *testing.T) {
	s, now := quotaService(t, limits.Limits{})
	ctx := context.Background()
	const op = "did:svrp:o:0a1b2c3d"
	var hashes [][32]byte
	for i := range 4 {
		var h [32]byte
		h[0] = byte(i + 1)
		sess := authn.NewBearerSession(op, now.Add(time.Duration(i)*time.Minute))
		if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.PutBearerSession(h, sess) }); err != nil {
			t.Fatal(err)
		}
		if i != 2 {
			s.tables.bearers.Add(h, "192.0.2.1", sess.IssuedAt, sess.ExpiresAt)
		}
		hashes = append(hashes, h)
	}
	for _, order := range [][]int{{3, 2, 1, 0}, {2, 0, 3, 1}} {
		var in [][32]byte
		for _, i := range order {
			in = append(in, hashes[i])
		}
		reads := 0
		err := s.store.View(ctx, func(tx store.Tx) error {
			got, err := s.oldestBearer(sessionReads{Tx: tx, n: &reads}, in)
			if got != hashes[0] {
				t.Errorf("order %v: oldest is session %d; want 0", order, got[0]-1)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if reads != 1 {
			t.Errorf("order %v: %d sessions read from the store; want 1, the one the table does not hold", order, reads)
		}
	}
}
