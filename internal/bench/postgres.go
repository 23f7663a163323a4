package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/internal/daemon"
)

// startSelfPostgres runs serve in this process on the PostgreSQL database at base, in a
// schema of its own that stop drops, so that each scenario starts from an empty registry.
func startSelfPostgres(ctx context.Context, base, prefix, logLevel string, stderr io.Writer) (*benchTarget, error) {
	var b [6]byte
	rand.Read(b[:])
	schema := "svrp_bench_" + hex.EncodeToString(b[:])
	if err := pgExec(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("creating a schema for the run: %w", err)
	}
	drop := func() { pgExec(context.Background(), base, "DROP SCHEMA "+schema+" CASCADE") }
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return nil, fmt.Errorf("--postgres must be a postgres:// URL")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	c := benchServeConfig(false, "", prefix, logLevel)
	c.Postgres = u.String()
	if err := c.Validate(); err != nil {
		drop()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- daemon.Run(sctx, c, daemon.NewLogger(stderr, logLevel, "text"), ready) }()
	select {
	case addr := <-ready:
		host, _, _ := net.SplitHostPort(addr)
		return &benchTarget{
			label: "self-postgres", base: "http://" + addr, addr: addr, host: addr, hostname: host, self: true,
			stop: func() {
				cancel()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
				}
				drop()
			},
		}, nil
	case err := <-done:
		cancel()
		drop()
		return nil, err
	}
}

func pgExec(ctx context.Context, base, sql string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}
