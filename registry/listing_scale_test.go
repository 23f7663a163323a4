//go:build unix

package registry_test

// A benchmark of the whole node listing over a table of SVRPD_BENCH_NODES nodes (100,000
// unless set): what docs/scale.md's memory and listing figures are measured with.

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

// heapObjects is the bytes of live and not yet swept heap objects, read without stopping the
// world, so that it may be sampled while a listing is written.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// settledHeap is the heap objects' bytes after a collection, on the scale of heapObjects.
func settledHeap() uint64 {
	runtime.GC()
	return heapObjects()
}

// peakWatch samples the heap until stopped and returns the most it saw.
func peakWatch() (stop func() uint64) {
	done := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, heapObjects())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return max(peak, heapObjects())
	}
}

// cpuTime is the CPU time the process has used, user and system: on a machine shared with
// other work it is steadier than the wall clock.
func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// hashingWriter is a ResponseWriter that keeps a digest of the body, its length and when its
// first byte came, not the body.
type hashingWriter struct {
	header http.Header
	code   int
	sum    hash.Hash
	n      int64
	first  time.Time
}

func newHashingWriter() *hashingWriter {
	return &hashingWriter{header: http.Header{}, code: 200, sum: sha256.New()}
}

func (w *hashingWriter) Header() http.Header { return w.header }
func (w *hashingWriter) WriteHeader(c int)   { w.code = c }
func (w *hashingWriter) Write(b []byte) (int, error) {
	if w.first.IsZero() && len(b) > 0 {
		w.first = time.Now()
	}
	w.n += int64(len(b))
	return w.sum.Write(b)
}

// gunzipWriter is a ResponseWriter that hashes the decoded body of a gzip answer as it
// comes.
type gunzipWriter struct {
	*hashingWriter
	plain *hashingWriter
	pw    *io.PipeWriter
	done  chan error
}

func newGunzipWriter() *gunzipWriter {
	pr, pw := io.Pipe()
	w := &gunzipWriter{hashingWriter: newHashingWriter(), plain: newHashingWriter(), pw: pw, done: make(chan error, 1)}
	go func() {
		zr, err := gzip.NewReader(pr)
		if err == nil {
			_, err = io.Copy(w.plain, zr)
		}
		io.Copy(io.Discard, pr)
		w.done <- err
	}()
	return w
}

func (w *gunzipWriter) Write(b []byte) (int, error) {
	w.hashingWriter.Write(b)
	return w.pw.Write(b)
}

func (w *gunzipWriter) close() error {
	w.pw.Close()
	return <-w.done
}

// BenchmarkListingScale holds a table of SVRPD_BENCH_NODES nodes in the node cache, as a
// daemon does, and answers GET /nodes over it: the first answer after the table was loaded
// (cold), the same answer again (warm), its gzip form, and the first answer after a tenth of
// the nodes heartbeat and one registered (changed), the common case while nodes heartbeat.
// It reports the heap per node of the table and
// of the table with the listing's snapshot, each answer's time to its first byte, its rate
// and the most memory it held beyond the table while it was written, and logs the digest of
// the bytes, for comparing two builds.
func BenchmarkListingScale(b *testing.B) {
	n := testkit.BenchNodes(b)
	ctx := context.Background()
	// A fixed clock, so that two builds answer with the same bytes.
	now := time.Unix(1_767_225_600, 0).UTC()
	for range b.N {
		inner := store.NewMemory()
		for lo := 0; lo < n; lo += 1000 {
			err := inner.Update(ctx, func(tx store.Tx) error {
				for i := lo; i < min(lo+1000, n); i++ {
					if err := tx.PutNode(storetest.ScaleNode(i, now)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		before := settledHeap()
		st, err := store.WithNodeCache(ctx, inner)
		if err != nil {
			b.Fatal(err)
		}
		table := settledHeap() - before
		b.ReportMetric(float64(table)/float64(n), "table-bytes/node")
		clock := testkit.NewClock(now)
		svc, err := registry.New(registry.Config{Store: st, Clock: clock.Now})
		if err != nil {
			b.Fatal(err)
		}
		h := httpapi.New(svc)

		get := func(name string, w http.ResponseWriter, first func() time.Time, size func() int64, header ...string) {
			base := settledHeap()
			req := httptest.NewRequest("GET", "/nodes", nil)
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			stop := peakWatch()
			start, cpu := time.Now(), cpuTime()
			h.ServeHTTP(w, req)
			took, cpu := time.Since(start), cpuTime()-cpu
			peak := stop()
			b.ReportMetric(cpu.Seconds(), name+"-cpu-s")
			b.ReportMetric(float64(first().Sub(start).Microseconds())/1000, name+"-first-byte-ms")
			b.ReportMetric(took.Seconds(), name+"-s")
			b.ReportMetric(float64(size())/1e6/took.Seconds(), name+"-MB/s")
			b.ReportMetric(float64(peak-min(peak, base))/1e6, name+"-peak-extra-MB")
		}
		cold := newHashingWriter()
		get("cold", cold, func() time.Time { return cold.first }, func() int64 { return cold.n })
		kept := settledHeap() - before
		b.ReportMetric(float64(kept)/float64(n), "table+listing-bytes/node")
		warm := newHashingWriter()
		get("warm", warm, func() time.Time { return warm.first }, func() int64 { return warm.n })
		gz := newGunzipWriter()
		get("gzip", gz, func() time.Time { return gz.first }, func() int64 { return gz.n }, "Accept-Encoding", "gzip")
		if err := gz.close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(cold.n)/1e6, "listing-MB")

		clock.Advance(time.Second)
		for i := 0; i < n; i += 10 {
			if err := st.TouchNode(ctx, storetest.ScaleNode(i, now).Key, clock.Now()); err != nil {
				b.Fatal(err)
			}
		}
		joined := storetest.ScaleNode(n, clock.Now())
		joined.FirstSeen = clock.Now()
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutNode(joined) }); err != nil {
			b.Fatal(err)
		}
		registry.NodesChanged(svc)
		changed := newHashingWriter()
		get("changed", changed, func() time.Time { return changed.first }, func() int64 { return changed.n })

		b.Logf("%d nodes: /nodes %d bytes sha256 %x; again %x; gzip decodes to %d bytes sha256 %x; after the change %d bytes sha256 %x",
			n, cold.n, cold.sum.Sum(nil), warm.sum.Sum(nil), gz.plain.n, gz.plain.sum.Sum(nil), changed.n, changed.sum.Sum(nil))
		if cold.code != 200 || warm.code != 200 || gz.code != 200 || changed.code != 200 {
			b.Fatalf("answers %d %d %d %d", cold.code, warm.code, gz.code, changed.code)
		}
		st.Close()
	}
}
