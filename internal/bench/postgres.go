package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/internal/daemon"
)

// benchSchema creates a schema of its own for one run on the database at base, and returns
// a URL whose connections use it and a func that drops it.
func benchSchema(ctx context.Context, base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return "", nil, fmt.Errorf("--postgres must be a postgres:// URL")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "svrp_bench_" + hex.EncodeToString(b[:])
	if err := pgExec(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("creating a schema for the run: %w", err)
	}
	drop := func() { pgExec(context.Background(), base, "DROP SCHEMA "+schema+" CASCADE") }
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// startSelfPostgres runs serve in this process on the PostgreSQL database at base, in a
// schema of its own that stop drops, so that each scenario starts from an empty registry.
func startSelfPostgres(ctx context.Context, base, prefix, logLevel string, stderr io.Writer) (*benchTarget, error) {
	pgURL, drop, err := benchSchema(ctx, base)
	if err != nil {
		return nil, err
	}
	c := benchServeConfig(false, "", prefix, logLevel)
	c.Postgres = pgURL
	// The daemon's statements are its store's, read from its /metrics as a spawned
	// daemon's are.
	c.MetricsListen = daemon.MetricsOnMain
	t, err := runSelf(ctx, c, "self-postgres", stderr, drop)
	if err != nil {
		return nil, err
	}
	t.statements = func() (uint64, error) { return scrapeStatements(t.addr) }
	return t, nil
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

// startSpawnedPostgres starts n svrpd serve processes (as --spawn does) on one schema of the
// database at cfg.postgres, one after the other, so that the first creates the schema's
// tables. The target's clients are split between them.
func (b *bench) startSpawnedPostgres(ctx context.Context, n int) (*benchTarget, error) {
	pgURL, drop, err := benchSchema(ctx, b.cfg.postgres)
	if err != nil {
		return nil, err
	}
	level, _ := daemon.ParseLevel(b.cfg.logLevel)
	var ds []*benchDaemon
	stop := func() {
		for _, d := range ds {
			if err := d.stop(); err != nil {
				fmt.Fprintf(b.stderr, "svrpd bench: %v\n", err)
				b.stopFailed = true
			}
		}
		drop()
	}
	args := daemonArgsOn([]string{"--postgres", pgURL, "--max-nodes", "1073741824"}, b.cfg.prefix)
	var addrs []string
	for range n {
		d, err := spawnDaemon(ctx, b.start, b.daemonBin, args, b.stderr, level, daemonServeTimeout)
		if err != nil {
			stop()
			return nil, err
		}
		ds = append(ds, d)
		addrs = append(addrs, d.addr)
	}
	host, _, _ := net.SplitHostPort(addrs[0])
	return &benchTarget{
		label: fmt.Sprintf("spawn-postgres-%d", n), base: "http://" + addrs[0], addr: addrs[0], host: addrs[0], hostname: host,
		addrs: addrs, daemons: ds, stop: stop,
		statements: func() (uint64, error) {
			var sum uint64
			for _, a := range addrs {
				v, err := scrapeStatements(a)
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		},
	}, nil
}

// scrapeStatements reads svrpd_store_statements_total from the daemon's GET /metrics.
func scrapeStatements(addr string) (uint64, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("reading the daemon's statements: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, fmt.Errorf("reading the daemon's statements: %w", err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "svrpd_store_statements_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				break
			}
			return uint64(f), nil
		}
	}
	return 0, fmt.Errorf("GET http://%s/metrics has no svrpd_store_statements_total", addr)
}

// awaitListed waits until every daemon of a target that has several lists at least n nodes:
// each follows what the others wrote within a second, and a scenario that sent a heartbeat
// to a daemon that had not yet seen its node would measure a failure.
func (r *benchRun) awaitListed(n int) error {
	if len(r.t.addrs) < 2 {
		return nil
	}
	deadline := time.Now().Add(followTimeout)
	for _, a := range r.t.addrs {
		for {
			listed, err := r.countAt(a, "/nodes")
			if err != nil {
				return err
			}
			if listed >= n {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the daemon at %s lists %d of the %d nodes registered after %s", a, listed, n, followTimeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// followTimeout bounds how long setup waits for the daemons to list what the others
// registered; they follow the database within a second.
const followTimeout = 10 * time.Second
