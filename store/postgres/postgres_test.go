package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

func postgresURL(t testing.TB) string { return pgtest.URL(t) }

func freshSchema(t testing.TB) string { return pgtest.Schema(t) }

func openPostgres(t testing.TB, url string) *Store {
	t.Helper()
	p, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pgOpener opens a store in a schema of each test's own. A test that opens several stores
// in turn, as each run of the model test does, gets its one schema emptied each time: a
// schema and its migrations per run would cost the model test most of its time.
func pgOpener(wrap func(testing.TB, store.Store) store.Store) func(t *testing.T) store.Store {
	schemas := map[*testing.T]string{}
	return func(t *testing.T) store.Store {
		u, reuse := schemas[t]
		if !reuse {
			u = freshSchema(t)
			schemas[t] = u
		}
		p := openPostgres(t, u)
		if reuse {
			_, err := p.pool.Exec(context.Background(), `TRUNCATE svrp_nodes, svrp_binding_sessions, svrp_bindings,
				svrp_operator_sessions, svrp_counters, svrp_used_challenges, svrp_secrets, svrp_revocations, svrp_used_session_ids, svrp_operator_pins, svrp_node_deletions, svrp_node_touches;
				UPDATE svrp_revocation_count SET n = 0`)
			if err != nil {
				t.Fatal(err)
			}
		}
		return wrap(t, p)
	}
}

func TestPostgres(t *testing.T) {
	postgresURL(t)
	storetest.Run(t, pgOpener(func(_ testing.TB, s store.Store) store.Store { return s }))
}

func TestPostgresReopenAndNewerSchema(t *testing.T) {
	u := freshSchema(t)
	p := openPostgres(t, u)
	k := storetest.Key(1)
	storetest.Update(t, p, func(tx store.Tx) error { return tx.PutNode(storetest.Node(k)) })
	p.Close()

	// A second open finds the schema current and the record kept.
	p = openPostgres(t, u)
	storetest.View(t, p, func(tx store.Tx) error {
		n, err := tx.Node(k)
		storetest.Diff(t, "node after reopening", storetest.Node(k), n)
		return err
	})
	if _, err := p.pool.Exec(context.Background(), `UPDATE svrp_schema SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := Open(context.Background(), u); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("opening a newer schema: %v, want a refusal", err)
	}
}

func TestPostgresBadURL(t *testing.T) {
	_, err := Open(context.Background(), "postgres://user:hunter2@[::1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Open with a bad URL: %v; want an error without the password", err)
	}
}

// A failure of the way to PostgreSQL is ErrUnavailable, with the cause kept for the log and
// a text for the client that names no cause; a failure of the statement is left as it is.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"connection refused", &pgconn.ConnectError{Config: &pgconn.Config{}}, true},
		{"connection reset", fmt.Errorf("reading: %w", syscall.ECONNRESET), true},
		{"connection lost", fmt.Errorf("store: %w", io.ErrUnexpectedEOF), true},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"not found", store.ErrNotFound, false},
		{"a coded refusal", proto.New(proto.RateLimited, "slow down"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unavailable(tc.err)
			if errors.Is(got, store.ErrUnavailable) != tc.want {
				t.Fatalf("errors.Is(unavailable(%v), ErrUnavailable) = %v, want %v", tc.err, !tc.want, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("the cause %v is lost", tc.err)
			}
			if tc.want && (proto.CodeOf(got) != proto.StoreUnavailable || proto.Text(got) != "the registry's store cannot be reached now; retry later") {
				t.Errorf("code %s, text %q: want STORE_UNAVAILABLE and a text without the cause", proto.CodeOf(got), proto.Text(got))
			}
		})
	}
	if unavailable(nil) != nil {
		t.Error("unavailable(nil) is not nil")
	}
}

// The pool size and the statement timeout reach the pool; a statement over the timeout is
// ErrUnavailable, and the schema's migration runs without the bound.
func TestPoolOptions(t *testing.T) {
	u := freshSchema(t)
	p, err := Open(context.Background(), u, WithPoolSize(3), WithStatementTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.pool.Config().MaxConns; got != 3 {
		t.Errorf("pool size %d, want 3", got)
	}
	err = p.View(context.Background(), func(tx store.Tx) error {
		return tx.(*pgTx).exec(`SELECT pg_sleep(1)`)
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a statement over the timeout: %v, want ErrUnavailable", err)
	}
}

func TestPostgresTouchAndChallenge(t *testing.T) {
	p := openPostgres(t, freshSchema(t))
	defer p.Close()
	k := storetest.Key(1)
	storetest.Update(t, p, func(tx store.Tx) error { return tx.PutNode(storetest.Node(k)) })
	later := storetest.Time(50).UTC()
	if err := p.TouchNode(context.Background(), k, later); err != nil {
		t.Fatal(err)
	}
	// Never back.
	if err := p.TouchNode(context.Background(), k, storetest.Time(40)); err != nil {
		t.Fatal(err)
	}
	if err := p.TouchNode(context.Background(), storetest.Key(2), later); err != store.ErrNotFound {
		t.Errorf("TouchNode of an unknown key: %v, want store.ErrNotFound", err)
	}
	storetest.View(t, p, func(tx store.Tx) error {
		n, err := tx.Node(k)
		if !n.LastSeen.Equal(later) {
			t.Errorf("last_seen = %v, want %v", n.LastSeen, later)
		}
		return err
	})

	id := []byte("challenge-1")
	consume := func() error {
		return p.Update(context.Background(), func(tx store.Tx) error {
			return tx.ConsumeChallenge(id, storetest.Time(60))
		})
	}
	if err := consume(); err != nil {
		t.Fatal(err)
	}
	if err := consume(); err != store.ErrChallengeUsed {
		t.Errorf("second consumption: %v, want store.ErrChallengeUsed", err)
	}
	if err := p.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Expired long ago, so forgotten: the MAC's expiry check is what refuses it then.
	if err := consume(); err != nil {
		t.Errorf("consumption after Maintain: %v", err)
	}

	a, err := p.Secret(context.Background(), "challenge-key")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Secret(context.Background(), "challenge-key")
	if err != nil || a != b || a == ([32]byte{}) {
		t.Errorf("Secret twice: %x, %x, %v; want one non-zero secret", a, b, err)
	}
}

func TestNodeCacheOverPostgres(t *testing.T) {
	postgresURL(t)
	storetest.Run(t, pgOpener(storetest.NodeCache))
}

// followWait bounds a test's wait for one cache to see another's change, which they do
// within a second.
const followWait = testkit.WaitBound

// TestNodeCacheFollows runs two caches on one database, as two daemons do: each sees the
// other's registrations and flushed heartbeats, and a node registered through one is found
// at once through the other.
func TestNodeCacheFollows(t *testing.T) {
	u := freshSchema(t)
	a := storetest.NodeCache(t, openPostgres(t, u))
	b := storetest.NodeCache(t, openPostgres(t, u))
	defer a.Close()
	defer b.Close()
	k := storetest.Key(1)
	n := storetest.Node(k)
	n.LastSeen = n.LastSeen.UTC()
	storetest.Update(t, a, func(tx store.Tx) error { return tx.PutNode(n) })

	// Found through b at once, even before b's next read of the feed.
	if err := b.TouchNode(context.Background(), k, storetest.Time(20).UTC()); err != nil {
		t.Fatalf("touch through b of a node registered through a: %v", err)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := a.RemoteChanges()
	deadline := time.Now().Add(followWait)
	for {
		var got store.Node
		storetest.View(t, a, func(tx store.Tx) (err error) { got, err = tx.Node(k); return err })
		if got.LastSeen.Equal(storetest.Time(20)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a sees last_seen %v %v after b flushed %v", got.LastSeen, followWait, storetest.Time(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a.RemoteChanges() == before {
		t.Error("a took b's flush without counting a remote change")
	}

	// A second record through b reaches a's scan.
	k2 := storetest.Key(2)
	storetest.Update(t, b, func(tx store.Tx) error { return tx.PutNode(storetest.Node(k2)) })
	deadline = time.Now().Add(followWait)
	for {
		var count int
		a.ScanNodes(context.Background(), func(*store.Node) error { count++; return nil })
		if count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's scan has %d nodes %v after b registered the second", count, followWait)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A record deleted through b leaves a's memory; registered again through b, it comes
	// back, with a revision above the one a dropped.
	storetest.Update(t, b, func(tx store.Tx) error { return tx.DeleteNode(k2) })
	waitNodes := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(followWait)
		for {
			var count int
			a.ScanNodes(context.Background(), func(*store.Node) error { count++; return nil })
			if count == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a's scan has %d nodes %v after b %s", count, followWait, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitNodes(1, "deleted the second")
	storetest.View(t, a, func(tx store.Tx) error {
		if _, err := tx.Node(k2); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a reads the deleted node: %v", err)
		}
		return nil
	})
	storetest.Update(t, b, func(tx store.Tx) error { return tx.PutNode(storetest.Node(k2)) })
	waitNodes(2, "registered the deleted node again")
}
