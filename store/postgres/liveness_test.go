package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
	"github.com/svrp/svrp/store/storetest"
)

// TestLivenessAfterCrash empties the unlogged liveness tables, as the server's recovery
// from a crash does: the nodes are all still served, none looks older than the repair (so
// none is expired for heartbeats the crash lost), and the next heartbeat restores each
// node's own time, in this daemon and in one that follows it.
func TestLivenessAfterCrash(t *testing.T) {
	u := freshSchema(t)
	p := openPostgres(t, u)
	defer p.Close()
	follower := storetest.NodeCache(t, openPostgres(t, u))
	defer follower.Close()
	ctx := context.Background()
	k1, k2 := storetest.Key(1), storetest.Key(2)
	storetest.Update(t, p, func(tx store.Tx) error {
		if err := tx.PutNode(storetest.Node(k1)); err != nil {
			return err
		}
		return tx.PutNode(storetest.Node(k2))
	})
	if err := p.TouchNode(ctx, k1, storetest.Time(50)); err != nil {
		t.Fatal(err)
	}

	crashed := time.Now()
	if _, err := p.pool.Exec(ctx, `TRUNCATE svrp_node_seen, svrp_node_touches`); err != nil {
		t.Fatal(err)
	}
	// The next read of the feed repairs the table.
	if _, err := p.NodeChanges(ctx, 1, func(store.Node, uint64) {}, func(didkey.PublicKey, uint64) {}, func(didkey.PublicKey, time.Time) {}); err != nil {
		t.Fatal(err)
	}
	reopened := openPostgres(t, u)
	defer reopened.Close()
	var count int
	storetest.View(t, reopened, func(tx store.Tx) error {
		return tx.EachNode(func(n store.Node) error {
			count++
			if n.LastSeen.Before(crashed) {
				t.Errorf("node %v: last_seen %v after the repair, before the crash at %v", n.Key, n.LastSeen, crashed)
			}
			return nil
		})
	})
	if count != 2 {
		t.Fatalf("%d nodes after the crash, want 2", count)
	}

	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	if err := p.NodeFeed().TouchNodes(ctx, []didkey.PublicKey{k1}, []time.Time{later}); err != nil {
		t.Fatal(err)
	}
	storetest.View(t, reopened, func(tx store.Tx) error {
		n, err := tx.Node(k1)
		if err == nil && !n.LastSeen.Equal(later) {
			t.Errorf("last_seen %v after a heartbeat at %v", n.LastSeen, later)
		}
		return err
	})
	deadline := time.Now().Add(followWait)
	for {
		var got store.Node
		storetest.View(t, follower, func(tx store.Tx) (err error) { got, err = tx.Node(k1); return err })
		if got.LastSeen.Equal(later) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the following daemon has last_seen %v %v after a heartbeat at %v", got.LastSeen, followWait, later)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMigrateLivenessOutOfNodeRows opens a database of the layout before the liveness
// table, with a heartbeat coalesced in the node row: it migrates in place and the node keeps
// its last_seen.
func TestMigrateLivenessOutOfNodeRows(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	conn := schemaAt(t, u, 7)
	k := storetest.Key(1)
	n := storetest.Node(k)
	touched := storetest.Time(90).UTC()
	_, err := conn.Exec(ctx, `INSERT INTO svrp_nodes (key, did, did_seq, short_body, rec, touched, rev, xid)
		VALUES ($1, $2, 1, $3, $4, $5, 1, 1)`,
		k[:], []byte(n.DID), k.ShortBody(), nodecodec.Append(nil, n), touched.UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	p := openMigrated(t, u)
	defer p.Close()
	storetest.View(t, p, func(tx store.Tx) error {
		got, err := tx.Node(k)
		if err == nil && !got.LastSeen.Equal(touched) {
			t.Errorf("last_seen %v after migrating, want the coalesced heartbeat %v", got.LastSeen, touched)
		}
		return err
	})
	if err := p.TouchNode(ctx, k, touched.Add(time.Minute)); err != nil {
		t.Errorf("a heartbeat after migrating: %v", err)
	}
}

// schemaAt lays out a fresh schema at u as migration version left it, and returns a
// connection to it for the test to fill as that layout's code would have.
func schemaAt(t *testing.T, u string, version int) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	for v := range version {
		if _, err := conn.Exec(ctx, migrations[v]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE svrp_schema SET version = $1`, version); err != nil {
		t.Fatal(err)
	}
	return conn
}

// openMigrated opens the store at u, which migrates it, and checks that it is at the
// latest version.
func openMigrated(t *testing.T, u string) *Store {
	t.Helper()
	p := openPostgres(t, u)
	var version int
	if err := p.pool.QueryRow(context.Background(), `SELECT version FROM svrp_schema`).Scan(&version); err != nil || version != SchemaVersion {
		t.Fatalf("schema version %d (%v) after opening, want %d", version, err, SchemaVersion)
	}
	return p
}
