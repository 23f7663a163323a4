package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// model is the naive store: the records only. Every index is derived from them when
// checked, which is what the store's indexes must agree with. The generators keep DIDs and
// secret hashes specific to one key or session, so that a derived index is unambiguous.
type model struct {
	nodes      map[didkey.PublicKey]store.Node
	sessions   map[string]binding.BindingSession
	bindings   map[didkey.PublicKey]binding.Binding
	opSessions map[[32]byte]authn.BearerSession
	counters   map[string]store.Counter
	revoked    map[[2]string]store.Revocation
	deleted    map[string]bool // ids of deleted sessions, which stay used
}

func newModel() *model {
	return &model{
		nodes:      map[didkey.PublicKey]store.Node{},
		sessions:   map[string]binding.BindingSession{},
		bindings:   map[didkey.PublicKey]binding.Binding{},
		opSessions: map[[32]byte]authn.BearerSession{},
		counters:   map[string]store.Counter{},
		revoked:    map[[2]string]store.Revocation{},
		deleted:    map[string]bool{},
	}
}

// modelOp is one write, applied to a store and to the model alike.
type modelOp struct {
	name  string
	store func(store.Tx) error
	model func(*model)
}

var (
	modelKeys      = []didkey.PublicKey{Key(0), Key(1), Key(2), Key(3)}
	modelOperators = []string{"did:svrp:o:aaaaaaaa", "did:svrp:o:bbbbbbbb", "did:svrp:o:aaaaaaaa/x", ""}
	modelSessions  = []string{"s0", "s1", "s2"}
	modelCounters  = []string{"", "a", "b", "resolve|a"}
	modelTokens    = [][32]byte{Hash("t0"), Hash("t1"), Hash("t2")}
	modelWords     = []string{"infer", "train", "gpu"}
	// modelRevocationIDs holds ids that a naive key layout would confuse: a '/' inside, and
	// an empty one.
	modelRevocationIDs = []string{"rev-1", "rev/2", "", "rev"}
)

func modelDIDs(k didkey.PublicKey) []string {
	return []string{"", ShortDID(k), FullDID(k), "did:svrp:h:" + k.ShortBody()}
}

func modelHashes(id string) [][32]byte {
	return [][32]byte{{}, Hash(id + " a"), Hash(id + " b")}
}

func genTime(t *rapid.T, label string) time.Time {
	return time.Unix(int64(rapid.IntRange(0, 2e9).Draw(t, label+"_s")), int64(rapid.IntRange(0, 999999999).Draw(t, label+"_ns"))).UTC()
}

func genWords(t *rapid.T, label string) []string {
	// Nil and empty are distinct values that every store must keep apart.
	if rapid.IntRange(0, 4).Draw(t, label+"_nil") == 0 {
		return nil
	}
	return rapid.SliceOfN(rapid.SampledFrom(modelWords), 0, 3).Draw(t, label)
}

func genLimit(t *rapid.T, label string) *float64 {
	if rapid.Bool().Draw(t, label+"_nil") {
		return nil
	}
	v := float64(rapid.IntRange(0, 1000).Draw(t, label)) / 4
	return &v
}

func genOp(t *rapid.T) modelOp {
	switch rapid.IntRange(0, 10).Draw(t, "op") {
	case 9:
		k := rapid.SampledFrom(modelKeys).Draw(t, "key")
		return modelOp{"DeleteBinding", func(tx store.Tx) error { return tx.DeleteBinding(k) }, func(m *model) { delete(m.bindings, k) }}
	case 10:
		r := store.Revocation{
			OperatorDID:  rapid.SampledFrom(modelOperators).Draw(t, "operator"),
			RevocationID: rapid.SampledFrom(modelRevocationIDs).Draw(t, "revocation_id"),
			RevokedAt:    genTime(t, "revoked"),
			Signature:    rapid.SampledFrom(modelWords).Draw(t, "signature"),
		}
		return modelOp{"PutRevocation", func(tx store.Tx) error { return tx.PutRevocation(r) }, func(m *model) { m.revoked[[2]string{r.OperatorDID, r.RevocationID}] = r }}
	case 0, 1:
		k := rapid.SampledFrom(modelKeys).Draw(t, "key")
		n := store.Node{
			Key:          k,
			DID:          rapid.SampledFrom(modelDIDs(k)).Draw(t, "did"),
			Endpoint:     "198.51.100.1:7000",
			Capabilities: genWords(t, "caps"),
			LastSeen:     genTime(t, "seen"),
		}
		return modelOp{"PutNode", func(tx store.Tx) error { return tx.PutNode(n) }, func(m *model) { m.nodes[k] = n }}
	case 2:
		id := rapid.SampledFrom(modelSessions).Draw(t, "id")
		s := binding.BindingSession{
			ID:        id,
			State:     binding.State(rapid.IntRange(int(binding.Initiated), int(binding.Cancelled)).Draw(t, "state")),
			NodeKey:   rapid.SampledFrom(modelKeys).Draw(t, "key"),
			CodeHash:  rapid.SampledFrom(modelHashes(id)).Draw(t, "code"),
			TokenHash: rapid.SampledFrom(modelHashes(id)).Draw(t, "token"),
			UpdatedAt: genTime(t, "updated"),
		}
		s.Request.RequestedTaskTypes = genWords(t, "requested")
		s.Request.RequestedSingleLimit = genLimit(t, "single")
		return modelOp{"PutSession", func(tx store.Tx) error { return tx.PutBindingSession(s) }, func(m *model) { m.sessions[id] = s }}
	case 3:
		k := rapid.SampledFrom(modelKeys).Draw(t, "key")
		b := binding.Binding{
			NodeKey:     k,
			OperatorDID: rapid.SampledFrom(modelOperators).Draw(t, "operator"),
			SessionID:   rapid.SampledFrom(modelSessions).Draw(t, "session"),
			TaskTypes:   genWords(t, "tasks"),
			DailyLimit:  genLimit(t, "daily"),
			ActivatedAt: genTime(t, "activated"),
		}
		return modelOp{"PutBinding", func(tx store.Tx) error { return tx.PutBinding(b) }, func(m *model) { m.bindings[k] = b }}
	case 4:
		h := rapid.SampledFrom(modelTokens).Draw(t, "token")
		s := authn.BearerSession{OperatorDID: rapid.SampledFrom(modelOperators).Draw(t, "operator"), ExpiresAt: genTime(t, "expires")}
		return modelOp{"PutOperatorSession", func(tx store.Tx) error { return tx.PutBearerSession(h, s) }, func(m *model) { m.opSessions[h] = s }}
	case 5:
		h := rapid.SampledFrom(modelTokens).Draw(t, "token")
		return modelOp{"DeleteOperatorSession", func(tx store.Tx) error { return tx.DeleteBearerSession(h) }, func(m *model) { delete(m.opSessions, h) }}
	case 6:
		k := rapid.SampledFrom(modelCounters).Draw(t, "counter")
		c := store.Counter{Count: rapid.IntRange(0, 100).Draw(t, "count"), Start: genTime(t, "start")}
		return modelOp{"PutCounter", func(tx store.Tx) error { return tx.PutCounter(k, c) }, func(m *model) { m.counters[k] = c }}
	case 7:
		id := rapid.SampledFrom(modelSessions).Draw(t, "id")
		return modelOp{"DeleteSession", func(tx store.Tx) error { return tx.DeleteBindingSession(id) }, func(m *model) {
			if _, ok := m.sessions[id]; ok {
				m.deleted[id] = true
			}
			delete(m.sessions, id)
		}}
	default:
		k := rapid.SampledFrom(modelCounters).Draw(t, "counter")
		return modelOp{"DeleteCounter", func(tx store.Tx) error { return tx.DeleteCounter(k) }, func(m *model) { delete(m.counters, k) }}
	}
}

// testModel runs random sequences of transactions, each of a few writes that commit or
// fail together, and after each compares every lookup with the model.
func testModel(t *testing.T, open func(t *testing.T) store.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		s := open(t)
		defer s.Close()
		m := newModel()
		errAbort := errors.New("abort")
		rt.Repeat(map[string]func(*rapid.T){
			"Update": func(rt *rapid.T) {
				ops := rapid.SliceOfN(rapid.Custom(genOp), 1, 4).Draw(rt, "ops")
				fail := rapid.IntRange(0, 3).Draw(rt, "fail") == 0
				err := s.Update(context.Background(), func(tx store.Tx) error {
					for _, op := range ops {
						if err := op.store(tx); err != nil {
							return fmt.Errorf("%s: %w", op.name, err)
						}
					}
					if fail {
						return errAbort
					}
					return nil
				})
				if fail {
					if err != errAbort {
						rt.Fatalf("failing Update returned %v", err)
					}
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				for _, op := range ops {
					op.model(m)
				}
			},
			"": func(rt *rapid.T) { checkModel(rt, s, m) },
		})
	})
}

// modelCheck compares what a store holds with the model, failing the run at the first
// difference.
type modelCheck struct{ t *rapid.T }

func (c modelCheck) diff(what string, want, got any) {
	c.t.Helper()
	if d := difference(want, got); d != "" {
		c.t.Fatalf("%s (-model +store):\n%s", what, d)
	}
}

// stored compares what a read of the store gave with the model; a read that fails fails the
// check.
func (c modelCheck) stored(what string, want, got any, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	c.diff(what, want, got)
}

// lookup compares a read of one record with the model, which may not hold it (found).
func (c modelCheck) lookup(what string, want any, found bool, got any, err error) {
	c.t.Helper()
	if found != (err == nil) || (err != nil && !errors.Is(err, store.ErrNotFound)) {
		c.t.Fatalf("%s: found=%v in the model, store error %v", what, found, err)
	}
	if found {
		c.diff(what, want, got)
	}
}

// sameRecords compares one kind of record with the model: each of keys read alone with get,
// and all of them visited with each, in order.
func sameRecords[K comparable, V any](c modelCheck, what string, keys []K, model map[K]V, get func(K) (V, error), each func(func(V) error) error, order func(a, b K) int) {
	c.t.Helper()
	for _, k := range keys {
		v, ok := model[k]
		got, err := get(k)
		c.lookup(what, v, ok, got, err)
	}
	all, err := visited(each)
	c.stored("Each"+what, valuesInOrder(model, order), all, err)
}

// sameKeyed compares an Each that hands out each record with its key with the model: every
// record under its key, and the keys in order.
func sameKeyed[K comparable, V any](c modelCheck, what string, model map[K]V, each func(func(K, V) error) error, order func(a, b K) int) {
	c.t.Helper()
	var keys []K
	err := each(func(k K, v V) error {
		keys = append(keys, k)
		c.diff(what, model[k], v)
		return nil
	})
	c.stored(what+" keys", nilIfEmpty(rules.SortedKeys(model, order)), keys, err)
}

func checkModel(t *rapid.T, s store.Store, m *model) {
	c := modelCheck{t}
	err := s.View(context.Background(), func(tx store.Tx) error {
		// Nodes and their indexes.
		sameRecords(c, "Node", modelKeys, m.nodes, tx.Node, tx.EachNode, rules.CompareKeys)
		for _, k := range modelKeys {
			n, ok := m.nodes[k]
			for _, did := range modelDIDs(k) {
				got, err := tx.NodeKeyByDID(did)
				c.lookup(fmt.Sprintf("NodeKeyByDID(%q)", did), k, ok && did != "" && n.DID == did, got, err)
			}
			var body []didkey.PublicKey
			for _, k2 := range modelKeys {
				if _, ok := m.nodes[k2]; ok && k2.ShortBody() == k.ShortBody() {
					body = append(body, k2)
				}
			}
			gotBody, err := tx.NodeKeysByShortBody(k.ShortBody())
			c.stored("NodeKeysByShortBody", body, gotBody, err)
		}
		count, err := tx.NodeCount()
		c.stored("NodeCount", len(m.nodes), count, err)

		// Sessions and their indexes.
		sameRecords(c, "Session", modelSessions, m.sessions, tx.BindingSession, tx.EachBindingSession, strings.Compare)
		for _, id := range modelSessions {
			s, ok := m.sessions[id]
			if used, err := tx.BindingSessionIDUsed(id); err != nil || used != (ok || m.deleted[id]) {
				t.Fatalf("SessionIDUsed(%s) = %v, %v; want %v", id, used, err, ok || m.deleted[id])
			}
			for _, h := range modelHashes(id) {
				got, err := tx.BindingSessionIDBySecret(h)
				c.lookup("SessionIDBySecret", id, ok && h != ([32]byte{}) && (s.CodeHash == h || s.TokenHash == h), got, err)
			}
		}
		for _, k := range modelKeys {
			var want []binding.BindingSession
			for _, id := range rules.SortedKeys(m.sessions, strings.Compare) {
				if m.sessions[id].NodeKey == k && !m.sessions[id].State.Terminal() {
					want = append(want, m.sessions[id])
				}
			}
			got, err := tx.OpenBindingSessionsByNode(k)
			c.stored("OpenSessionsByNode", want, got, err)
		}

		// Bindings and the operator index.
		sameRecords(c, "Binding", modelKeys, m.bindings, tx.Binding, tx.EachBinding, rules.CompareKeys)
		for _, op := range append(modelOperators, "did:svrp:o:") {
			var want []binding.Binding
			if op != "" {
				for _, k := range rules.SortedKeys(m.bindings, rules.CompareKeys) {
					if m.bindings[k].OperatorDID == op {
						want = append(want, m.bindings[k])
					}
				}
			}
			got, err := tx.BindingsByOperator(op)
			c.stored(fmt.Sprintf("BindingsByOperator(%q)", op), want, got, err)
		}

		// Bearer sessions and counters.
		for _, h := range modelTokens {
			s, ok := m.opSessions[h]
			got, err := tx.BearerSession(h)
			c.lookup("OperatorSession", s, ok, got, err)
		}
		sameKeyed(c, "EachOperatorSession", m.opSessions, tx.EachBearerSession, rules.CompareHashes)
		for _, op := range append(modelOperators, "did:svrp:o:") {
			var want [][32]byte
			for _, h := range rules.SortedKeys(m.opSessions, rules.CompareHashes) {
				if m.opSessions[h].OperatorDID == op {
					want = append(want, h)
				}
			}
			got, err := tx.BearerSessionsOf(op)
			c.stored(fmt.Sprintf("OperatorSessionsOf(%q)", op), want, got, err)
		}
		for _, k := range modelCounters {
			got, err := tx.Counter(k)
			c.stored("Counter", m.counters[k], got, err)
		}
		sameKeyed(c, "EachCounter", m.counters, tx.EachCounter, strings.Compare)

		// Revocations.
		for _, op := range modelOperators {
			for _, id := range modelRevocationIDs {
				r, ok := m.revoked[[2]string{op, id}]
				got, err := tx.Revocation(op, id)
				c.lookup(fmt.Sprintf("store.Revocation(%q, %q)", op, id), r, ok, got, err)
			}
		}
		n, err := tx.RevocationCount()
		c.stored("RevocationCount", len(m.revoked), n, err)
		revoked := map[[2]string]store.Revocation{}
		if err := tx.EachRevocation(func(r store.Revocation) error {
			k := [2]string{r.OperatorDID, r.RevocationID}
			if _, dup := revoked[k]; dup {
				return fmt.Errorf("EachRevocation visited %q twice", k)
			}
			revoked[k] = r
			return nil
		}); err != nil {
			return err
		}
		c.diff("EachRevocation", m.revoked, revoked)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// visited is every record an Each method hands out, in the order it hands them out.
func visited[T any](each func(func(T) error) error) ([]T, error) {
	var out []T
	err := each(func(v T) error { out = append(out, v); return nil })
	return out, err
}

// nilIfEmpty matches a list built by appending to nil, as the Each callbacks above do.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func valuesInOrder[K comparable, V any](m map[K]V, less func(a, b K) int) []V {
	var out []V
	for _, k := range rules.SortedKeys(m, less) {
		out = append(out, m[k])
	}
	return out
}
