package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// nodeKeyByDID looks did up in a View of its own.
func nodeKeyByDID(s store.Store, did string) (didkey.PublicKey, error) {
	var got didkey.PublicKey
	err := s.View(context.Background(), func(tx store.Tx) error {
		var err error
		got, err = tx.NodeKeyByDID(did)
		return err
	})
	return got, err
}

func testDIDIndex(t *testing.T, s store.Store) {
	k, other := Key(1), Key(2)
	n := Node(k)
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutNode(n), tx.PutNode(Node(other))) })
	lookup := func(did string) (didkey.PublicKey, error) { return nodeKeyByDID(s, did) }
	if got, err := lookup(ShortDID(k)); err != nil || got != k {
		t.Errorf("NodeKeyByDID(short) = %v, %v; want %v", got, err, k)
	}
	if _, err := lookup(FullDID(k)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("NodeKeyByDID(full) before the record uses it: %v, want store.ErrNotFound", err)
	}

	// The node re-registers under its full spelling: only the spelling it now has is indexed.
	n.DID = FullDID(k)
	Update(t, s, func(tx store.Tx) error { return tx.PutNode(n) })
	if got, err := lookup(FullDID(k)); err != nil || got != k {
		t.Errorf("NodeKeyByDID(full) = %v, %v; want %v", got, err, k)
	}
	if _, err := lookup(ShortDID(k)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("NodeKeyByDID(old short) = %v, want store.ErrNotFound", err)
	}
	if got, err := lookup(ShortDID(other)); err != nil || got != other {
		t.Errorf("NodeKeyByDID(other) = %v, %v; want %v", got, err, other)
	}

	// Re-putting with the same DID (a heartbeat) keeps the entry.
	n.LastSeen = Time(30)
	Update(t, s, func(tx store.Tx) error { return tx.PutNode(n) })
	if got, err := lookup(FullDID(k)); err != nil || got != k {
		t.Errorf("NodeKeyByDID(full) after heartbeat = %v, %v; want %v", got, err, k)
	}

	// A record without a DID is not found under "".
	nodid := Node(Key(3))
	nodid.DID = ""
	Update(t, s, func(tx store.Tx) error { return tx.PutNode(nodid) })
	if _, err := lookup(""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("NodeKeyByDID(\"\") = %v, want store.ErrNotFound", err)
	}

	View(t, s, func(tx store.Tx) error {
		c, err := tx.NodeCount()
		if c != 3 {
			t.Errorf("NodeCount = %d, want 3", c)
		}
		keys, err2 := tx.NodeKeysByShortBody(k.ShortBody())
		Diff(t, "NodeKeysByShortBody after DID change", []didkey.PublicKey{k}, keys)
		return errors.Join(err, err2)
	})
}

func testShortBodyIndex(t *testing.T, s store.Store) {
	var keys []didkey.PublicKey
	for i := range 5 {
		keys = append(keys, Key(i))
	}
	Update(t, s, func(tx store.Tx) error {
		for i, k := range keys {
			n := Node(k)
			// Whatever spelling the record uses, it is indexed by its body.
			switch i % 3 {
			case 1:
				n.DID = FullDID(k)
			case 2:
				n.DID = "did:svrp:h:" + k.ShortBody()
			}
			if err := tx.PutNode(n); err != nil {
				return err
			}
		}
		return nil
	})
	View(t, s, func(tx store.Tx) error {
		for _, k := range keys {
			got, err := tx.NodeKeysByShortBody(k.ShortBody())
			if err != nil {
				return err
			}
			Diff(t, "NodeKeysByShortBody("+k.ShortBody()+")", []didkey.PublicKey{k}, got)
		}
		body := keys[0].ShortBody()
		for _, q := range []string{"", body[:7], body + "/", body + "0", "00000000", keys[0].Hex()} {
			got, err := tx.NodeKeysByShortBody(q)
			if err != nil || len(got) != 0 {
				t.Errorf("NodeKeysByShortBody(%q) = %v, %v; want empty", q, got, err)
			}
		}
		return nil
	})
}

func testSecretIndex(t *testing.T, s store.Store) {
	k := Key(1)
	a, b := Session("a", k), Session("b", k)
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutBindingSession(a), tx.PutBindingSession(b)) })
	find := func(h [32]byte) (string, error) {
		var id string
		err := s.View(context.Background(), func(tx store.Tx) error {
			var err error
			id, err = tx.BindingSessionIDBySecret(h)
			return err
		})
		return id, err
	}
	for _, c := range []struct {
		h    [32]byte
		want string
	}{{a.CodeHash, "a"}, {a.TokenHash, "a"}, {b.CodeHash, "b"}, {b.TokenHash, "b"}} {
		if got, err := find(c.h); err != nil || got != c.want {
			t.Errorf("SessionIDBySecret = %q, %v; want %q", got, err, c.want)
		}
	}

	// The code is consumed and a new token issued: the old hashes find nothing.
	oldCode, oldToken := a.CodeHash, a.TokenHash
	a.CodeHash = [32]byte{}
	a.TokenHash = Hash("token a 2")
	Update(t, s, func(tx store.Tx) error { return tx.PutBindingSession(a) })
	for _, h := range [][32]byte{oldCode, oldToken, {}} {
		if _, err := find(h); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionIDBySecret(old or zero hash) = %v, want store.ErrNotFound", err)
		}
	}
	if got, err := find(a.TokenHash); err != nil || got != "a" {
		t.Errorf("SessionIDBySecret(new token) = %q, %v; want a", got, err)
	}
	if got, err := find(b.TokenHash); err != nil || got != "b" {
		t.Errorf("SessionIDBySecret(other session) = %q, %v; want b", got, err)
	}

	// A session whose code and token hash are equal is indexed once and found.
	c := Session("c", k)
	c.TokenHash = c.CodeHash
	Update(t, s, func(tx store.Tx) error { return tx.PutBindingSession(c) })
	if got, err := find(c.CodeHash); err != nil || got != "c" {
		t.Errorf("SessionIDBySecret(shared hash) = %q, %v; want c", got, err)
	}
	c.TokenHash = Hash("token c 2")
	Update(t, s, func(tx store.Tx) error { return tx.PutBindingSession(c) })
	if got, err := find(c.CodeHash); err != nil || got != "c" {
		t.Errorf("SessionIDBySecret(code kept) = %q, %v; want c", got, err)
	}
}

func testSessionsByNode(t *testing.T, s store.Store) {
	k1, k2 := Key(1), Key(2)
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutBindingSession(Session("s3", k1)),
			tx.PutBindingSession(Session("s1", k1)),
			tx.PutBindingSession(Session("s2", k2)),
		)
	})
	ids := func(k didkey.PublicKey) []string {
		return listed(t, s, "OpenSessionsByNode", k, store.Tx.OpenBindingSessionsByNode,
			func(s binding.BindingSession) (didkey.PublicKey, string) { return s.NodeKey, s.ID })
	}
	Diff(t, "OpenSessionsByNode(k1)", []string{"s1", "s3"}, ids(k1))
	Diff(t, "OpenSessionsByNode(k2)", []string{"s2"}, ids(k2))

	// A session put under another key moves; a terminal state leaves the index, and only
	// the index: the session itself stays readable.
	s3 := Session("s3", k2)
	Update(t, s, func(tx store.Tx) error { return tx.PutBindingSession(s3) })
	Diff(t, "OpenSessionsByNode(k1) after a move", []string{"s1"}, ids(k1))
	Diff(t, "OpenSessionsByNode(k2) after a move", []string{"s2", "s3"}, ids(k2))
	s1 := Session("s1", k1)
	s1.State = binding.Active
	Update(t, s, func(tx store.Tx) error { return tx.PutBindingSession(s1) })
	Diff(t, "OpenSessionsByNode(k1) after a terminal state", []string(nil), ids(k1))

	var all []string
	View(t, s, func(tx store.Tx) error {
		return tx.EachBindingSession(func(s binding.BindingSession) error { all = append(all, s.ID); return nil })
	})
	Diff(t, "EachSession", []string{"s1", "s2", "s3"}, all)
}

func testDeleteSession(t *testing.T, s store.Store) {
	k := Key(1)
	a := Session("a", k)
	Update(t, s, func(tx store.Tx) error { return tx.PutBindingSession(a) })
	used := func(id string) bool {
		var u bool
		View(t, s, func(tx store.Tx) (err error) { u, err = tx.BindingSessionIDUsed(id); return err })
		return u
	}
	if !used("a") || used("b") {
		t.Fatalf("SessionIDUsed(a, b) = %v, %v; want true, false", used("a"), used("b"))
	}
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteBindingSession("a"), tx.DeleteBindingSession("never"))
	})
	View(t, s, func(tx store.Tx) error {
		if _, err := tx.BindingSession("a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Session(deleted) err = %v; want store.ErrNotFound", err)
		}
		if id, err := tx.BindingSessionIDBySecret(a.CodeHash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionIDBySecret(deleted code) = %q, %v; want store.ErrNotFound", id, err)
		}
		if ss, err := tx.OpenBindingSessionsByNode(k); len(ss) != 0 || err != nil {
			t.Errorf("OpenSessionsByNode after delete = %v, %v; want empty", ss, err)
		}
		return nil
	})
	if !used("a") || used("never") {
		t.Errorf("after delete SessionIDUsed(a, never) = %v, %v; want true, false", used("a"), used("never"))
	}
}

func testBindingSupersede(t *testing.T, s store.Store) {
	const opA, opB = "did:svrp:o:aaaaaaaa", "did:svrp:o:bbbbbbbb"
	k1, k2 := Key(1), Key(2)
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutBinding(Binding(k1, opA)), tx.PutBinding(Binding(k2, opA)))
	})
	byOp := func(op string) []didkey.PublicKey {
		return listed(t, s, "BindingsByOperator", op, store.Tx.BindingsByOperator,
			func(b binding.Binding) (string, didkey.PublicKey) { return b.OperatorDID, b.NodeKey })
	}
	Diff(t, "BindingsByOperator(A)", sortKeys(k1, k2), byOp(opA))

	// k1 is bound again, to B: A no longer lists it.
	nb := Binding(k1, opB)
	nb.SessionID = "newer"
	Update(t, s, func(tx store.Tx) error { return tx.PutBinding(nb) })
	Diff(t, "BindingsByOperator(A) after supersede", []didkey.PublicKey{k2}, byOp(opA))
	Diff(t, "BindingsByOperator(B) after supersede", []didkey.PublicKey{k1}, byOp(opB))
	View(t, s, func(tx store.Tx) error {
		got, err := tx.Binding(k1)
		Diff(t, "Binding(k1)", nb, got)
		return err
	})

	// Superseded by a newer binding with the same operator: still listed once.
	nb.SessionID = "newest"
	Update(t, s, func(tx store.Tx) error { return tx.PutBinding(nb) })
	Diff(t, "BindingsByOperator(B) after rebinding", []didkey.PublicKey{k1}, byOp(opB))

	// An operator DID that prefixes another's does not see its bindings.
	for _, q := range []string{"did:svrp:o:", "did:svrp:o:aaaaaaa", opA + "/"} {
		if got := byOp(q); len(got) != 0 {
			t.Errorf("BindingsByOperator(%q) = %v, want empty", q, got)
		}
	}
}

func testDeleteBinding(t *testing.T, s store.Store) {
	const opA = "did:svrp:o:aaaaaaaa"
	k1, k2 := Key(1), Key(2)
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutBinding(Binding(k1, opA)), tx.PutBinding(Binding(k2, opA)))
	})
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.DeleteBinding(k1), tx.DeleteBinding(Key(3))) })
	View(t, s, func(tx store.Tx) error {
		_, err := tx.Binding(k1)
		wantNotFound(t, "Binding(k1) after DeleteBinding", err)
		bs, err := tx.BindingsByOperator(opA)
		if len(bs) != 1 || bs[0].NodeKey != k2 {
			t.Errorf("BindingsByOperator after DeleteBinding = %+v", bs)
		}
		return err
	})
	// Deleted then put again in one transaction: the newer binding stands, indexed once.
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteBinding(k2), tx.PutBinding(Binding(k2, opA)), tx.DeleteBinding(k2), tx.DeleteBinding(k2))
	})
	View(t, s, func(tx store.Tx) error {
		bs, err := tx.BindingsByOperator(opA)
		if len(bs) != 0 {
			t.Errorf("BindingsByOperator after deleting every binding = %+v", bs)
		}
		return err
	})
	// A failing transaction leaves the binding in place.
	Update(t, s, func(tx store.Tx) error { return tx.PutBinding(Binding(k1, opA)) })
	updateAborted(t, s, func(tx store.Tx) error { return tx.DeleteBinding(k1) })
	View(t, s, func(tx store.Tx) error {
		bs, err := tx.BindingsByOperator(opA)
		if len(bs) != 1 {
			t.Errorf("a failed DeleteBinding took effect: %+v", bs)
		}
		return err
	})
}

func sortKeys(ks ...didkey.PublicKey) []didkey.PublicKey {
	out := slices.Clone(ks)
	slices.SortFunc(out, rules.CompareKeys)
	return out
}

func testOperatorSessions(t *testing.T, s store.Store) {
	h1, h2 := Hash("t1"), Hash("t2")
	s1, s2 := BearerSession("did:svrp:o:aaaaaaaa"), BearerSession("did:svrp:o:bbbbbbbb")
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutBearerSession(h1, s1), tx.PutBearerSession(h2, s2)) })
	type entry struct {
		H [32]byte
		S authn.BearerSession
	}
	all := func() []entry {
		var out []entry
		View(t, s, func(tx store.Tx) error {
			return tx.EachBearerSession(func(h [32]byte, s authn.BearerSession) error { out = append(out, entry{h, s}); return nil })
		})
		return out
	}
	want := []entry{{h1, s1}, {h2, s2}}
	if rules.CompareHashes(h2, h1) < 0 {
		want = []entry{{h2, s2}, {h1, s1}}
	}
	Diff(t, "EachOperatorSession", want, all())
	View(t, s, func(tx store.Tx) error {
		got, err := tx.BearerSession(h2)
		Diff(t, "OperatorSession", s2, got)
		return err
	})
	Update(t, s, func(tx store.Tx) error { return tx.DeleteBearerSession(h1) })
	Diff(t, "EachOperatorSession after delete", []entry{{h2, s2}}, all())
	View(t, s, func(tx store.Tx) error {
		_, err := tx.BearerSession(h1)
		wantNotFound(t, "OperatorSession after delete", err)
		return nil
	})

	// The operator index follows puts, replacements by another operator, and deletes.
	of := func(op string) [][32]byte {
		var out [][32]byte
		View(t, s, func(tx store.Tx) (err error) {
			out, err = tx.BearerSessionsOf(op)
			return err
		})
		return out
	}
	Diff(t, "OperatorSessionsOf(A) after delete", [][32]byte(nil), of(s1.OperatorDID))
	Diff(t, "OperatorSessionsOf(B)", [][32]byte{h2}, of(s2.OperatorDID))
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutBearerSession(h2, s1), tx.PutBearerSession(h1, s1)) })
	Diff(t, "OperatorSessionsOf(B) after h2 moved to A", [][32]byte(nil), of(s2.OperatorDID))
	Diff(t, "OperatorSessionsOf(A)", sortHashes(h1, h2), of(s1.OperatorDID))
	for _, q := range []string{"did:svrp:o:", "did:svrp:o:aaaaaaa", s1.OperatorDID + "/"} {
		Diff(t, "OperatorSessionsOf of a prefix", [][32]byte(nil), of(q))
	}
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.DeleteBearerSession(h1), tx.DeleteBearerSession(h1)) })
	Diff(t, "OperatorSessionsOf(A) after deleting h1", [][32]byte{h2}, of(s1.OperatorDID))
}

func sortHashes(hs ...[32]byte) [][32]byte {
	out := slices.Clone(hs)
	slices.SortFunc(out, rules.CompareHashes)
	return out
}

// listed is what an index lists under key, as the ids of the records in the order listed;
// every record listed must carry the key it is listed under.
func listed[K comparable, R, ID any](t *testing.T, s store.Store, index string, key K, list func(store.Tx, K) ([]R, error), keyAndID func(R) (K, ID)) []ID {
	t.Helper()
	var out []ID
	View(t, s, func(tx store.Tx) error {
		rs, err := list(tx, key)
		for _, r := range rs {
			k, id := keyAndID(r)
			if k != key {
				t.Errorf("%s(%v) listed a record of %v", index, key, k)
			}
			out = append(out, id)
		}
		return err
	})
	return out
}
