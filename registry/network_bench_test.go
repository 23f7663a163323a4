package registry_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// bigService is a registry on a table of 100,000 nodes held as svrpd holds it (the node
// cache in front of the store), seen over the hour before the clock's time, and its clock.
func bigService(b *testing.B) (*registry.Service, *testkit.Clock) {
	const nodes = 100_000
	ctx := context.Background()
	st, err := store.WithNodeCache(ctx, store.NewMemory())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	clock := testkit.NewClock(epoch)
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range nodes {
			var k didkey.PublicKey
			binary.BigEndian.PutUint64(k[:], uint64(i)+1)
			d, _ := didkey.NodeDID(k, didkey.FormShort)
			seen := epoch.Add(-time.Duration(i%3600) * time.Second)
			if err := tx.PutNode(store.Node{
				Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.%d.%d:7000", i/250%250, i%250),
				Capabilities: []string{"inference", fmt.Sprintf("model-%d", i%40)}, Region: fmt.Sprintf("region-%d", i%30),
				FirstSeen: seen.Add(-time.Hour), LastSeen: seen,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := registry.New(registry.Config{Store: st, Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	return svc, clock
}

// BenchmarkNetworkStats compares GET /v1/network/stats with GET /health on a table of
// 100,000 nodes held as svrpd holds it (the node cache in front of the store), with a
// few samples of history. "stats" is a read of the answer as built, which is what
// all but one request per networkStatsMaxAge cost; "stats-rebuild" is that one.
func BenchmarkNetworkStats(b *testing.B) {
	ctx := context.Background()
	svc, clock := bigService(b)
	for range 3 {
		clock.Advance(time.Minute)
		if err := svc.SampleNetwork(ctx); err != nil {
			b.Fatal(err)
		}
	}
	h := registry.NewHandler(svc)
	b.Run("health", func(b *testing.B) { benchGet(b, h, "/health", http.StatusOK) })
	b.Run("stats", func(b *testing.B) { benchGet(b, h, "/v1/network/stats", http.StatusOK) })
	b.Run("stats-gzip", func(b *testing.B) { benchGet(b, h, "/v1/network/stats", http.StatusOK, "Accept-Encoding", "gzip") })
	b.Run("stats-rebuild", func(b *testing.B) {
		for b.Loop() {
			clock.Advance(time.Minute) // past the answer's life: every request rebuilds
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/network/stats", nil))
		}
	})
}

// benchGet times GET path on h with the headers given as name, value pairs, and reports
// the bytes of the answer.
func benchGet(b *testing.B, h http.Handler, path string, status int, header ...string) {
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	b.ReportAllocs()
	var w discardWriter
	for b.Loop() {
		// A listing holds its turn (listingSlot) until its request ends, as a server's does.
		ctx, cancel := context.WithCancel(context.Background())
		w = discardWriter{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(&w, req.WithContext(ctx))
		cancel()
	}
	if w.status != status {
		b.Fatalf("%s: %d, want %d", path, w.status, status)
	}
	b.ReportMetric(float64(w.size), "bytes/op")
}

// BenchmarkListingPoll is one watcher poll of a 100,000-node table: the whole listing, plain
// and gzip, against changed_since the last ten seconds, and a 304 for an unchanged answer.
func BenchmarkListingPoll(b *testing.B) {
	svc, clock := bigService(b)
	h := registry.NewHandler(svc)
	since := canonical.FormatTime(clock.Now().Add(-10 * time.Second))
	w := discardWriter{header: http.Header{}}
	h.ServeHTTP(&w, httptest.NewRequest("GET", "/nodes?changed_since="+since, nil))
	tag := w.header.Get("ETag")
	b.Run("whole", func(b *testing.B) { benchGet(b, h, "/nodes", http.StatusOK) })
	b.Run("whole-gzip", func(b *testing.B) { benchGet(b, h, "/nodes", http.StatusOK, "Accept-Encoding", "gzip") })
	b.Run("changed-since", func(b *testing.B) { benchGet(b, h, "/nodes?changed_since="+since, http.StatusOK) })
	b.Run("changed-since-304", func(b *testing.B) {
		benchGet(b, h, "/nodes?changed_since="+since, http.StatusNotModified, "If-None-Match", tag)
	})
}

// discardWriter is a ResponseWriter that copies what is written through a buffer of a
// socket's size and keeps only the status and the size, so a benchmark times the handler
// and the copy every answer costs on its way out, not a recorder growing a buffer.
type discardWriter struct {
	header       http.Header
	status, size int
}

var socketBuffer = make([]byte, 64<<10)

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(b []byte) (int, error) {
	for rest := b; len(rest) > 0; {
		rest = rest[copy(socketBuffer, rest):]
	}
	w.size += len(b)
	return len(b), nil
}
