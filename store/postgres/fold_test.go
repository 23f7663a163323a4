package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
	"github.com/svrp/svrp/store/storetest"
)

// TestHeartbeatLogFold flushes heartbeats to the log and reads them back before the fold,
// through every read of last_seen outside a daemon's memory (one node, every node, a
// daemon's first read of the feed), then folds: the log is emptied, the liveness rows hold
// each node's latest heartbeat, and the reads give the same times.
func TestHeartbeatLogFold(t *testing.T) {
	u := freshSchema(t)
	p := openPostgres(t, u)
	defer p.Close()
	ctx := context.Background()
	// Keys in several buckets, and two in one.
	keys := []didkey.PublicKey{storetest.Key(1), storetest.Key(2), storetest.Key(3), storetest.Key(4)}
	keys[3][0] = keys[2][0]
	storetest.Update(t, p, func(tx store.Tx) error {
		for _, k := range keys {
			if err := tx.PutNode(storetest.Node(k)); err != nil {
				return err
			}
		}
		return nil
	})
	want := map[didkey.PublicKey]time.Time{}
	for i, k := range keys {
		want[k] = storetest.Time(50 + i).UTC()
	}
	// Two flushes: the later time wins whatever the order, within a flush too, and keys[0]
	// beats in neither.
	first := []didkey.PublicKey{keys[1], keys[2], keys[3], keys[1]}
	if err := p.TouchNodes(ctx, first, []time.Time{storetest.Time(5), storetest.Time(10), want[keys[3]], want[keys[1]]}); err != nil {
		t.Fatal(err)
	}
	if err := p.TouchNodes(ctx, keys[1:], []time.Time{storetest.Time(20), want[keys[2]], storetest.Time(20)}); err != nil {
		t.Fatal(err)
	}
	want[keys[0]] = storetest.Node(keys[0]).LastSeen.UTC()

	check := func(when string) {
		t.Helper()
		storetest.View(t, p, func(tx store.Tx) error {
			for _, k := range keys {
				n, err := tx.Node(k)
				if err != nil {
					return err
				}
				if !n.LastSeen.Equal(want[k]) {
					t.Errorf("%s: Node(%x…).LastSeen = %v, want %v", when, k[:4], n.LastSeen, want[k])
				}
			}
			return tx.EachNode(func(n store.Node) error {
				if !n.LastSeen.Equal(want[n.Key]) {
					t.Errorf("%s: EachNode's %x… last_seen %v, want %v", when, n.Key[:4], n.LastSeen, want[n.Key])
				}
				return nil
			})
		})
		got := map[didkey.PublicKey]time.Time{}
		_, err := p.NodeChanges(ctx, 0, func(n store.Node, _ uint64) { got[n.Key] = n.LastSeen },
			func(didkey.PublicKey, uint64) {},
			func(k didkey.PublicKey, at time.Time) {
				if at.After(got[k]) {
					got[k] = at
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !got[k].Equal(want[k]) {
				t.Errorf("%s: a first read of the feed has %x… at %v, want %v", when, k[:4], got[k], want[k])
			}
		}
	}
	logRows := func() (n int) {
		t.Helper()
		if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM svrp_node_touches`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	check("before the fold")
	if n := logRows(); n != 4 {
		t.Errorf("%d log rows after two flushes over two buckets each, want 4", n)
	}

	// Maintain folds nothing while the log is younger than a fold's wait.
	if err := p.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logRows(); n != 4 {
		t.Fatalf("%d log rows after a Maintain with no fold due, want 4", n)
	}
	if _, err := p.pool.Exec(ctx, `UPDATE svrp_node_touches SET at = at - $1`, int64((touchKept+foldEvery)/time.Second)+1); err != nil {
		t.Fatal(err)
	}
	if err := p.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logRows(); n != 0 {
		t.Fatalf("%d log rows after a fold, want 0", n)
	}
	for _, k := range keys[1:] {
		var seen int64
		if err := p.pool.QueryRow(ctx, `SELECT seen FROM svrp_node_seen WHERE key = $1`, k[:]).Scan(&seen); err != nil {
			t.Fatal(err)
		}
		if got := time.Unix(0, seen).UTC(); !got.Equal(want[k]) {
			t.Errorf("liveness row of %x… holds %v after the fold, want %v", k[:4], got, want[k])
		}
	}
	check("after the fold")

	// A heartbeat older than the folded one moves nothing back.
	if err := p.TouchNode(ctx, keys[1], storetest.Time(1)); err != nil {
		t.Fatal(err)
	}
	check("after an older heartbeat")
}

// TestMigrateFlushLog opens a database of the layout before the flush log was folded, with
// a flush logged: it migrates in place, and the node keeps the last_seen its liveness row
// holds.
func TestMigrateFlushLog(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	conn := schemaAt(t, u, 8)
	k := storetest.Key(1)
	n := storetest.Node(k)
	seen := storetest.Time(90).UTC()
	// What that layout's registration and flush leave.
	_, err := conn.Exec(ctx, `INSERT INTO svrp_nodes (key, did, did_seq, short_body, rec, rev, xid) VALUES ($1, $2, 1, $3, $4, 1, 1)`,
		k[:], []byte(n.DID), k.ShortBody(), nodecodec.Append(nil, n))
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO svrp_node_seen (key, seen) VALUES ($1, $2)`, k[:], seen.UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO svrp_node_touches (xid, at, keys, seen) VALUES (1, $1, $2, $3)`,
		time.Now().Unix(), [][]byte{k[:]}, []int64{seen.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	p := openMigrated(t, u)
	defer p.Close()
	storetest.View(t, p, func(tx store.Tx) error {
		got, err := tx.Node(k)
		if err == nil && !got.LastSeen.Equal(seen) {
			t.Errorf("last_seen %v after migrating, want %v", got.LastSeen, seen)
		}
		return err
	})
	later := seen.Add(time.Minute)
	if err := p.TouchNode(ctx, k, later); err != nil {
		t.Fatalf("a heartbeat after migrating: %v", err)
	}
	storetest.View(t, p, func(tx store.Tx) error {
		got, err := tx.Node(k)
		if err == nil && !got.LastSeen.Equal(later) {
			t.Errorf("last_seen %v after a heartbeat at %v", got.LastSeen, later)
		}
		return err
	})
}
