// Package pgtest gives tests a PostgreSQL schema of their own on the server named by
// SVRPD_TEST_POSTGRES, and skips them with a clear message when it is not set. It is imported
// by tests only.
package pgtest

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

// Env names the variable that points the tests at a server, for instance
// postgres://root@127.0.0.1:5432/test.
const Env = "SVRPD_TEST_POSTGRES"

// URL returns the server's URL, or skips t when Env is not set.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		t.Skip(Env + " is not set (e.g. postgres://root@127.0.0.1:5432/test): PostgreSQL tests skipped")
	}
	return u
}

// Schema creates an empty schema for t, dropped when t ends, and returns a URL whose
// connections put their tables in it. It skips t when Env is not set and fails it when the
// server cannot be reached.
func Schema(t testing.TB) string {
	t.Helper()
	base := URL(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "svrp_test_" + hex.EncodeToString(b[:])
	if err := exec(base, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("%s is set but the schema could not be created: %v", Env, err)
	}
	t.Cleanup(func() {
		if err := exec(base, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(base, schema)
}

// Slots returns how many tests that each hold up to conns connections may run against the
// server at once, at most most: half of the connections the server has free now, so that its
// other clients, and the tests of other packages run at the same time, keep the other half.
// It is at least 1, since a test that runs alone needs no room beyond its own. It skips t
// when Env is not set and fails it when the server cannot be reached.
func Slots(t testing.TB, conns, most int) int {
	t.Helper()
	base := URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("%s is set but the server could not be reached: %v", Env, err)
	}
	defer conn.Close(ctx)
	var free int
	err = conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int
		- (SELECT count(*) FROM pg_stat_activity)::int`).Scan(&free)
	if err != nil {
		t.Fatalf("reading the server's free connections: %v", err)
	}
	return max(1, min(most, free/2/max(1, conns)))
}

func exec(base, sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// WithSearchPath returns base with its connections' search_path set to schema. Commits
// also skip waiting for the disk: tests check what a transaction sees, not what survives a
// crash of the server, and a flush per commit would cost them most of their time. For the
// same reason the connections skip TLS unless base asks for it with its own sslmode: the
// tests open many short pools to a server on the same machine, and a handshake per
// connection and an encryption per message cost them time and checked nothing of theirs.
func WithSearchPath(base, schema string) string {
	if strings.Contains(base, "://") {
		if u, err := url.Parse(base); err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			q.Set("synchronous_commit", "off")
			if !q.Has("sslmode") {
				q.Set("sslmode", "disable")
			}
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	s := base + " search_path=" + schema + " synchronous_commit=off"
	if !strings.Contains(base, "sslmode=") {
		s += " sslmode=disable"
	}
	return s
}
