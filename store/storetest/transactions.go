package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/store"
)

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
			tx.EachCounter(func(k string, c store.Counter) error { all = append(all, k, c); return nil }),
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
			tx.PutCounter("c", store.Counter{Count: 1}),
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
			tx.PutCounter("c", store.Counter{Count: 2}),
			tx.PutCounter("d", store.Counter{Count: 2}),
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
	Update(t, s, func(tx store.Tx) error { return tx.PutCounter("c", store.Counter{Count: 1}) })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not propagate")
			}
		}()
		s.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.PutCounter("c", store.Counter{Count: 2}); err != nil {
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
	Update(t, s, func(tx store.Tx) error { return tx.PutCounter("c", store.Counter{Count: 3}) })
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
			"PutCounter":            tx.PutCounter("c", store.Counter{}),
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
			if err := tx.PutCounter("c", store.Counter{}); !errors.Is(err, store.ErrWriteInEach) {
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
	if err := kept.PutCounter("c", store.Counter{}); !errors.Is(err, store.ErrTxDone) {
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
			err := tx.EachCounter(func(string, store.Counter) error { n++; return nil })
			return n, err
		}, func(tx store.Tx, i int) error {
			return tx.PutCounter(fmt.Sprint("phantom-", i), store.Counter{Count: i})
		}},
	}
	for _, c := range cases {
		errs := make(chan error, writers)
		testkit.Together(writers, func(i int) {
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				n, err := c.size(tx)
				if err != nil || n >= capacity {
					return err
				}
				// Widen the window between the read and the write.
				time.Sleep(time.Millisecond)
				return c.write(tx, i)
			})
		})
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
