package registry_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// BenchmarkNetworkStats compares GET /v1/network/stats with GET /health on a table of
// 100,000 nodes held as svrpd holds it (the node cache in front of the store), with a
// few samples of history. "stats" is a read of the answer as built, which is what
// all but one request per networkStatsMaxAge cost; "stats-rebuild" is that one.
func BenchmarkNetworkStats(b *testing.B) {
	const nodes = 100_000
	ctx := context.Background()
	st, err := store.WithNodeCache(ctx, store.NewMemory())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
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
	for range 3 {
		clock.Advance(time.Minute)
		if err := svc.SampleNetwork(ctx); err != nil {
			b.Fatal(err)
		}
	}
	h := registry.NewHandler(svc)
	get := func(b *testing.B, path string, gzip bool) {
		req := httptest.NewRequest("GET", path, nil)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		b.ReportAllocs()
		var w discardWriter
		for b.Loop() {
			w = discardWriter{header: http.Header{}}
			h.ServeHTTP(&w, req)
		}
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("%s: %d", path, w.status)
		}
		b.ReportMetric(float64(w.size), "bytes/op")
	}
	b.Run("health", func(b *testing.B) { get(b, "/health", false) })
	b.Run("stats", func(b *testing.B) { get(b, "/v1/network/stats", false) })
	b.Run("stats-gzip", func(b *testing.B) { get(b, "/v1/network/stats", true) })
	b.Run("stats-rebuild", func(b *testing.B) {
		for b.Loop() {
			clock.Advance(time.Minute) // past the answer's life: every request rebuilds
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/network/stats", nil))
		}
	})
}

// discardWriter is a ResponseWriter that keeps only the status and the size written, as a
// connection's buffer would: the benchmark times the handler, not a recorder's copying.
type discardWriter struct {
	header       http.Header
	status, size int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(b []byte) (int, error) {
	w.size += len(b)
	return len(b), nil
}
