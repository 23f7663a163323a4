package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// benchBadgerEnv names a directory where BenchmarkNodeCacheLoadBadger keeps the Badger store
// it fills, so that two builds load the same store and the filling is paid once.
const benchBadgerEnv = "SVRPD_BENCH_BADGER"

// benchNode is node i of the load benchmark's table, as a daemon of a live network holds
// it: a short DID, a public IPv4 endpoint, one of a few regions and capability lists, a
// signature.
func benchNode(i int, now time.Time) store.Node {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i))
	k := didkey.PublicKey(sha256.Sum256(seed[:]))
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	sig := "5nG1o7rf7Ta39j6dZosAi7PBAmE5uGEYCFAZZ3mr6F3ZJ8huKbWz8d6xVS6EXLbSRVRD8wAwoAC9w5BGDe6Nzr7u"
	caps := [][]string{{"inference"}, {"inference", "storage"}, {"relay"}}[i%3]
	region := []string{"eu-west", "us-east", "ap-south"}[i%3]
	return store.Node{Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.%d.%d:%d", i/250%250, i%250, 7000+i%1000),
		Capabilities: caps, Region: region, Signature: &sig, SignatureVerified: true,
		FirstSeen: now.Add(-time.Duration(i%3600) * time.Second), LastSeen: now, Origin: "203.0.113.0"}
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
