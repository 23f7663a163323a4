package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/svrp/svrp/store"
)

// testOperatorPins: a pin round-trips with every field, is replaced in place, is kept apart
// from a pin of a longer body that starts with the same characters, and a failed
// transaction leaves none behind.
func testOperatorPins(t *testing.T, s store.Store) {
	p := store.OperatorPin{Body: "cc2dfc37", RootKey: Key(1), PinnedAt: Time(1)}
	long := store.OperatorPin{Body: "cc2dfc379d", RootKey: Key(2), PinnedAt: Time(2), ByLogin: true, LoggedInAt: Time(3), Revocations: 7}
	View(t, s, func(tx store.Tx) error {
		_, err := tx.OperatorPin(p.Body)
		wantNotFound(t, "OperatorPin before any", err)
		return nil
	})
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutOperatorPin(p), tx.PutOperatorPin(long)) })
	View(t, s, func(tx store.Tx) error {
		got, err := tx.OperatorPin(p.Body)
		Diff(t, "OperatorPin", p, got)
		got2, err2 := tx.OperatorPin(long.Body)
		Diff(t, "OperatorPin of the 10-hex body", long, got2)
		_, err3 := tx.OperatorPin("cc2dfc3")
		wantNotFound(t, "OperatorPin of a prefix of a body", err3)
		return errors.Join(err, err2)
	})
	logged := p
	logged.LoggedInAt, logged.Revocations = Time(4), 1
	Update(t, s, func(tx store.Tx) error { return tx.PutOperatorPin(logged) })
	errAbort := errors.New("abort")
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutOperatorPin(store.OperatorPin{Body: "0011223344", RootKey: Key(3), PinnedAt: Time(5)}); err != nil {
			return err
		}
		return errAbort
	}); !errors.Is(err, errAbort) {
		t.Fatalf("Update = %v", err)
	}
	View(t, s, func(tx store.Tx) error {
		got, err := tx.OperatorPin(p.Body)
		Diff(t, "OperatorPin replaced", logged, got)
		if !got.LoggedIn() {
			t.Error("LoggedIn of a pin with LoggedInAt = false")
		}
		_, err2 := tx.OperatorPin("0011223344")
		wantNotFound(t, "OperatorPin of a failed transaction", err2)
		var all []store.OperatorPin
		err3 := tx.EachOperatorPin(func(p store.OperatorPin) error { all = append(all, p); return nil })
		Diff(t, "EachOperatorPin", []store.OperatorPin{logged, long}, all)
		return errors.Join(err, err3)
	})
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.PutOperatorPin(p) }); err == nil {
		t.Error("PutOperatorPin inside View succeeded")
	}
}

// testDeleteRevocation: a deleted revocation is gone and counted out, deleting an absent
// one changes nothing, EachRevocation visits every record and stops on an error, and a
// failed transaction's delete is undone.
func testDeleteRevocation(t *testing.T, s store.Store) {
	var rs []store.Revocation
	for i, did := range []string{"did:svrp:o:aaaaaaaa", "did:svrp:o:aaaaaaaa", "did:svrp:o:bbbbbbbb"} {
		rs = append(rs, store.Revocation{
			OperatorDID: did, RevocationID: fmt.Sprintf("rev/%d", i), RevokedAt: Time(i), RootPublicKey: "root",
			Signature: "sig", RecordedAt: Time(i + 1), Group: "10.0.0.0/24", Proven: i == 2,
		})
	}
	Update(t, s, func(tx store.Tx) error {
		var err error
		for _, r := range rs {
			err = errors.Join(err, tx.PutRevocation(r))
		}
		return err
	})
	each := func(tx store.Tx) map[[2]string]store.Revocation {
		got := map[[2]string]store.Revocation{}
		if err := tx.EachRevocation(func(r store.Revocation) error {
			got[[2]string{r.OperatorDID, r.RevocationID}] = r
			return nil
		}); err != nil {
			t.Fatalf("EachRevocation: %v", err)
		}
		return got
	}
	View(t, s, func(tx store.Tx) error {
		got := each(tx)
		Diff(t, "EachRevocation", 3, len(got))
		Diff(t, "EachRevocation record", rs[2], got[[2]string{rs[2].OperatorDID, rs[2].RevocationID}])
		stop := errors.New("stop")
		calls := 0
		if err := tx.EachRevocation(func(store.Revocation) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
			t.Errorf("EachRevocation returning an error: %v after %d calls", err, calls)
		}
		return nil
	})
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteRevocation(rs[0].OperatorDID, rs[0].RevocationID), tx.DeleteRevocation("did:svrp:o:cccccccc", "none"))
	})
	errAbort := errors.New("abort")
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.DeleteRevocation(rs[1].OperatorDID, rs[1].RevocationID); err != nil {
			return err
		}
		return errAbort
	}); !errors.Is(err, errAbort) {
		t.Fatalf("Update = %v", err)
	}
	View(t, s, func(tx store.Tx) error {
		_, err := tx.Revocation(rs[0].OperatorDID, rs[0].RevocationID)
		wantNotFound(t, "Revocation after DeleteRevocation", err)
		got, err := tx.Revocation(rs[1].OperatorDID, rs[1].RevocationID)
		Diff(t, "Revocation whose delete failed", rs[1], got)
		n, err2 := tx.RevocationCount()
		Diff(t, "RevocationCount after a delete", 2, n)
		Diff(t, "EachRevocation after a delete", 2, len(each(tx)))
		return errors.Join(err, err2)
	})
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.DeleteRevocation(rs[1].OperatorDID, rs[1].RevocationID) }); err == nil {
		t.Error("DeleteRevocation inside View succeeded")
	}
	if err := s.View(context.Background(), func(tx store.Tx) error {
		return tx.EachRevocation(func(store.Revocation) error { return tx.DeleteRevocation(rs[1].OperatorDID, rs[1].RevocationID) })
	}); err == nil {
		t.Error("a write inside EachRevocation succeeded")
	}
}
