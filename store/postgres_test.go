package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// postgresURL returns the server the PostgreSQL tests run against, from SVRPD_TEST_POSTGRES,
// or skips the test when it is not set.
func postgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("SVRPD_TEST_POSTGRES")
	if u == "" {
		t.Skip("SVRPD_TEST_POSTGRES is not set (e.g. postgres://root@127.0.0.1:5432/test): PostgreSQL tests skipped")
	}
	return u
}

// freshSchema creates an empty schema of its own for one test, dropped when the test ends,
// and returns a URL whose connections use it.
func freshSchema(t testing.TB) string {
	t.Helper()
	base := postgresURL(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "svrp_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("SVRPD_TEST_POSTGRES is set but the server cannot be reached: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base, schema)
}

func withSearchPath(t testing.TB, base, schema string) string {
	if strings.Contains(base, "://") {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return base + " search_path=" + schema
}

func openPostgres(t testing.TB, url string) *Postgres {
	t.Helper()
	p, err := OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPostgres(t *testing.T) {
	postgresURL(t)
	runSuite(t, func(t *testing.T) Store { return openPostgres(t, freshSchema(t)) })
}

func TestPostgresReopenAndNewerSchema(t *testing.T) {
	u := freshSchema(t)
	p := openPostgres(t, u)
	k := testKey(1)
	update(t, p, func(tx Tx) error { return tx.PutNode(testNode(k)) })
	p.Close()

	// A second open finds the schema current and the record kept.
	p = openPostgres(t, u)
	view(t, p, func(tx Tx) error {
		n, err := tx.Node(k)
		diff(t, "node after reopening", testNode(k), n)
		return err
	})
	if _, err := p.pool.Exec(context.Background(), `UPDATE svrp_schema SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := OpenPostgres(context.Background(), u); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("opening a newer schema: %v, want a refusal", err)
	}
}

func TestPostgresBadURL(t *testing.T) {
	_, err := OpenPostgres(context.Background(), "postgres://user:hunter2@[::1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("OpenPostgres with a bad URL: %v; want an error without the password", err)
	}
}

func TestPostgresTouchAndChallenge(t *testing.T) {
	p := openPostgres(t, freshSchema(t))
	defer p.Close()
	k := testKey(1)
	update(t, p, func(tx Tx) error { return tx.PutNode(testNode(k)) })
	later := testTime(50).UTC()
	if err := p.TouchNode(k, later); err != nil {
		t.Fatal(err)
	}
	// Never back.
	if err := p.TouchNode(k, testTime(40)); err != nil {
		t.Fatal(err)
	}
	if err := p.TouchNode(testKey(2), later); err != ErrNotFound {
		t.Errorf("TouchNode of an unknown key: %v, want ErrNotFound", err)
	}
	view(t, p, func(tx Tx) error {
		n, err := tx.Node(k)
		if !n.LastSeen.Equal(later) {
			t.Errorf("last_seen = %v, want %v", n.LastSeen, later)
		}
		return err
	})

	id := []byte("challenge-1")
	consume := func() error {
		return p.Update(context.Background(), func(tx Tx) error {
			return tx.(ChallengeConsumer).ConsumeChallenge(id, testTime(60))
		})
	}
	if err := consume(); err != nil {
		t.Fatal(err)
	}
	if err := consume(); err != ErrChallengeUsed {
		t.Errorf("second consumption: %v, want ErrChallengeUsed", err)
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
