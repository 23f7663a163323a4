// Package storetest is the behavioural suite every store passes, exported so that each
// store runs it from its own package's tests: Run with a function that opens a fresh, empty
// store. It holds the fixtures and helpers those tests share, and a model test that drives
// random operations against a store and a map-based model of it, and two benchmarks for go
// test -bench. It is for tests only, and knows no store but through the contract.
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// Run checks the behaviour every Store must have. open returns a fresh, empty store;
// the suite closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	fresh := func(t *testing.T) store.Store {
		s := open(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"NotFound", testNotFound},
		{"RoundTrip", testRoundTrip},
		{"Isolation", testIsolation},
		{"DIDIndex", testDIDIndex},
		{"ShortBodyIndex", testShortBodyIndex},
		{"DeleteNode", testDeleteNode},
		{"SecretIndex", testSecretIndex},
		{"OpenSessionsByNode", testSessionsByNode},
		{"DeleteSession", testDeleteSession},
		{"BindingSupersede", testBindingSupersede},
		{"DeleteBinding", testDeleteBinding},
		{"Revocations", testRevocations},
		{"OperatorPins", testOperatorPins},
		{"DeleteRevocation", testDeleteRevocation},
		{"OperatorSessions", testOperatorSessions},
		{"Counters", testCounters},
		{"CountersAtOnce", testCountersAtOnce},
		{"CountEvent", testCountEvent},
		{"EachStops", testEachStops},
		{"InvalidSession", testInvalidSession},
		{"Atomicity", testAtomicity},
		{"Panic", testPanic},
		{"Misuse", testMisuse},
		{"Context", testContext},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"NoPhantoms", testNoPhantoms},
		{"Log", testLog},
		{"ConcurrentAppends", testConcurrentAppends},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, fresh(t)) })
	}
	t.Run("Model", func(t *testing.T) { testModel(t, open) })
}

// Fixtures. Every field is set, and times carry nanoseconds and a non-UTC zone, so that a
// round trip that drops anything shows.

var zone = time.FixedZone("test", 2*3600)

// Key is the i-th test key.
func Key(i int) didkey.PublicKey {
	return didkey.PublicKey(sha256.Sum256(fmt.Appendf(nil, "key %d", i)))
}

// Hash is the SHA-256 of s, as a secret hash.
func Hash(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// Time is the i-th test time, with nanoseconds and a non-UTC zone.
func Time(i int) time.Time {
	return time.Date(2025, 3, 1, 12, 0, i, 123456789, zone)
}

func ptr[T any](v T) *T { return &v }

// ShortDID is the short DID of k.
func ShortDID(k didkey.PublicKey) string { return "did:svrp:n:" + k.ShortBody() }

// FullDID is the full DID of k.
func FullDID(k didkey.PublicKey) string { return "did:svrp:" + k.Hex() }

// Node is a node record of k with every field set.
func Node(k didkey.PublicKey) store.Node {
	return store.Node{
		Key:               k,
		DID:               ShortDID(k),
		Endpoint:          "203.0.113.7:7000",
		Capabilities:      []string{"gpu", "storage"},
		Region:            "eu-west",
		Signature:         ptr("3yZe7d"),
		SignatureVerified: true,
		FirstSeen:         Time(1),
		LastSeen:          Time(2),
		Origin:            "198.51.100.0/24",
	}
}

// Session is a binding session id of node k with every field set.
func Session(id string, k didkey.PublicKey) binding.BindingSession {
	return binding.BindingSession{
		ID:      id,
		State:   binding.PendingNodeAcceptance,
		NodeKey: k,
		Request: canonical.BindingSession{
			BindingSessionID:     id,
			NodeDID:              ShortDID(k),
			NodePublicKey:        k.Base58(),
			DeviceSummary:        "rack 4",
			OS:                   "linux",
			Region:               "eu-west",
			RequestedTaskTypes:   []string{"infer", "train"},
			RequestedSingleLimit: ptr(12.5),
			RequestedDailyLimit:  ptr(100.0),
			Nonce:                "n-" + id,
			CreatedAt:            "2025-03-01T12:00:00Z",
			ExpiresAt:            "2025-03-01T12:10:00Z",
		},
		NodeSignature: "5Kd3",
		CreatedAt:     Time(3),
		ExpiresAt:     Time(4),
		CodeHash:      Hash("code " + id),
		TokenHash:     Hash("token " + id),
		OperatorDID:   "did:svrp:o:0a1b2c3d",
		DeviceCredential: &authn.DeviceCredential{
			DeviceCredential: canonical.DeviceCredential{
				CredentialID:          "cred-1",
				OperatorDID:           "did:svrp:o:0a1b2c3d",
				OperatorRootPublicKey: "8Hq2",
				DeviceID:              "laptop",
				DevicePublicKey:       "9Jr3",
				Permissions:           []string{"nodes.bind"},
				IssuedAt:              "2025-03-01T11:00:00Z",
				ExpiresAt:             "2026-03-01T11:00:00Z",
				RevocationID:          "rev-c",
			},
			Signature: "2Ab",
		},
		Authorization: &binding.AuthorizationCredential{
			Authorization: canonical.Authorization{
				BindingSessionID: id,
				NodeDID:          ShortDID(k),
				OperatorDID:      "did:svrp:o:0a1b2c3d",
				TaskTypes:        []string{"infer"},
				SingleLimit:      ptr(10.0),
				DailyLimit:       nil,
				RevocationID:     "rev-a",
				IssuedAt:         "2025-03-01T12:01:00Z",
				ExpiresAt:        "2025-03-01T13:01:00Z",
			},
			Signature: "3Cd",
		},
		Acceptance: &binding.Acceptance{
			Acceptance: canonical.Acceptance{
				BindingSessionID:    id,
				NodeDID:             ShortDID(k),
				OperatorDID:         "did:svrp:o:0a1b2c3d",
				AuthorizationDigest: "ab12",
				Accepted:            true,
				IssuedAt:            "2025-03-01T12:02:00Z",
			},
			Signature: "4Ef",
		},
		ActivatedAt: Time(5),
		UpdatedAt:   Time(6),
		Origin:      "2001:db8:1::/48",
	}
}

// Binding is an active binding of node k to operator with every field set.
func Binding(k didkey.PublicKey, operator string) binding.Binding {
	return binding.Binding{
		NodeKey:      k,
		NodeDID:      ShortDID(k),
		OperatorDID:  operator,
		SessionID:    "sess-" + k.ShortBody(),
		TaskTypes:    []string{"infer", "train"},
		SingleLimit:  ptr(10.0),
		DailyLimit:   ptr(250.0),
		RevocationID: "rev-" + k.ShortBody(),
		ActivatedAt:  Time(7),
	}
}

// BearerSession is a bearer session of operator.
func BearerSession(operator string) authn.BearerSession {
	return authn.BearerSession{OperatorDID: operator, IssuedAt: Time(8), ExpiresAt: Time(9), Origin: "192.0.2.0/24"}
}

// Helpers that fail the test on a transaction error.

func Update(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// View runs fn in a View of s, failing t on its error.
func View(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// readBack reads the record under key with get and compares it with want.
func readBack[K, V any](t testing.TB, what string, get func(K) (V, error), key K, want V) {
	t.Helper()
	got, err := get(key)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	Diff(t, what, want, got)
}

// Diff fails t with the difference when got is not want.
func Diff(t testing.TB, what string, want, got any) {
	t.Helper()
	if d := difference(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// difference is cmp's report of how got differs from want, or "" when they are the same.
// reflect.DeepEqual answers first because the model test compares every record after every
// step and cmp's walk costs many times more: values DeepEqual finds identical are the same
// to cmp as well, and any others (a time in another zone, say) go to cmp, which decides.
func difference(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got)
}

func wantNotFound(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: got error %v, want store.ErrNotFound", what, err)
	}
}

// NodeCache puts inner behind store.WithNodeCache, failing t when the table does not load.
func NodeCache(t testing.TB, inner store.Store) store.Store {
	t.Helper()
	s, err := store.WithNodeCache(context.Background(), inner)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// updateAborted runs fn in an Update that then fails, so that nothing fn wrote may stay.
func updateAborted(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	errAbort := errors.New("abort")
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errAbort
	}); err != errAbort {
		t.Fatalf("Update = %v", err)
	}
}
