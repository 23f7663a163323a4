package registry_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// bigService is a registry on a table of 100,000 nodes held as svrpd holds it (the node
// cache in front of the store), seen over the hour before the clock's time, its clock and
// its store.
func bigService(b *testing.B) (*registry.Service, *testkit.Clock, store.Store) {
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
	return svc, clock, st
}

// fillHistory writes a week of history before now into st, every step sampled, with values
// of the size a network of 100,000 nodes has: the whole answer as a registry sampling for
// a week sends it.
func fillHistory(b *testing.B, st store.Store, now time.Time) {
	rng := rand.New(rand.NewPCG(1, 2))
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for _, se := range []struct {
			name      string
			step      time.Duration
			slots     int
			low, high int
		}{
			{"online-1m", time.Minute, 1440, 60_000, 100_000},
			{"online-10m", 10 * time.Minute, 1008, 60_000, 100_000},
			{"heartbeats-1m", time.Minute, 1440, 100_000, 200_000},
			{"registrations-1h", time.Hour, 168, 100, 1_000},
		} {
			end := now.Truncate(se.step)
			for i := range se.slots {
				at := end.Add(-time.Duration(i) * se.step)
				slot := at.Unix() / int64(se.step/time.Second) % int64(se.slots)
				key := fmt.Sprintf("network/%s/%d", se.name, slot)
				if err := tx.PutCounter(key, store.Counter{Count: se.low + rng.IntN(se.high-se.low), Start: at}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkNetworkStats compares GET /v1/network/stats with GET /health on a table of
// 100,000 nodes held as svrpd holds it (the node cache in front of the store), with a week
// of history, every step sampled. "stats" is a read of the whole answer as built, which is
// what all but one request per limits.NetworkStatsMaxAge cost; "stats-since" the console's poll,
// changed_since the at of an answer five seconds old; "stats-rebuild" is the one request
// that builds the answer again.
func BenchmarkNetworkStats(b *testing.B) {
	svc, clock, st := bigService(b)
	fillHistory(b, st, clock.Now())
	h := httpapi.New(svc)
	since := "/v1/network/stats?changed_since=" + canonical.FormatTime(clock.Now().Add(-5*time.Second))
	b.Run("health", func(b *testing.B) { benchGet(b, h, "/health", http.StatusOK) })
	b.Run("stats", func(b *testing.B) { benchGet(b, h, "/v1/network/stats", http.StatusOK) })
	b.Run("stats-gzip", func(b *testing.B) { benchGet(b, h, "/v1/network/stats", http.StatusOK, "Accept-Encoding", "gzip") })
	b.Run("stats-since", func(b *testing.B) { benchGet(b, h, since, http.StatusOK) })
	b.Run("stats-since-gzip", func(b *testing.B) { benchGet(b, h, since, http.StatusOK, "Accept-Encoding", "gzip") })
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
	svc, clock, _ := bigService(b)
	h := httpapi.New(svc)
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
