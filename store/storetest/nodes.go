package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// testDeleteNode: a deleted node is gone from every lookup and from the count, the other
// records and another key's claim on its DID stay, deleting an absent key is no error, a
// deletion undone with its transaction leaves the record, and the key registers again.
func testDeleteNode(t *testing.T, s store.Store) {
	a, b, c := Key(1), Key(2), Key(3)
	Update(t, s, func(tx store.Tx) error {
		for _, k := range []didkey.PublicKey{a, b} {
			if err := tx.PutNode(Node(k)); err != nil {
				return err
			}
		}
		// c takes b's DID spelling last: b's deletion must leave c's entry.
		n := Node(c)
		n.DID = "did:svrp:taken"
		if err := tx.PutNode(n); err != nil {
			return err
		}
		n = Node(b)
		n.DID = "did:svrp:taken-by-b"
		return tx.PutNode(n)
	})
	errUndo := errors.New("undo")
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.DeleteNode(a); err != nil {
			return err
		}
		return errUndo
	}); !errors.Is(err, errUndo) {
		t.Fatalf("Update: %v", err)
	}
	View(t, s, func(tx store.Tx) error {
		if _, err := tx.Node(a); err != nil {
			t.Errorf("a deletion undone left Node(a): %v", err)
		}
		return nil
	})
	Update(t, s, func(tx store.Tx) error {
		if err := tx.DeleteNode(a); err != nil {
			return err
		}
		if err := tx.DeleteNode(b); err != nil {
			return err
		}
		return tx.DeleteNode(Key(99)) // absent: no error
	})
	View(t, s, func(tx store.Tx) error {
		for _, k := range []didkey.PublicKey{a, b} {
			if _, err := tx.Node(k); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Node of a deleted key: %v; want ErrNotFound", err)
			}
			if got, err := tx.NodeKeysByShortBody(k.ShortBody()); err != nil || len(got) != 0 {
				t.Errorf("NodeKeysByShortBody of a deleted key = %v, %v; want empty", got, err)
			}
		}
		for _, did := range []string{ShortDID(a), "did:svrp:taken-by-b"} {
			if _, err := tx.NodeKeyByDID(did); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("NodeKeyByDID(%s) after its node's deletion: %v; want ErrNotFound", did, err)
			}
		}
		if k, err := tx.NodeKeyByDID("did:svrp:taken"); err != nil || k != c {
			t.Errorf("NodeKeyByDID of the remaining node = %v, %v; want c", k, err)
		}
		if n, err := tx.NodeCount(); err != nil || n != 1 {
			t.Errorf("NodeCount = %d, %v; want 1", n, err)
		}
		var seen []didkey.PublicKey
		if err := tx.EachNode(func(n store.Node) error { seen = append(seen, n.Key); return nil }); err != nil {
			return err
		}
		Diff(t, "EachNode after deletions", []didkey.PublicKey{c}, seen)
		return nil
	})
	Update(t, s, func(tx store.Tx) error { return tx.PutNode(Node(a)) })
	View(t, s, func(tx store.Tx) error {
		got, err := tx.Node(a)
		if err != nil {
			return err
		}
		Diff(t, "a registered again", Node(a), got)
		if k, err := tx.NodeKeyByDID(ShortDID(a)); err != nil || k != a {
			t.Errorf("NodeKeyByDID of a registered again = %v, %v", k, err)
		}
		return nil
	})
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.DeleteNode(a) }); !errors.Is(err, store.ErrWriteInView) {
		t.Errorf("DeleteNode in View: %v; want ErrWriteInView", err)
	}
}
