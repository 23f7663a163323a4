package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
)

// BenchmarkHeartbeatFlush measures what docs/scale.md builds its heartbeat model on, over
// a table of SVRPD_BENCH_NODES nodes (100,000 unless set) in the schema
// SVRPD_BENCH_SCHEMA, which it fills when empty and keeps, so that two builds can be
// measured in turn on tables of their own (run it with -benchtime=1x): the WAL and time of
// one flush of the heartbeats of one second when every node beats once a minute, right
// after a CHECKPOINT and then in steady state; what another daemon reads to follow each
// flush; in a build that folds its flush log, the reads of last_seen outside a daemon's
// memory with a fold's worth of flushes logged, the fold of them, and the server time per
// heartbeat of the flushes and the fold together; and the dead row
// versions all these writes leave and what a VACUUM of them costs.
func BenchmarkHeartbeatFlush(b *testing.B) {
	schema := os.Getenv("SVRPD_BENCH_SCHEMA")
	if schema == "" {
		b.Skip("SVRPD_BENCH_SCHEMA is not set")
	}
	n := 100_000
	if v := os.Getenv("SVRPD_BENCH_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("SVRPD_BENCH_NODES=%q", v)
		}
	}
	ctx := context.Background()
	base := pgtest.URL(b)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
		b.Fatal(err)
	}
	u := pgtest.WithSearchPath(base, schema)
	p, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	follower, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer follower.Close()
	if _, err := conn.Exec(ctx, `SET search_path = `+schema); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM svrp_nodes`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have != n {
		start := time.Now()
		fillBench(b, ctx, p, n, now)
		benchReport(b, time.Since(start).Seconds(), "fill-s")
	}
	q := func(sql string, args ...any) (v int64) {
		b.Helper()
		if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	lsn := func() int64 {
		return q(`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`)
	}
	benchReport(b, float64(q(`SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class AS c
		JOIN pg_namespace AS s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'svrp_node%'`, schema))/float64(n), "pg-bytes/node")

	// What the fill left for VACUUM is not the flushes'.
	if _, err := conn.Exec(ctx, `VACUUM svrp_nodes, `+benchVacuumed); err != nil {
		b.Fatal(err)
	}
	writes := func() int64 {
		return q(`SELECT COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname LIKE 'svrp_node%'`, schema)
	}
	for range b.N {
		written := writes()
		mark, err := benchFollow(ctx, follower, 0, func() {})
		if err != nil {
			b.Fatal(err)
		}
		rows := max(1, n/60)
		const steady = 6
		var walSteady, tookSteady, followRows int64
		var followTook time.Duration
		flush := func(round int) (time.Duration, int64) {
			keys := make([]didkey.PublicKey, rows)
			seen := make([]time.Time, rows)
			for i := range rows {
				// A stride through the table, as heartbeats come in no order of keys.
				keys[i] = benchFlushKey((round*rows + i*7919) % n)
				seen[i] = now.Add(time.Duration(round+1) * time.Second)
			}
			lsn0 := lsn()
			start := time.Now()
			if err := p.NodeFeed().TouchNodes(ctx, keys, seen); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			return took, lsn() - lsn0
		}
		for round := range steady + 1 {
			if round == 0 {
				if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
					b.Fatal(err)
				}
			}
			took, wal := flush(round)
			start := time.Now()
			followed := 0
			if mark, err = benchFollow(ctx, follower, mark, func() { followed++ }); err != nil {
				b.Fatal(err)
			}
			ft := time.Since(start)
			if round == 0 {
				benchReport(b, float64(wal)/float64(rows), "checkpoint-wal-B/heartbeat")
				benchReport(b, took.Seconds()*1e6/float64(rows), "checkpoint-us/heartbeat")
				continue
			}
			walSteady += wal
			tookSteady += int64(took)
			followRows += int64(followed)
			followTook += ft
		}
		benchReport(b, float64(rows), "heartbeats/flush")
		benchReport(b, float64(walSteady)/float64(steady*rows), "steady-wal-B/heartbeat")
		steadyUS := float64(tookSteady) / 1e3 / float64(steady*rows)
		benchReport(b, steadyUS, "steady-us/heartbeat")
		benchReport(b, float64(followRows)/followTook.Seconds(), "followed-heartbeats/s")
		benchReport(b, float64(followRows)/float64(steady*rows), "followed/flushed")

		// The rest of a fold's worth of flushes; what reads outside a daemon's memory cost
		// with the log that long, read before the fold; then the fold, whose time is shared by every heartbeat it
		// takes in.
		flushes := steady + 1
		for ; flushes < benchFoldRounds; flushes++ {
			flush(flushes)
		}
		readOutside := func() {
			start := time.Now()
			const reads = 100
			for i := range reads {
				k := benchFlushKey(i * 9973 % n)
				if err := p.View(ctx, func(tx store.Tx) error { _, err := tx.Node(k); return err }); err != nil {
					b.Fatal(err)
				}
			}
			benchReport(b, time.Since(start).Seconds()*1e3/reads, "node-read-ms")
			start = time.Now()
			if _, err := benchFollow(ctx, follower, 0, func() {}); err != nil {
				b.Fatal(err)
			}
			benchReport(b, time.Since(start).Seconds(), "first-read-s")
		}
		if benchFoldRounds > 0 {
			readOutside()
		}
		var foldUS float64
		var foldWrites int64
		if benchFoldRounds > 0 {
			lsn0 := lsn()
			start := time.Now()
			if foldWrites, err = benchFold(ctx, p); err != nil {
				b.Fatal(err)
			}
			foldUS = float64(time.Since(start).Microseconds()) / float64(flushes*rows)
			benchReport(b, float64(flushes*rows), "heartbeats/fold")
			benchReport(b, foldUS, "fold-us/heartbeat")
			benchReport(b, float64(lsn()-lsn0)/float64(flushes*rows), "fold-wal-B/heartbeat")
		}
		benchReport(b, steadyUS+foldUS, "amortised-us/heartbeat")

		// Dead row versions, once the statistics have the writes.
		deadline := time.Now().Add(30 * time.Second)
		for writes()-written < benchFlushWrites(flushes, rows)+foldWrites && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		dead := q(`SELECT COALESCE(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1 AND relname LIKE 'svrp_node%'`, schema)
		benchReport(b, float64(dead)/float64(flushes*rows), "dead-rows/heartbeat")
		lsn0 := lsn()
		start := time.Now()
		if _, err := conn.Exec(ctx, `VACUUM svrp_nodes, `+benchVacuumed); err != nil {
			b.Fatal(err)
		}
		benchReport(b, time.Since(start).Seconds()*1e6/float64(flushes*rows), "vacuum-us/heartbeat")
		benchReport(b, float64(lsn()-lsn0)/float64(flushes*rows), "vacuum-wal-B/heartbeat")
		// A build without a log to read reads after the count of dead row versions, which
		// its reads would prune.
		if benchFoldRounds == 0 {
			readOutside()
		}
	}
}

func benchFlushKey(i int) didkey.PublicKey {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i))
	return didkey.PublicKey(sha256.Sum256(seed[:]))
}

// fillBench writes n node records as a registration leaves them, in one COPY of the
// columns every layout of the node table has, and then what the layout keeps beside them.
func fillBench(b *testing.B, ctx context.Context, p *Store, n int, now time.Time) {
	sig := "5nG1o7rf7Ta39j6dZosAi7PBAmE5uGEYCFAZZ3mr6F3ZJ8huKbWz8d6xVS6EXLbSRVRD8wAwoAC9w5BGDe6Nzr7u"
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		k := benchFlushKey(i)
		d, _ := didkey.NodeDID(k, didkey.FormShort)
		node := store.Node{Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.113.%d:7000", i%250),
			Capabilities: []string{"inference"}, Region: "eu-west", Signature: &sig, SignatureVerified: true,
			FirstSeen: now, LastSeen: now}
		i++
		return []any{k[:], []byte(node.DID), int64(i), k.ShortBody(), nodecodec.Append(nil, node), int64(1), int64(1)}, nil
	})
	if _, err := p.pool.CopyFrom(ctx, pgx.Identifier{"svrp_nodes"}, []string{"key", "did", "did_seq", "short_body", "rec", "rev", "xid"}, src); err != nil {
		b.Fatal(err)
	}
	if err := benchFillBeside(ctx, p, now); err != nil {
		b.Fatal(err)
	}
}

func benchReport(b *testing.B, v float64, unit string) {
	b.ReportMetric(v, unit)
	fmt.Fprintf(os.Stderr, "%s %.4g %s\n", time.Now().UTC().Format(time.TimeOnly), v, unit)
}
