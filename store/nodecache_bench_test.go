package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/storetest"
)

// benchBadgerEnv names a directory where BenchmarkNodeCacheLoadBadger keeps the Badger store
// it fills, so that two builds load the same store and the filling is paid once.
const benchBadgerEnv = "SVRPD_BENCH_BADGER"

// benchNode is storetest.ScaleNode with the origin a registration over the API records, as
// a daemon loads its nodes from its store.
func benchNode(i int, now time.Time) store.Node {
	n := storetest.ScaleNode(i, now)
	n.Origin = "203.0.113.0"
	return n
}

// liveHeap is the bytes of live heap objects after a collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkNodeCacheLoadBadger loads a Badger store of SVRPD_BENCH_NODES nodes into the node
// cache, as svrpd does at start, and reports the heap the cache holds per node and the time
// the load took. The store is filled once, in SVRPD_BENCH_BADGER when set.
func BenchmarkNodeCacheLoadBadger(b *testing.B) {
	n := testkit.BenchNodes(b)
	ctx := context.Background()
	dir := os.Getenv(benchBadgerEnv)
	if dir == "" {
		dir = b.TempDir()
	}
	filled := filepath.Join(dir, fmt.Sprintf("filled-%d", n))
	if _, err := os.Stat(filled); err != nil {
		fillBadger(b, filepath.Join(dir, "store"), n)
		if err := os.WriteFile(filled, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		inner, err := badger.Open(filepath.Join(dir, "store"))
		if err != nil {
			b.Fatal(err)
		}
		before := liveHeap()
		start := time.Now()
		st, err := store.WithNodeCache(ctx, inner)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		table := liveHeap() - before
		b.ReportMetric(float64(table)/float64(n), "table-bytes/node")
		b.ReportMetric(took.Seconds(), "load-s")
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func fillBadger(b *testing.B, dir string, n int) {
	st, err := badger.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1_767_225_600, 0).UTC()
	for lo := 0; lo < n; lo += 1000 {
		err := st.Update(context.Background(), func(tx store.Tx) error {
			for i := lo; i < min(lo+1000, n); i++ {
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
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
}
