package badger

import (
	"context"
	"testing"
	"time"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
	"github.com/svrp/svrp/store/storetest"
)

// TestHeartbeatLeavesTheRecord flushes a heartbeat through the node cache: the record on
// disk keeps its last_seen, the heartbeat is a key of its own, and every read (one node, the
// whole table, the table reopened) takes the later time. A write of the record, or its
// deletion, drops the heartbeat's key.
func TestHeartbeatLeavesTheRecord(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	k1, k2 := storetest.Key(1), storetest.Key(2)
	n1 := storetest.Node(k1)
	s := openBadger(t, dir)
	storetest.Update(t, s, func(tx store.Tx) error {
		if err := tx.PutNode(n1); err != nil {
			return err
		}
		return tx.PutNode(storetest.Node(k2))
	})
	c := storetest.NodeCache(t, s)
	later := n1.LastSeen.Add(90 * time.Second).UTC()
	if err := c.(store.NodeToucher).TouchNode(ctx, k1, later); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()

	db, err := dgbadger.Open(dgbadger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(txn *dgbadger.Txn) error {
		item, err := txn.Get(key(pNode, k1.Hex()))
		if err != nil {
			return err
		}
		raw, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		rec, err := nodecodec.Decode(raw)
		if err == nil && !rec.LastSeen.Equal(n1.LastSeen) {
			t.Errorf("the record's last_seen is %v after a heartbeat flush, want it kept at %v", rec.LastSeen, n1.LastSeen)
		}
		if _, err := txn.Get(key(pSeen, k1.Hex())); err != nil {
			t.Errorf("no heartbeat key after a flush: %v", err)
		}
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s = openBadger(t, dir)
	defer s.Close()
	storetest.View(t, s, func(tx store.Tx) error {
		n, err := tx.Node(k1)
		if err == nil && !n.LastSeen.Equal(later) {
			t.Errorf("Node: last_seen %v, want the flushed heartbeat %v", n.LastSeen, later)
		}
		return tx.EachNode(func(n store.Node) error {
			want := storetest.Node(n.Key).LastSeen
			if n.Key == k1 {
				want = later
			}
			if !n.LastSeen.Equal(want) {
				t.Errorf("EachNode: %v has last_seen %v, want %v", n.Key, n.LastSeen, want)
			}
			return nil
		})
	})

	// The record written again is the node's whole state, last_seen included.
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutNode(n1) })
	storetest.View(t, s, func(tx store.Tx) error {
		n, err := tx.Node(k1)
		if err == nil && !n.LastSeen.Equal(n1.LastSeen) {
			t.Errorf("last_seen %v after PutNode, want the record's %v", n.LastSeen, n1.LastSeen)
		}
		return err
	})
}
