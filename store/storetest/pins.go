package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/svrp/svrp/store"
)

// testOperatorPins: a pin round-trips with every field, is replaced in place, is kept apart
// from a pin of a longer body that starts with the same characters, and a failed
// transaction leaves none behind.
func testOperatorPins(t *testing.T, s store.Store) {
	p := store.OperatorPin{Body: "cc2dfc37", RootKey: Key(1), PinnedAt: Time(1)}
	long := store.OperatorPin{Body: "cc2dfc379d", RootKey: Key(2), PinnedAt: Time(2), LoggedInAt: Time(3), Revocations: 7}
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
		return err
	})
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.PutOperatorPin(p) }); err == nil {
		t.Error("PutOperatorPin inside View succeeded")
	}
}
