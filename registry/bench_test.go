package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
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
		st, err := store.OpenBadger(b.TempDir())
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
	svc, err := registry.New(registry.Config{Store: st, RegisterAddressLimit: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	return registry.NewHandler(svc)
}

func benchPost(b *testing.B, h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.RemoteAddr = "127.0.0.1:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// benchNodes registers n nodes and returns one signed heartbeat body per node.
func benchNodes(b *testing.B, h http.Handler, n int) [][]byte {
	now := time.Now()
	beats := make([][]byte, n)
	for i := range n {
		priv := testkit.IndexKey(i)
		k, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
		did, _ := didkey.NodeDID(k, didkey.FormFull)
		reg := canonical.Register{DID: did.String(), PublicKey: k.Base58(), Endpoint: fmt.Sprintf("203.0.113.%d:7000", i%250+1), Capabilities: []string{"inference"}}
		sig, _ := canonical.Sign(priv, canonical.DefaultPrefix, reg)
		body, _ := json.Marshal(api.RegisterRequest{DID: reg.DID, PublicKey: k.Hex(), Endpoint: reg.Endpoint, Capabilities: reg.Capabilities, Signature: &sig})
		if w := benchPost(b, h, "/api/v1/register", body); w.Code != 200 {
			b.Fatalf("register: %d %s", w.Code, w.Body)
		}
		hb := canonical.Heartbeat{DID: did.String(), TS: now.Unix()}
		hsig, _ := canonical.Sign(priv, canonical.DefaultPrefix, hb)
		beats[i], _ = json.Marshal(api.HeartbeatRequest{DID: hb.DID, TS: hb.TS, Signature: hsig})
	}
	return beats
}

// BenchmarkHeartbeat is the heartbeat path: one Ed25519 verification and a last_seen write.
func BenchmarkHeartbeat(b *testing.B) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			h := benchService(b, bs.open(b))
			beats := benchNodes(b, h, 1000)
			var next atomic.Uint64
			b.SetParallelism(benchClients / max(1, testingProcs()))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := beats[next.Add(1)%uint64(len(beats))]
					if w := benchPost(b, h, "/api/v1/heartbeat", body); w.Code != 200 {
						b.Errorf("heartbeat: %d %s", w.Code, w.Body)
						return
					}
				}
			})
		})
	}
}

// BenchmarkLogin is the device-login path: two Ed25519 verifications, a challenge consumed
// and a bearer session written.
func BenchmarkLogin(b *testing.B) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			h := benchService(b, bs.open(b))
			root, device := testkit.IndexKey(-1), testkit.IndexKey(-2)
			rk, _ := didkey.KeyFromEd25519(root.Public().(ed25519.PublicKey))
			dk, _ := didkey.KeyFromEd25519(device.Public().(ed25519.PublicKey))
			op, _ := didkey.OperatorDID(rk, didkey.FormShort)
			now := time.Now()
			cred := authn.DeviceCredential{DeviceCredential: canonical.DeviceCredential{
				CredentialID: "c", OperatorDID: op.String(), OperatorRootPublicKey: rk.Base58(), DeviceID: "d",
				DevicePublicKey: dk.Base58(), IssuedAt: canonical.FormatTime(now.Add(-time.Hour)),
				ExpiresAt: canonical.FormatTime(now.Add(time.Hour)), RevocationID: "r",
			}}
			cred.Signature, _ = canonical.Sign(root, canonical.DefaultPrefix, cred.DeviceCredential)
			bodies := make([][]byte, b.N)
			for i := range bodies {
				var ch api.ChallengeResult
				json.Unmarshal(benchPost(b, h, "/v1/auth/challenge", nil).Body.Bytes(), &ch)
				issued := canonical.FormatTime(now)
				sig, _ := canonical.Sign(device, canonical.DefaultPrefix, canonical.Login{OperatorDID: op.String(), DevicePublicKey: dk.Base58(), Challenge: ch.Challenge, IssuedAt: issued})
				bodies[i], _ = json.Marshal(authn.Login{DeviceCredential: cred, Challenge: ch.Challenge, IssuedAt: issued, Signature: sig})
			}
			var next atomic.Int64
			b.SetParallelism(benchClients / max(1, testingProcs()))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := bodies[next.Add(1)-1]
					if w := benchPost(b, h, "/v1/auth/device-login", body); w.Code != 200 {
						b.Errorf("login: %d %s", w.Code, w.Body)
						return
					}
				}
			})
		})
	}
}

// BenchmarkListNodes is GET /nodes over 1,000 nodes.
func BenchmarkListNodes(b *testing.B) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			h := benchService(b, bs.open(b))
			benchNodes(b, h, 1000)
			b.SetParallelism(16 / max(1, testingProcs()))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest("GET", "/nodes", nil))
					if w.Code != 200 {
						b.Errorf("nodes: %d", w.Code)
						return
					}
				}
			})
		})
	}
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

// BenchmarkRevoke times one new revocation on Badger while the registry holds many bearer
// sessions of other operators: a revocation finds its operator's sessions through the
// store's operator index, so its cost must not grow with the session table.
func BenchmarkRevoke(b *testing.B) {
	for _, sessions := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			st, err := store.OpenBadger(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			svc, err := registry.New(registry.Config{Store: st, Clock: func() time.Time { return epoch }, RevokeAddressLimit: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < sessions; i += 1000 {
				err := st.Update(context.Background(), func(tx store.Tx) error {
					for j := i; j < i+1000 && j < sessions; j++ {
						s := authn.NewBearerSession(fmt.Sprintf("did:svrp:o:%08x", j), epoch)
						s.RevocationID = "rev"
						if err := tx.PutBearerSession(sha256.Sum256([]byte(fmt.Sprint(j))), s); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			root := testkit.TextKey("bench root")
			revs := make([]authn.SignedRevocation, b.N)
			for i := range revs {
				if revs[i], err = authn.SignRevocation(root, canonical.DefaultPrefix, "", "", fmt.Sprintf("rev-%d", i), epoch); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range revs {
				if _, err := svc.Revoke(context.Background(), revs[i], "192.0.2.1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuildListing100k is one build of GET /nodes over 100,000 nodes held in the node
// cache: what the registry allocates to answer it once (then it serves the cached bytes).
func BenchmarkBuildListing100k(b *testing.B) {
	const n = 100_000
	inner := store.NewMemory()
	now := time.Now().UTC().Truncate(time.Second)
	for start := 0; start < n; start += 1000 {
		err := inner.Update(context.Background(), func(tx store.Tx) error {
			for i := start; i < start+1000; i++ {
				var seed [32]byte
				binary.BigEndian.PutUint64(seed[:], uint64(i))
				k := didkey.PublicKey(sha256.Sum256(seed[:]))
				d, _ := didkey.NodeDID(k, didkey.FormShort)
				sig := "5nG1o7rf7Ta39j6dZosAi7PBAmE5uGEYCFAZZ3mr6F3ZJ8huKbWz8d6xVS6EXLbSRVRD8wAwoAC9w5BGDe6Nzr7u"
				if err := tx.PutNode(store.Node{Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.113.%d:7000", i%250), Capabilities: []string{"inference"}, Region: "eu-west", Signature: &sig, SignatureVerified: true, FirstSeen: now, LastSeen: now}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	st, err := store.WithNodeCache(context.Background(), inner)
	if err != nil {
		b.Fatal(err)
	}
	clock := testkit.NewClock(now)
	svc, err := registry.New(registry.Config{Store: st, Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	h := registry.NewHandler(svc)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clock.Advance(time.Second) // a new second: the cached listing is rebuilt
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/nodes", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		b.SetBytes(int64(w.Body.Len()))
	}
}
