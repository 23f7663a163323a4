package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// The benchmarks below drive the HTTP handler in-process with bodies signed before the
// timer starts, from 64 goroutines, so that what they time is the registry's own cost per
// request: decoding, checks, signature verification and the store. svrpd bench measures the
// same paths over real connections.

const benchClients = 64

type benchStore struct {
	name string
	open func(b *testing.B) store.Store
}

func benchStores() []benchStore {
	badgerOnly := func(b *testing.B) store.Store {
		st, err := badger.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	return []benchStore{
		{"badger", badgerOnly},
		{"badger+nodecache", func(b *testing.B) store.Store {
			st, err := store.WithNodeCache(context.Background(), badgerOnly(b))
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
}

func benchService(b *testing.B, st store.Store) http.Handler {
	b.Cleanup(func() { st.Close() })
	svc, err := registry.New(registry.Config{Store: st, Limits: limits.Limits{RegisterAddressLimit: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	return httpapi.New(svc)
}

func benchPost(b *testing.B, h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.RemoteAddr = "127.0.0.1:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// benchNodes registers n nodes, under their full DIDs, and returns one signed heartbeat body
// per node.
func benchNodes(b *testing.B, h http.Handler, n int) [][]byte {
	now := time.Now()
	beats := make([][]byte, n)
	for i := range n {
		nd := newNode(b, fmt.Sprintf("bench-%d", i))
		nd.did = nd.fullDID()
		reg := nd.registration(b, fmt.Sprintf("203.0.113.%d:7000", i%250+1))
		if w := benchPost(b, h, "/api/v1/register", mustJSON(b, reg)); w.Code != 200 {
			b.Fatalf("register: %d %s", w.Code, w.Body)
		}
		beats[i] = mustJSON(b, nd.heartbeat(b, nd.did, now))
	}
	return beats
}

// benchEach runs a benchmark on each of benchStores: setup prepares a fresh service and
// returns the request to time, which clients goroutines in all then send; every answer must
// be 200.
func benchEach(b *testing.B, clients int, what string, setup func(b *testing.B, h http.Handler) func() *httptest.ResponseRecorder) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			request := setup(b, benchService(b, bs.open(b)))
			b.SetParallelism(clients / max(1, testingProcs()))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if w := request(); w.Code != 200 {
						b.Errorf("%s: %d %s", what, w.Code, w.Body)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHeartbeat is the heartbeat path: one Ed25519 verification and a last_seen write.
func BenchmarkHeartbeat(b *testing.B) {
	benchEach(b, benchClients, "heartbeat", func(b *testing.B, h http.Handler) func() *httptest.ResponseRecorder {
		beats := benchNodes(b, h, 1000)
		var next atomic.Uint64
		return func() *httptest.ResponseRecorder {
			return benchPost(b, h, "/api/v1/heartbeat", beats[next.Add(1)%uint64(len(beats))])
		}
	})
}

// BenchmarkLogin is the device-login path: two Ed25519 verifications, a challenge consumed
// and a bearer session written.
func BenchmarkLogin(b *testing.B) {
	benchEach(b, benchClients, "login", func(b *testing.B, h http.Handler) func() *httptest.ResponseRecorder {
		now := time.Now()
		op := newOperator(b, "bench", now)
		bodies := make([][]byte, b.N)
		for i := range bodies {
			var ch api.ChallengeResult
			json.Unmarshal(benchPost(b, h, "/v1/auth/challenge", nil).Body.Bytes(), &ch)
			bodies[i] = mustJSON(b, op.loginRequest(b, ch.Challenge, now))
		}
		var next atomic.Int64
		return func() *httptest.ResponseRecorder {
			return benchPost(b, h, "/v1/auth/device-login", bodies[next.Add(1)-1])
		}
	})
}

// BenchmarkListNodes is GET /nodes over 1,000 nodes.
func BenchmarkListNodes(b *testing.B) {
	benchEach(b, 16, "nodes", func(b *testing.B, h http.Handler) func() *httptest.ResponseRecorder {
		benchNodes(b, h, 1000)
		return func() *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/nodes", nil))
			return w
		}
	})
}

// BenchmarkEd25519Verify is the ceiling the paths above are measured against: one raw
// verification, on all cores.
func BenchmarkEd25519Verify(b *testing.B) {
	priv := testkit.IndexKey(0)
	msg := []byte("service-node-heartbeat:v1\ndid:svrp:n:00000000\n1736937000")
	sig := ed25519.Sign(priv, msg)
	pub := priv.Public().(ed25519.PublicKey)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Error("verify failed")
				return
			}
		}
	})
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
