package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

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
		if err != nil || c != (store.Counter{}) {
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
			"EachCounter": func() error { return tx.EachCounter(func(string, store.Counter) error { return count() }) },
			"EachBinding": func() error { return tx.EachBinding(func(binding.Binding) error { return count() }) },
			"EachRevocation": func() error {
				return tx.EachRevocation(func(store.Revocation) error { return count() })
			},
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

// nodeSessionBinding is a node of k, its session s1 and its binding, fresh at each call.
func nodeSessionBinding(k didkey.PublicKey) (store.Node, binding.BindingSession, binding.Binding) {
	return Node(k), Session("s1", k), Binding(k, "did:svrp:o:0a1b2c3d")
}

func testRoundTrip(t *testing.T, s store.Store) {
	k := Key(1)
	n, sess, b := nodeSessionBinding(k)
	bearer := BearerSession("did:svrp:o:0a1b2c3d")
	c := store.Counter{Count: 3, Start: Time(10)}
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
		readBack(t, "store.Node", tx.Node, k, n)
		readBack(t, "Session", tx.BindingSession, "s1", sess)
		readBack(t, "bare Session", tx.BindingSession, "s2", bare)
		readBack(t, "Binding", tx.Binding, k, b)
		readBack(t, "OperatorSession", tx.BearerSession, Hash("tok"), bearer)
		readBack(t, "Counter", tx.Counter, "resolve|1.2.3.4", c)
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
	n, sess, b := nodeSessionBinding(k)
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

	wantN, wantS, wantB := nodeSessionBinding(k)
	check := func(when string) {
		t.Helper()
		View(t, s, func(tx store.Tx) error {
			readBack(t, when+": store.Node", tx.Node, k, wantN)
			readBack(t, when+": Session", tx.BindingSession, "s1", wantS)
			readBack(t, when+": Binding", tx.Binding, k, wantB)
			return nil
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

func testRevocations(t *testing.T, s store.Store) {
	r := store.Revocation{
		OperatorDID: "did:svrp:o:aaaaaaaa", RevocationID: "rev/1", RevokedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		RootPublicKey: "E8gKx38u6QwwBBsuARXxMwYHiL11BqP8R7cLSnSbgLRo", Signature: "sig", RecordedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
		Group: "192.0.2.0/24", Proven: true,
	}
	// absent checks that r is not recorded, and that the store counts n revocations.
	absent := func(when string, r store.Revocation, n int) {
		t.Helper()
		View(t, s, func(tx store.Tx) error {
			_, err := tx.Revocation(r.OperatorDID, r.RevocationID)
			wantNotFound(t, "store.Revocation "+when, err)
			got, err := tx.RevocationCount()
			Diff(t, "RevocationCount "+when, n, got)
			return err
		})
	}
	absent("of an empty store", r, 0)
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
	third := r
	third.RevocationID = "rev-3"
	updateAborted(t, s, func(tx store.Tx) error { return tx.PutRevocation(third) })
	absent("after a failed transaction", third, 2)
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.PutRevocation(third) }); err == nil {
		t.Error("PutRevocation inside View succeeded")
	}
	if err := s.View(context.Background(), func(tx store.Tx) error { return tx.DeleteBinding(Key(1)) }); err == nil {
		t.Error("DeleteBinding inside View succeeded")
	}
}

func testCounters(t *testing.T, s store.Store) {
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutCounter("b", store.Counter{Count: 2, Start: Time(1)}),
			tx.PutCounter("a", store.Counter{Count: 1, Start: Time(2)}),
			tx.PutCounter("", store.Counter{Count: 9}),
		)
	})
	all := func() map[string]store.Counter {
		out := map[string]store.Counter{}
		var order []string
		View(t, s, func(tx store.Tx) error {
			return tx.EachCounter(func(k string, c store.Counter) error {
				out[k] = c
				order = append(order, k)
				return nil
			})
		})
		Diff(t, "EachCounter order", []string(rules.SortedKeys(out, strings.Compare)), order)
		return out
	}
	Diff(t, "EachCounter", map[string]store.Counter{
		"a": {Count: 1, Start: Time(2)}, "b": {Count: 2, Start: Time(1)}, "": {Count: 9},
	}, all())
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteCounter("b"), tx.PutCounter("a", store.Counter{Count: 5, Start: Time(3)}))
	})
	Diff(t, "EachCounter after delete", map[string]store.Counter{"a": {Count: 5, Start: Time(3)}, "": {Count: 9}}, all())
	View(t, s, func(tx store.Tx) error {
		c, err := tx.Counter("b")
		if c != (store.Counter{}) {
			t.Errorf("Counter after delete = %v, want zero", c)
		}
		return err
	})
}

func testCountersAtOnce(t *testing.T, s store.Store) {
	a, b := store.Counter{Count: 2, Start: Time(1)}, store.Counter{Count: 7, Start: Time(2)}
	Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutCounter("a", a), tx.PutCounter("", b), tx.PutCounter("a\x00b", b))
	})
	check := func(tx store.Tx) error {
		got, err := tx.Counters("absent", "a", "", "a", "a\x00b")
		Diff(t, "Counters", []store.Counter{{}, a, b, a, b}, got)
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
	Diff(t, "ReadCounters", []store.Counter{{}, a, b, a, b}, got)
	// In an Update, Counters sees the transaction's own writes.
	Update(t, s, func(tx store.Tx) error {
		b.Count = 8
		if err := errors.Join(tx.PutCounter("a\x00b", b), tx.DeleteCounter("a")); err != nil {
			return err
		}
		got, err := tx.Counters("a", "a\x00b")
		Diff(t, "Counters after writes in the Update", []store.Counter{{}, b}, got)
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
		stored *store.Counter
		now    time.Time
	}{
		{"absent", nil, start},
		{"running", &store.Counter{Count: 3, Start: start}, start.Add(window - time.Second)},
		{"running, start with nanoseconds", &store.Counter{Count: 1, Start: Time(1)}, Time(1).Add(window - time.Second)},
		{"ended exactly", &store.Counter{Count: 3, Start: start}, start.Add(window)},
		{"ended long ago", &store.Counter{Count: 3, Start: start}, start.Add(24 * time.Hour)},
		{"zero count", &store.Counter{Count: 0, Start: start}, start.Add(time.Second)},
		{"negative count", &store.Counter{Count: -4, Start: start}, start.Add(time.Second)},
		{"zero start", &store.Counter{Count: 9}, start},
		{"at the top", &store.Counter{Count: math.MaxInt, Start: start}, start.Add(time.Second)},
		{"below the top", &store.Counter{Count: math.MaxInt - 1, Start: start}, start.Add(time.Second)},
	}
	for i, c := range cases {
		key := fmt.Sprint("event-", i)
		var want store.Counter
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
				tx.PutCounter(fmt.Sprint(i), store.Counter{Count: i}),
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
			"EachCounter": func(f func() error) error { return tx.EachCounter(func(string, store.Counter) error { return f() }) },
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
