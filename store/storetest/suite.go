package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// Run checks the behaviour every Store must have. open returns a fresh, empty store;
// the suite closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	fresh := func(t *testing.T) store.Store {
		s := open(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"NotFound", testNotFound},
		{"RoundTrip", testRoundTrip},
		{"Isolation", testIsolation},
		{"DIDIndex", testDIDIndex},
		{"ShortBodyIndex", testShortBodyIndex},
		{"SecretIndex", testSecretIndex},
		{"OpenSessionsByNode", testSessionsByNode},
		{"DeleteSession", testDeleteSession},
		{"BindingSupersede", testBindingSupersede},
		{"DeleteBinding", testDeleteBinding},
		{"Revocations", testRevocations},
		{"OperatorSessions", testOperatorSessions},
		{"Counters", testCounters},
		{"CountersAtOnce", testCountersAtOnce},
		{"CountEvent", testCountEvent},
		{"EachStops", testEachStops},
		{"InvalidSession", testInvalidSession},
		{"Atomicity", testAtomicity},
		{"Panic", testPanic},
		{"Misuse", testMisuse},
		{"Context", testContext},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"NoPhantoms", testNoPhantoms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, fresh(t)) })
	}
	t.Run("Model", func(t *testing.T) { testModel(t, open) })
}

// Fixtures. Every field is set, and times carry nanoseconds and a non-UTC zone, so that a
// round trip that drops anything shows.

var zone = time.FixedZone("test", 2*3600)

func Key(i int) didkey.PublicKey {
	return didkey.PublicKey(sha256.Sum256(fmt.Appendf(nil, "key %d", i)))
}

func Hash(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func Time(i int) time.Time {
	return time.Date(2025, 3, 1, 12, 0, i, 123456789, zone)
}

func ptr[T any](v T) *T { return &v }

func ShortDID(k didkey.PublicKey) string { return "did:svrp:n:" + k.ShortBody() }

func FullDID(k didkey.PublicKey) string { return "did:svrp:" + k.Hex() }

func Node(k didkey.PublicKey) store.Node {
	return store.Node{
		Key:               k,
		DID:               ShortDID(k),
		Endpoint:          "203.0.113.7:7000",
		Capabilities:      []string{"gpu", "storage"},
		Region:            "eu-west",
		Signature:         ptr("3yZe7d"),
		SignatureVerified: true,
		FirstSeen:         Time(1),
		LastSeen:          Time(2),
	}
}

func Session(id string, k didkey.PublicKey) binding.BindingSession {
	return binding.BindingSession{
		ID:      id,
		State:   binding.PendingNodeAcceptance,
		NodeKey: k,
		Request: canonical.BindingSession{
			BindingSessionID:     id,
			NodeDID:              ShortDID(k),
			NodePublicKey:        k.Base58(),
			DeviceSummary:        "rack 4",
			OS:                   "linux",
			Region:               "eu-west",
			RequestedTaskTypes:   []string{"infer", "train"},
			RequestedSingleLimit: ptr(12.5),
			RequestedDailyLimit:  ptr(100.0),
			Nonce:                "n-" + id,
			CreatedAt:            "2025-03-01T12:00:00Z",
			ExpiresAt:            "2025-03-01T12:10:00Z",
		},
		NodeSignature: "5Kd3",
		CreatedAt:     Time(3),
		ExpiresAt:     Time(4),
		CodeHash:      Hash("code " + id),
		TokenHash:     Hash("token " + id),
		OperatorDID:   "did:svrp:o:0a1b2c3d",
		DeviceCredential: &authn.DeviceCredential{
			DeviceCredential: canonical.DeviceCredential{
				CredentialID:          "cred-1",
				OperatorDID:           "did:svrp:o:0a1b2c3d",
				OperatorRootPublicKey: "8Hq2",
				DeviceID:              "laptop",
				DevicePublicKey:       "9Jr3",
				Permissions:           []string{"nodes.bind"},
				IssuedAt:              "2025-03-01T11:00:00Z",
				ExpiresAt:             "2026-03-01T11:00:00Z",
				RevocationID:          "rev-c",
			},
			Signature: "2Ab",
		},
		Authorization: &binding.AuthorizationCredential{
			Authorization: canonical.Authorization{
				BindingSessionID: id,
				NodeDID:          ShortDID(k),
				OperatorDID:      "did:svrp:o:0a1b2c3d",
				TaskTypes:        []string{"infer"},
				SingleLimit:      ptr(10.0),
				DailyLimit:       nil,
				RevocationID:     "rev-a",
				IssuedAt:         "2025-03-01T12:01:00Z",
				ExpiresAt:        "2025-03-01T13:01:00Z",
			},
			Signature: "3Cd",
		},
		Acceptance: &binding.Acceptance{
			Acceptance: canonical.Acceptance{
				BindingSessionID:    id,
				NodeDID:             ShortDID(k),
				OperatorDID:         "did:svrp:o:0a1b2c3d",
				AuthorizationDigest: "ab12",
				Accepted:            true,
				IssuedAt:            "2025-03-01T12:02:00Z",
			},
			Signature: "4Ef",
		},
		ActivatedAt: Time(5),
		UpdatedAt:   Time(6),
	}
}

func Binding(k didkey.PublicKey, operator string) binding.Binding {
	return binding.Binding{
		NodeKey:      k,
		NodeDID:      ShortDID(k),
		OperatorDID:  operator,
		SessionID:    "sess-" + k.ShortBody(),
		TaskTypes:    []string{"infer", "train"},
		SingleLimit:  ptr(10.0),
		DailyLimit:   ptr(250.0),
		RevocationID: "rev-" + k.ShortBody(),
		ActivatedAt:  Time(7),
	}
}

func BearerSession(operator string) authn.BearerSession {
	return authn.BearerSession{OperatorDID: operator, IssuedAt: Time(8), ExpiresAt: Time(9)}
}

// Helpers that fail the test on a transaction error.

func Update(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func View(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func Diff(t testing.TB, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func wantNotFound(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: got error %v, want store.ErrNotFound", what, err)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	k := Key(1)
	View(t, s, func(tx store.Tx) error {
		_, err := tx.Node(k)
		wantNotFound(t, "store.Node", err)
		_, err = tx.NodeKeyByDID(ShortDID(k))
		wantNotFound(t, "NodeKeyByDID", err)
		_, err = tx.NodeKeyByDID("")
		wantNotFound(t, "NodeKeyByDID(\"\")", err)
		_, err = tx.BindingSession("nope")
		wantNotFound(t, "Session", err)
		_, err = tx.BindingSessionIDBySecret(Hash("x"))
		wantNotFound(t, "SessionIDBySecret", err)
		_, err = tx.BindingSessionIDBySecret([32]byte{})
		wantNotFound(t, "SessionIDBySecret(zero)", err)
		_, err = tx.Binding(k)
		wantNotFound(t, "Binding", err)
		_, err = tx.BearerSession(Hash("t"))
		wantNotFound(t, "OperatorSession", err)

		keys, err := tx.NodeKeysByShortBody(k.ShortBody())
		if err != nil || len(keys) != 0 {
			t.Errorf("NodeKeysByShortBody = %v, %v; want empty, nil", keys, err)
		}
		ss, err := tx.OpenBindingSessionsByNode(k)
		if err != nil || len(ss) != 0 {
			t.Errorf("OpenSessionsByNode = %v, %v; want empty, nil", ss, err)
		}
		bs, err := tx.BindingsByOperator("did:svrp:o:0a1b2c3d")
		if err != nil || len(bs) != 0 {
			t.Errorf("BindingsByOperator = %v, %v; want empty, nil", bs, err)
		}
		c, err := tx.Counter("c")
		if err != nil || c != (binding.Counter{}) {
			t.Errorf("Counter = %v, %v; want zero, nil", c, err)
		}
		n, err := tx.NodeCount()
		if err != nil || n != 0 {
			t.Errorf("NodeCount = %d, %v; want 0, nil", n, err)
		}
		calls := 0
		count := func() error { calls++; return nil }
		for name, each := range map[string]func() error{
			"EachNode":    func() error { return tx.EachNode(func(store.Node) error { return count() }) },
			"EachSession": func() error { return tx.EachBindingSession(func(binding.BindingSession) error { return count() }) },
			"EachOperatorSession": func() error {
				return tx.EachBearerSession(func([32]byte, authn.BearerSession) error { return count() })
			},
			"EachCounter": func() error { return tx.EachCounter(func(string, binding.Counter) error { return count() }) },
		} {
			if err := each(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if calls != 0 {
			t.Errorf("Each on an empty store called fn %d times", calls)
		}
		return nil
	})
	Update(t, s, func(tx store.Tx) error {
		if err := tx.DeleteBearerSession(Hash("t")); err != nil {
			t.Errorf("DeleteOperatorSession of absent: %v", err)
		}
		if err := tx.DeleteCounter("c"); err != nil {
			t.Errorf("DeleteCounter of absent: %v", err)
		}
		return nil
	})
}

func testRoundTrip(t *testing.T, s store.Store) {
	k := Key(1)
	n := Node(k)
	sess := Session("s1", k)
	b := Binding(k, "did:svrp:o:0a1b2c3d")
	bearer := BearerSession("did:svrp:o:0a1b2c3d")
	c := binding.Counter{Count: 3, Start: Time(10)}
	// A session as initiate leaves it: no pointers set, no operator yet.
	bare := binding.BindingSession{ID: "s2", State: binding.Initiated, NodeKey: k, CodeHash: Hash("c2"), CreatedAt: Time(11)}
	bare.Request.RequestedTaskTypes = []string{}
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutNode(n),
			tx.PutBindingSession(sess),
			tx.PutBindingSession(bare),
			tx.PutBinding(b),
			tx.PutBearerSession(Hash("tok"), bearer),
			tx.PutCounter("resolve|1.2.3.4", c),
		)
	})
	View(t, s, func(tx store.Tx) error {
		gotN, err := tx.Node(k)
		if err != nil {
			t.Fatal(err)
		}
		Diff(t, "store.Node", n, gotN)
		gotS, err := tx.BindingSession("s1")
		if err != nil {
			t.Fatal(err)
		}
		Diff(t, "Session", sess, gotS)
		gotBare, err := tx.BindingSession("s2")
		if err != nil {
			t.Fatal(err)
		}
		Diff(t, "bare Session", bare, gotBare)
		gotB, err := tx.Binding(k)
		if err != nil {
			t.Fatal(err)
		}
		Diff(t, "Binding", b, gotB)
		gotOS, err := tx.BearerSession(Hash("tok"))
		if err != nil {
			t.Fatal(err)
		}
		Diff(t, "OperatorSession", bearer, gotOS)
		gotC, err := tx.Counter("resolve|1.2.3.4")
		if err != nil {
			t.Fatal(err)
		}
		Diff(t, "Counter", c, gotC)
		return nil
	})
	// A Node with no signature and empty capabilities keeps both as they were.
	n2 := Node(Key(2))
	n2.Signature = nil
	n2.Capabilities = []string{}
	n2.Region = ""
	Update(t, s, func(tx store.Tx) error { return tx.PutNode(n2) })
	View(t, s, func(tx store.Tx) error {
		got, err := tx.Node(n2.Key)
		Diff(t, "store.Node without signature", n2, got)
		return err
	})
}

func testIsolation(t *testing.T, s store.Store) {
	k := Key(1)
	n := Node(k)
	sess := Session("s1", k)
	b := Binding(k, "did:svrp:o:0a1b2c3d")
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutNode(n), tx.PutBindingSession(sess), tx.PutBinding(b))
	})

	// Change what was passed in.
	n.Capabilities[0] = "changed"
	*n.Signature = "changed"
	sess.Request.RequestedTaskTypes[0] = "changed"
	*sess.Request.RequestedSingleLimit = -1
	sess.DeviceCredential.Permissions[0] = "changed"
	sess.Authorization.TaskTypes[0] = "changed"
	*sess.Authorization.SingleLimit = -1
	sess.Acceptance.Accepted = false
	b.TaskTypes[0] = "changed"
	*b.DailyLimit = -1

	wantN, wantS, wantB := Node(k), Session("s1", k), Binding(k, "did:svrp:o:0a1b2c3d")
	check := func(when string) {
		t.Helper()
		View(t, s, func(tx store.Tx) error {
			gotN, err := tx.Node(k)
			Diff(t, when+": store.Node", wantN, gotN)
			gotS, err2 := tx.BindingSession("s1")
			Diff(t, when+": Session", wantS, gotS)
			gotB, err3 := tx.Binding(k)
			Diff(t, when+": Binding", wantB, gotB)
			return errors.Join(err, err2, err3)
		})
	}
	check("after changing the inputs")

	// Change what came out, by every path that returns values.
	View(t, s, func(tx store.Tx) error {
		mutNode := func(n store.Node) { n.Capabilities[0] = "changed"; *n.Signature = "changed" }
		mutSession := func(s binding.BindingSession) {
			s.Request.RequestedTaskTypes[0] = "changed"
			*s.Request.RequestedDailyLimit = -1
			s.DeviceCredential.Permissions[0] = "changed"
			s.Authorization.TaskTypes[0] = "changed"
			*s.Authorization.SingleLimit = -1
			s.Acceptance.Signature = "changed"
		}
		mutBinding := func(b binding.Binding) { b.TaskTypes[0] = "changed"; *b.SingleLimit = -1 }

		gotN, err := tx.Node(k)
		if err != nil {
			return err
		}
		mutNode(gotN)
		if err := tx.EachNode(func(n store.Node) error { mutNode(n); return nil }); err != nil {
			return err
		}
		gotS, err := tx.BindingSession("s1")
		if err != nil {
			return err
		}
		mutSession(gotS)
		if err := tx.EachBindingSession(func(s binding.BindingSession) error { mutSession(s); return nil }); err != nil {
			return err
		}
		ss, err := tx.OpenBindingSessionsByNode(k)
		if err != nil {
			return err
		}
		mutSession(ss[0])
		gotB, err := tx.Binding(k)
		if err != nil {
			return err
		}
		mutBinding(gotB)
		bs, err := tx.BindingsByOperator("did:svrp:o:0a1b2c3d")
		if err != nil {
			return err
		}
		mutBinding(bs[0])
		return nil
	})
	check("after changing the outputs")
}

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
		var out []string
		View(t, s, func(tx store.Tx) error {
			ss, err := tx.OpenBindingSessionsByNode(k)
			for _, s := range ss {
				if s.NodeKey != k {
					t.Errorf("OpenSessionsByNode(%v) returned a session of %v", k, s.NodeKey)
				}
				out = append(out, s.ID)
			}
			return err
		})
		return out
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
		var out []didkey.PublicKey
		View(t, s, func(tx store.Tx) error {
			bs, err := tx.BindingsByOperator(op)
			for _, b := range bs {
				if b.OperatorDID != op {
					t.Errorf("BindingsByOperator(%s) returned a binding of %s", op, b.OperatorDID)
				}
				out = append(out, b.NodeKey)
			}
			return err
		})
		return out
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
	errAbort := errors.New("abort")
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.DeleteBinding(k1); err != nil {
			return err
		}
		return errAbort
	}); err != errAbort {
		t.Fatalf("Update = %v", err)
	}
	View(t, s, func(tx store.Tx) error {
		bs, err := tx.BindingsByOperator(opA)
		if len(bs) != 1 {
			t.Errorf("a failed DeleteBinding took effect: %+v", bs)
		}
		return err
	})
}

func testRevocations(t *testing.T, s store.Store) {
	r := store.Revocation{
		OperatorDID: "did:svrp:o:aaaaaaaa", RevocationID: "rev/1", RevokedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		RootPublicKey: "E8gKx38u6QwwBBsuARXxMwYHiL11BqP8R7cLSnSbgLRo", Signature: "sig", RecordedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
	}
	View(t, s, func(tx store.Tx) error {
		_, err := tx.Revocation(r.OperatorDID, r.RevocationID)
		wantNotFound(t, "store.Revocation before any", err)
		n, err := tx.RevocationCount()
		Diff(t, "RevocationCount of an empty store", 0, n)
		return err
	})
	Update(t, s, func(tx store.Tx) error { return tx.PutRevocation(r) })
	// Replacing a revocation does not count it twice; a pair that differs only where a '/'
	// falls is another revocation.
	r2 := r
	r2.Signature = "sig2"
	other := r
	other.OperatorDID, other.RevocationID = r.OperatorDID+"/rev", "1"
	Update(t, s, func(tx store.Tx) error { return errors.Join(tx.PutRevocation(r2), tx.PutRevocation(other)) })
	View(t, s, func(tx store.Tx) error {
		got, err := tx.Revocation(r.OperatorDID, r.RevocationID)
		Diff(t, "store.Revocation", r2, got)
		got, err2 := tx.Revocation(other.OperatorDID, other.RevocationID)
		Diff(t, "other store.Revocation", other, got)
		_, err3 := tx.Revocation(r.OperatorDID, "rev")
		wantNotFound(t, "store.Revocation of a prefix of an id", err3)
		n, err4 := tx.RevocationCount()
		Diff(t, "RevocationCount", 2, n)
		return errors.Join(err, err2, err4)
	})
	// A failed transaction neither records nor counts.
	errAbort := errors.New("abort")
	third := r
	third.RevocationID = "rev-3"
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRevocation(third); err != nil {
			return err
		}
		return errAbort
	}); err != errAbort {
		t.Fatalf("Update = %v", err)
	}
	View(t, s, func(tx store.Tx) error {
		_, err := tx.Revocation(third.OperatorDID, third.RevocationID)
		wantNotFound(t, "store.Revocation of a failed transaction", err)
		n, err := tx.RevocationCount()
		Diff(t, "RevocationCount after a failed transaction", 2, n)
		return err
	})
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.PutRevocation(third) }); err == nil {
		t.Error("PutRevocation inside View succeeded")
	}
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.DeleteBinding(Key(1)) }); err == nil {
		t.Error("DeleteBinding inside View succeeded")
	}
}

func sortKeys(ks ...didkey.PublicKey) []didkey.PublicKey {
	out := slices.Clone(ks)
	slices.SortFunc(out, cmpKey)
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
	if cmpHash(h2, h1) < 0 {
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
	slices.SortFunc(out, cmpHash)
	return out
}

func testCounters(t *testing.T, s store.Store) {
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutCounter("b", binding.Counter{Count: 2, Start: Time(1)}),
			tx.PutCounter("a", binding.Counter{Count: 1, Start: Time(2)}),
			tx.PutCounter("", binding.Counter{Count: 9}),
		)
	})
	all := func() map[string]binding.Counter {
		out := map[string]binding.Counter{}
		var order []string
		View(t, s, func(tx store.Tx) error {
			return tx.EachCounter(func(k string, c binding.Counter) error {
				out[k] = c
				order = append(order, k)
				return nil
			})
		})
		Diff(t, "EachCounter order", []string(sortedKeys(out, strings.Compare)), order)
		return out
	}
	Diff(t, "EachCounter", map[string]binding.Counter{
		"a": {Count: 1, Start: Time(2)}, "b": {Count: 2, Start: Time(1)}, "": {Count: 9},
	}, all())
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteCounter("b"), tx.PutCounter("a", binding.Counter{Count: 5, Start: Time(3)}))
	})
	Diff(t, "EachCounter after delete", map[string]binding.Counter{"a": {Count: 5, Start: Time(3)}, "": {Count: 9}}, all())
	View(t, s, func(tx store.Tx) error {
		c, err := tx.Counter("b")
		if c != (binding.Counter{}) {
			t.Errorf("Counter after delete = %v, want zero", c)
		}
		return err
	})
}

func testCountersAtOnce(t *testing.T, s store.Store) {
	a, b := binding.Counter{Count: 2, Start: Time(1)}, binding.Counter{Count: 7, Start: Time(2)}
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutCounter("a", a), tx.PutCounter("", b), tx.PutCounter("a\x00b", b))
	})
	check := func(tx store.Tx) error {
		got, err := tx.Counters("absent", "a", "", "a", "a\x00b")
		Diff(t, "Counters", []binding.Counter{{}, a, b, a, b}, got)
		if err != nil {
			return err
		}
		none, err := tx.Counters()
		if len(none) != 0 {
			t.Errorf("Counters() = %v, want none", none)
		}
		return err
	}
	View(t, s, check)
	got, err := s.ReadCounters(context.Background(), "absent", "a", "", "a", "a\x00b")
	if err != nil {
		t.Fatal(err)
	}
	Diff(t, "ReadCounters", []binding.Counter{{}, a, b, a, b}, got)
	// In an Update, Counters sees the transaction's own writes.
	Update(t, s, func(tx store.Tx) error {
		b.Count = 8
		if err := errors.Join(tx.PutCounter("a\x00b", b), tx.DeleteCounter("a")); err != nil {
			return err
		}
		got, err := tx.Counters("a", "a\x00b")
		Diff(t, "Counters after writes in the Update", []binding.Counter{{}, b}, got)
		return err
	})
}

// testCountEvent checks CountEvent against Counter.Fail, the rule it applies: a new window
// on an absent, empty or ended counter, one more in a running one with its start kept.
func testCountEvent(t *testing.T, s store.Store) {
	const window = 10 * time.Minute
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, zone)
	cases := []struct {
		name   string
		stored *binding.Counter
		now    time.Time
	}{
		{"absent", nil, start},
		{"running", &binding.Counter{Count: 3, Start: start}, start.Add(window - time.Second)},
		{"running, start with nanoseconds", &binding.Counter{Count: 1, Start: Time(1)}, Time(1).Add(window - time.Second)},
		{"ended exactly", &binding.Counter{Count: 3, Start: start}, start.Add(window)},
		{"ended long ago", &binding.Counter{Count: 3, Start: start}, start.Add(24 * time.Hour)},
		{"zero count", &binding.Counter{Count: 0, Start: start}, start.Add(time.Second)},
		{"negative count", &binding.Counter{Count: -4, Start: start}, start.Add(time.Second)},
		{"zero start", &binding.Counter{Count: 9}, start},
		{"at the top", &binding.Counter{Count: math.MaxInt, Start: start}, start.Add(time.Second)},
		{"below the top", &binding.Counter{Count: math.MaxInt - 1, Start: start}, start.Add(time.Second)},
	}
	for i, c := range cases {
		key := fmt.Sprint("event-", i)
		var want binding.Counter
		if c.stored != nil {
			Update(t, s, func(tx store.Tx) error { return tx.PutCounter(key, *c.stored) })
			want = *c.stored
		}
		want = want.Fail(c.now, window)
		Update(t, s, func(tx store.Tx) error {
			got, err := tx.CountEvent(key, c.now, window)
			Diff(t, c.name+": CountEvent", want, got)
			return err
		})
		View(t, s, func(tx store.Tx) error {
			got, err := tx.Counter(key)
			Diff(t, c.name+": Counter after CountEvent", want, got)
			return err
		})
	}
	// An Update that fails keeps none of its events.
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx store.Tx) error {
		if _, err := tx.CountEvent("event-0", start, window); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want boom", err)
	}
	View(t, s, func(tx store.Tx) error {
		got, err := tx.Counter("event-0")
		if got.Count != 1 {
			t.Errorf("count after a failed Update = %d, want 1", got.Count)
		}
		return err
	})
}

func testEachStops(t *testing.T, s store.Store) {
	Update(t, s, func(tx store.Tx) error {
		for i := range 3 {
			k := Key(i)
			err := errors.Join(
				tx.PutNode(Node(k)),
				tx.PutBindingSession(Session(fmt.Sprint("s", i), k)),
				tx.PutBearerSession(Hash(fmt.Sprint(i)), BearerSession("op")),
				tx.PutCounter(fmt.Sprint(i), binding.Counter{Count: i}),
			)
			if err != nil {
				return err
			}
		}
		return nil
	})
	stop := errors.New("stop")
	View(t, s, func(tx store.Tx) error {
		for name, each := range map[string]func(func() error) error{
			"EachNode": func(f func() error) error { return tx.EachNode(func(store.Node) error { return f() }) },
			"EachSession": func(f func() error) error {
				return tx.EachBindingSession(func(binding.BindingSession) error { return f() })
			},
			"EachOperatorSession": func(f func() error) error {
				return tx.EachBearerSession(func([32]byte, authn.BearerSession) error { return f() })
			},
			"EachCounter": func(f func() error) error { return tx.EachCounter(func(string, binding.Counter) error { return f() }) },
		} {
			calls := 0
			err := each(func() error {
				calls++
				if calls == 2 {
					return stop
				}
				return nil
			})
			if err != stop || calls != 2 {
				t.Errorf("%s: returned %v after %d calls, want stop after 2", name, err, calls)
			}
		}
		return nil
	})
}

func testInvalidSession(t *testing.T, s store.Store) {
	noID := Session("", Key(1))
	badState := Session("x", Key(1))
	badState.State = binding.StateInvalid
	worse := Session("y", Key(1))
	worse.State = 200
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for _, sess := range []binding.BindingSession{noID, badState, worse} {
			if err := tx.PutBindingSession(sess); err == nil {
				t.Errorf("PutSession(id %q, state %d) succeeded", sess.ID, sess.State)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	View(t, s, func(tx store.Tx) error {
		n := 0
		err := tx.EachBindingSession(func(binding.BindingSession) error { n++; return nil })
		if n != 0 {
			t.Errorf("%d invalid sessions stored", n)
		}
		return err
	})
}

// snapshot reads everything a Tx can show about a small set of records, to compare a store
// before and after something that must leave it unchanged.
func snapshot(t *testing.T, s store.Store, keys []didkey.PublicKey, dids, ops []string, hashes [][32]byte) []any {
	t.Helper()
	var out []any
	add := func(v any, err error) {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("snapshot: %v", err)
		}
		out = append(out, v, err != nil)
	}
	View(t, s, func(tx store.Tx) error {
		for _, k := range keys {
			add(tx.Node(k))
			add(tx.NodeKeysByShortBody(k.ShortBody()))
			add(tx.OpenBindingSessionsByNode(k))
			add(tx.Binding(k))
		}
		for _, d := range dids {
			add(tx.NodeKeyByDID(d))
		}
		for _, o := range ops {
			add(tx.BindingsByOperator(o))
		}
		for _, h := range hashes {
			add(tx.BindingSessionIDBySecret(h))
			add(tx.BearerSession(h))
		}
		add(tx.NodeCount())
		var all []any
		add(nil, errors.Join(
			tx.EachNode(func(n store.Node) error { all = append(all, n); return nil }),
			tx.EachBindingSession(func(s binding.BindingSession) error { all = append(all, s); return nil }),
			tx.EachBearerSession(func(h [32]byte, s authn.BearerSession) error { all = append(all, h, s); return nil }),
			tx.EachCounter(func(k string, c binding.Counter) error { all = append(all, k, c); return nil }),
		))
		out = append(out, all...)
		return nil
	})
	return out
}

func testAtomicity(t *testing.T, s store.Store) {
	k1, k2 := Key(1), Key(2)
	const opA, opB = "did:svrp:o:aaaaaaaa", "did:svrp:o:bbbbbbbb"
	s1 := Session("s1", k1)
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutNode(Node(k1)),
			tx.PutBindingSession(s1),
			tx.PutBinding(Binding(k1, opA)),
			tx.PutBearerSession(Hash("t1"), BearerSession(opA)),
			tx.PutCounter("c", binding.Counter{Count: 1}),
		)
	})
	keys := []didkey.PublicKey{k1, k2}
	dids := []string{ShortDID(k1), FullDID(k1), ShortDID(k2)}
	ops := []string{opA, opB}
	hashes := [][32]byte{s1.CodeHash, s1.TokenHash, Hash("new code"), Hash("t1"), Hash("t2")}
	before := snapshot(t, s, keys, dids, ops, hashes)

	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx store.Tx) error {
		n := Node(k1)
		n.DID = FullDID(k1)
		moved := s1
		moved.NodeKey = k2
		moved.CodeHash = Hash("new code")
		err := errors.Join(
			tx.PutNode(n),
			tx.PutNode(Node(k2)),
			tx.PutBindingSession(moved),
			tx.PutBindingSession(Session("s2", k2)),
			tx.PutBinding(Binding(k1, opB)),
			tx.PutBinding(Binding(k2, opA)),
			tx.DeleteBearerSession(Hash("t1")),
			tx.PutBearerSession(Hash("t2"), BearerSession(opB)),
			tx.PutCounter("c", binding.Counter{Count: 2}),
			tx.PutCounter("d", binding.Counter{Count: 2}),
			tx.DeleteCounter("c"),
		)
		if err != nil {
			t.Errorf("writes inside the failing Update: %v", err)
		}
		// The transaction sees its own writes.
		if got, err := tx.NodeKeyByDID(FullDID(k1)); err != nil || got != k1 {
			t.Errorf("inside Update: NodeKeyByDID = %v, %v", got, err)
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want the function's error as is", err)
	}
	Diff(t, "store after a failed Update", before, snapshot(t, s, keys, dids, ops, hashes))
}

func testPanic(t *testing.T, s store.Store) {
	Update(t, s, func(tx store.Tx) error { return tx.PutCounter("c", binding.Counter{Count: 1}) })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not propagate")
			}
		}()
		s.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.PutCounter("c", binding.Counter{Count: 2}); err != nil {
				return err
			}
			panic("in fn")
		})
	}()
	// The store is still usable and the write was undone.
	View(t, s, func(tx store.Tx) error {
		c, err := tx.Counter("c")
		if c.Count != 1 {
			t.Errorf("after a panicking Update, count = %d, want 1", c.Count)
		}
		return err
	})
	Update(t, s, func(tx store.Tx) error { return tx.PutCounter("c", binding.Counter{Count: 3}) })
}

func testMisuse(t *testing.T, s store.Store) {
	Update(t, s, func(tx store.Tx) error { return tx.PutNode(Node(Key(1))) })
	var kept store.Tx
	err := s.View(context.Background(), func(tx store.Tx) error {
		kept = tx
		for name, err := range map[string]error{
			"PutNode":               tx.PutNode(Node(Key(2))),
			"PutSession":            tx.PutBindingSession(Session("s", Key(2))),
			"PutBinding":            tx.PutBinding(Binding(Key(2), "op")),
			"PutOperatorSession":    tx.PutBearerSession(Hash("t"), BearerSession("op")),
			"DeleteOperatorSession": tx.DeleteBearerSession(Hash("t")),
			"PutCounter":            tx.PutCounter("c", binding.Counter{}),
			"DeleteCounter":         tx.DeleteCounter("c"),
			"CountEvent":            second(tx.CountEvent("c", Time(1), time.Minute)),
		} {
			if !errors.Is(err, store.ErrWriteInView) {
				t.Errorf("%s in View: %v, want store.ErrWriteInView", name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Node(Key(1)); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("store.Tx used after View: %v, want store.ErrTxDone", err)
	}
	err = s.Update(context.Background(), func(tx store.Tx) error {
		kept = tx
		return tx.EachNode(func(n store.Node) error {
			if err := tx.PutCounter("c", binding.Counter{}); !errors.Is(err, store.ErrWriteInEach) {
				t.Errorf("write during EachNode: %v, want store.ErrWriteInEach", err)
			}
			// Reads, including scans, are allowed.
			_, err := tx.OpenBindingSessionsByNode(n.Key)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.PutCounter("c", binding.Counter{}); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("store.Tx used after Update: %v, want store.ErrTxDone", err)
	}
	if _, err := kept.CountEvent("c", Time(1), time.Minute); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("CountEvent after Update: %v, want store.ErrTxDone", err)
	}
	if _, err := kept.Counters(); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("Counters after Update: %v, want store.ErrTxDone", err)
	}
	View(t, s, func(tx store.Tx) error {
		n, err := tx.NodeCount()
		if n != 1 {
			t.Errorf("NodeCount = %d, want 1", n)
		}
		return err
	})
}

func testContext(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	fn := func(store.Tx) error { ran = true; return nil }
	if err := s.View(ctx, fn); !errors.Is(err, context.Canceled) {
		t.Errorf("View with a cancelled context: %v", err)
	}
	if err := s.Update(ctx, fn); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a cancelled context: %v", err)
	}
	if ran {
		t.Error("fn ran under a cancelled context")
	}
}

func testConcurrentIncrements(t *testing.T, s store.Store) {
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, 3*workers)
	for range workers {
		wg.Add(3)
		go func() {
			defer wg.Done()
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				_, err := tx.CountEvent("events", Time(1), time.Hour)
				return err
			})
		}()
		go func() {
			defer wg.Done()
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				c, err := tx.Counter("hits")
				if err != nil {
					return err
				}
				c.Count++
				return tx.PutCounter("hits", c)
			})
		}()
		go func() {
			defer wg.Done()
			errs <- s.View(context.Background(), func(tx store.Tx) error {
				_, err := tx.Counter("hits")
				return err
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	View(t, s, func(tx store.Tx) error {
		cs, err := tx.Counters("hits", "events")
		if err != nil {
			return err
		}
		if cs[0].Count != workers || cs[1].Count != workers {
			t.Errorf("counts = %d, %d after %d increments and %d events", cs[0].Count, cs[1].Count, workers, workers)
		}
		return nil
	})
}

// second is the error of a call that also returns a value.
func second[T any](_ T, err error) error { return err }

// testNoPhantoms checks that Updates are serializable for decisions taken on what a lookup
// did not find, not only on records read: each writer adds a record to a set only if the set
// is below a cap, as the registry caps open sessions per node or refuses a second key for a
// short body. Concurrent writers must never take the set past the cap, which a store that
// only detects conflicts on records read (a phantom insert) would allow.
func testNoPhantoms(t *testing.T, s store.Store) {
	const writers, capacity = 16, 4
	k := Key(1)
	cases := []struct {
		name  string
		size  func(store.Tx) (int, error)
		write func(tx store.Tx, i int) error
	}{
		{"OpenSessionsByNode", func(tx store.Tx) (int, error) {
			ss, err := tx.OpenBindingSessionsByNode(k)
			return len(ss), err
		}, func(tx store.Tx, i int) error {
			return tx.PutBindingSession(Session(fmt.Sprint("phantom-", i), k))
		}},
		{"NodeCount", func(tx store.Tx) (int, error) { return tx.NodeCount() }, func(tx store.Tx, i int) error {
			return tx.PutNode(Node(Key(100 + i)))
		}},
		{"BindingsByOperator", func(tx store.Tx) (int, error) {
			bs, err := tx.BindingsByOperator("did:svrp:o:cccccccc")
			return len(bs), err
		}, func(tx store.Tx, i int) error {
			return tx.PutBinding(Binding(Key(200+i), "did:svrp:o:cccccccc"))
		}},
		{"EachCounter", func(tx store.Tx) (int, error) {
			n := 0
			err := tx.EachCounter(func(string, binding.Counter) error { n++; return nil })
			return n, err
		}, func(tx store.Tx, i int) error {
			return tx.PutCounter(fmt.Sprint("phantom-", i), binding.Counter{Count: i})
		}},
	}
	for _, c := range cases {
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.Update(context.Background(), func(tx store.Tx) error {
					n, err := c.size(tx)
					if err != nil || n >= capacity {
						return err
					}
					// Widen the window between the read and the write.
					time.Sleep(time.Millisecond)
					return c.write(tx, i)
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
		View(t, s, func(tx store.Tx) error {
			n, err := c.size(tx)
			if n != capacity {
				t.Errorf("%s: %d concurrent capped writers left %d records, want %d", c.name, writers, n, capacity)
			}
			return err
		})
	}
}
