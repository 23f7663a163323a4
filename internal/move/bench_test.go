package move

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/postgres"
)

func benchKey(i int) didkey.PublicKey {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i))
	return didkey.PublicKey(sha256.Sum256(seed[:]))
}

// benchNode is a node record as a v1 registration with a signature leaves it.
func benchNode(i int, now time.Time) store.Node {
	k := benchKey(i)
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	sig := "5nG1o7rf7Ta39j6dZosAi7PBAmE5uGEYCFAZZ3mr6F3ZJ8huKbWz8d6xVS6EXLbSRVRD8wAwoAC9w5BGDe6Nzr7u"
	return store.Node{Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.113.%d:7000", i%250),
		Capabilities: []string{"inference"}, Region: "eu-west", Signature: &sig, SignatureVerified: true,
		FirstSeen: now, LastSeen: now}
}

func fillNodes(b *testing.B, s store.Store, n int, now time.Time) {
	for lo := 0; lo < n; lo += batchSize {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			for i := lo; i < min(lo+batchSize, n); i++ {
				if err := tx.PutNode(benchNode(i, now)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkMillion is one pass over a registry of SVRPD_BENCH_NODES nodes (run it with
// -benchtime=1x): a Badger store filled through the contract, migrated to PostgreSQL and
// back, backed up and restored, and then what docs/scale.md builds on: the node table in a
// daemon's memory, a listing built from it, and a heartbeat flush to PostgreSQL of the nodes
// that heartbeat in one second when each does once a minute.
func BenchmarkMillion(b *testing.B) {
	pgtest.URL(b)
	n := testkit.BenchNodes(b)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	for range b.N {
		dir := b.TempDir()
		src, err := badger.Open(filepath.Join(dir, "src"))
		if err != nil {
			b.Fatal(err)
		}
		timed(b, "fill-s", func() error { fillNodes(b, src, n, now); return nil })

		url := pgtest.Schema(b)
		pg, err := postgres.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		timed(b, "migrate-badger-to-pg-s", func() error { _, err := Copy(ctx, src, pg, io.Discard); return err })

		back, err := badger.Open(filepath.Join(dir, "back"))
		if err != nil {
			b.Fatal(err)
		}
		timed(b, "migrate-pg-to-badger-s", func() error { _, err := Copy(ctx, pg, back, io.Discard); return err })
		back.Close()

		f, err := os.Create(filepath.Join(dir, "backup"))
		if err != nil {
			b.Fatal(err)
		}
		timed(b, "backup-s", func() error { return badger.Backup(ctx, src, f) })
		size, _ := f.Seek(0, io.SeekCurrent)
		report(b, float64(size)/1e6, "backup-MB")
		f.Seek(0, io.SeekStart)
		timed(b, "restore-s", func() error { return badger.Restore(ctx, filepath.Join(dir, "restored"), f) })
		f.Close()

		// The node table as a daemon holds it, and one listing of it.
		before := heapInUse()
		var cached store.Store
		timed(b, "cache-load-s", func() (err error) { cached, err = store.WithNodeCache(ctx, src); return err })
		report(b, float64(heapInUse()-before)/1e6, "cache-heap-MB")
		svc, err := registry.New(registry.Config{Store: cached})
		if err != nil {
			b.Fatal(err)
		}
		h := httpapi.New(svc)
		before = heapInUse()
		start := time.Now()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/nodes", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		report(b, time.Since(start).Seconds(), "listing-build-s")
		report(b, float64(w.Body.Len())/1e6, "listing-MB")
		report(b, float64(heapInUse()-before)/1e6, "listing-heap-MB")
		cached.Close()

		benchFlush(b, ctx, pg, url, n, now)
		pg.Close()
	}
}

// benchFlush times one heartbeat flush to PostgreSQL of the nodes that heartbeat in one
// second when every node does once a minute, and what it wrote to the server's log.
func benchFlush(b *testing.B, ctx context.Context, pg *postgres.Store, url string, n int, now time.Time) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var tableBytes int64
	if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('svrp_nodes')`).Scan(&tableBytes); err != nil {
		b.Fatal(err)
	}
	report(b, float64(tableBytes)/float64(n), "pg-bytes/node")
	var mark int64
	timed(b, "follow-all-s", func() (err error) {
		mark, err = pg.NodeChanges(ctx, 0, func(store.Node, uint64) {}, func(didkey.PublicKey, uint64) {}, func(didkey.PublicKey, time.Time) {})
		return err
	})
	rows := max(1, n/60)
	for round := range 3 {
		keys := make([]didkey.PublicKey, rows)
		seen := make([]time.Time, rows)
		for i := range rows {
			keys[i] = benchKey((round*rows + i) % n)
			seen[i] = now.Add(time.Duration(round+1) * time.Minute)
		}
		var lsn0, lsn1 string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn0); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := pg.NodeFeed().TouchNodes(ctx, keys, seen); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		var wal int64
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn1); err != nil {
			b.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint`, lsn1, lsn0).Scan(&wal); err != nil {
			b.Fatal(err)
		}
		// What each other daemon then reads to follow the flush.
		start = time.Now()
		followed := 0
		count := func() { followed++ }
		if mark, err = pg.NodeChanges(ctx, mark, func(store.Node, uint64) { count() }, func(didkey.PublicKey, uint64) {},
			func(didkey.PublicKey, time.Time) { count() }); err != nil {
			b.Fatal(err)
		}
		if round == 2 {
			report(b, float64(rows), "flush-rows")
			report(b, took.Seconds(), "flush-s")
			report(b, float64(wal)/float64(rows), "flush-wal-bytes/row")
			report(b, time.Since(start).Seconds(), "follow-flush-s")
			report(b, float64(followed), "follow-flush-rows")
		}
	}
}

// report is b.ReportMetric that also writes the figure to stderr at once: a pass over a
// million nodes takes minutes, and a figure taken is not lost to a later step that fails.
// timed runs step, which must not fail, and reports the seconds it took as unit.
func timed(b *testing.B, unit string, step func() error) {
	b.Helper()
	start := time.Now()
	if err := step(); err != nil {
		b.Fatal(err)
	}
	report(b, time.Since(start).Seconds(), unit)
}

func report(b *testing.B, v float64, unit string) {
	b.ReportMetric(v, unit)
	fmt.Fprintf(os.Stderr, "%s %.4g %s\n", time.Now().UTC().Format(time.TimeOnly), v, unit)
}
