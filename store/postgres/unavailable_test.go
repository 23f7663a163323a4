package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/store"
)

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
