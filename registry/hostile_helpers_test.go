package registry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// hostileDump is everything a store holds, read back through the Tx interface: the records
// and every index a lookup can reach. Two dumps that encode to the same bytes mean no
// request changed anything a later request could observe.
type hostileDump struct {
	Nodes      []store.Node                   `json:"nodes"`
	NodeCount  int                            `json:"node_count"`
	DIDIndex   map[string]string              `json:"did_index"`
	BodyIndex  map[string][]string            `json:"body_index"`
	Sessions   []binding.BindingSession       `json:"sessions"`
	Secrets    map[string]string              `json:"secrets"`
	ByNode     map[string][]string            `json:"by_node"`
	Bindings   map[string]binding.Binding     `json:"bindings"`
	ByOperator map[string][]string            `json:"by_operator"`
	OpSessions map[string]authn.BearerSession `json:"operator_sessions"`
	Counters   map[string]store.Counter       `json:"counters"`
	// Revocations holds the count of the list and the revocation of every pair a
	// credential or session in the dump names.
	RevocationCount int                         `json:"revocation_count"`
	Revocations     map[string]store.Revocation `json:"revocations"`
}

// hostileSnapshot walks st in one read transaction. Bindings and operator indexes have no Each
// method, so they are read for every node key and operator DID that any record names: a
// binding can only come from a session, whose key and operator are in the dump.
func hostileSnapshot(t testing.TB, st store.Store) hostileDump {
	t.Helper()
	d := hostileDump{
		DIDIndex: map[string]string{}, BodyIndex: map[string][]string{}, Secrets: map[string]string{},
		ByNode: map[string][]string{}, Bindings: map[string]binding.Binding{}, ByOperator: map[string][]string{},
		OpSessions: map[string]authn.BearerSession{}, Counters: map[string]store.Counter{},
		Revocations: map[string]store.Revocation{},
	}
	err := st.View(context.Background(), func(tx store.Tx) error {
		keys := map[didkey.PublicKey]bool{}
		operators := map[string]bool{}
		if err := tx.EachNode(func(n store.Node) error {
			d.Nodes = append(d.Nodes, n)
			keys[n.Key] = true
			return nil
		}); err != nil {
			return err
		}
		n, err := tx.NodeCount()
		if err != nil {
			return err
		}
		d.NodeCount = n
		for _, n := range d.Nodes {
			if k, err := tx.NodeKeyByDID(n.DID); err == nil {
				d.DIDIndex[n.DID] = k.Hex()
			}
			holders, err := tx.NodeKeysByShortBody(n.Key.ShortBody())
			if err != nil {
				return err
			}
			d.BodyIndex[n.Key.ShortBody()] = hostileSorted(holders, didkey.PublicKey.Hex)
		}
		if err := tx.EachBindingSession(func(s binding.BindingSession) error {
			d.Sessions = append(d.Sessions, s)
			keys[s.NodeKey] = true
			operators[s.OperatorDID] = true
			if s.Authorization != nil {
				operators[s.Authorization.OperatorDID] = true
			}
			return nil
		}); err != nil {
			return err
		}
		for _, s := range d.Sessions {
			for _, h := range [][32]byte{s.CodeHash, s.TokenHash} {
				if id, err := tx.BindingSessionIDBySecret(h); err == nil {
					d.Secrets[hex.EncodeToString(h[:])] = id
				}
			}
		}
		for k := range keys {
			mine, err := tx.OpenBindingSessionsByNode(k)
			if err != nil {
				return err
			}
			d.ByNode[k.Hex()] = hostileSorted(mine, func(s binding.BindingSession) string { return s.ID })
			if b, err := tx.Binding(k); err == nil {
				d.Bindings[k.Hex()] = b
				operators[b.OperatorDID] = true
			}
		}
		if err := tx.EachBearerSession(func(h [32]byte, s authn.BearerSession) error {
			d.OpSessions[hex.EncodeToString(h[:])] = s
			operators[s.OperatorDID] = true
			return nil
		}); err != nil {
			return err
		}
		for op := range operators {
			bs, err := tx.BindingsByOperator(op)
			if err != nil {
				return err
			}
			d.ByOperator[op] = hostileSorted(bs, func(b binding.Binding) string { return b.NodeKey.Hex() })
		}
		pairs := map[[2]string]bool{}
		for _, s := range d.Sessions {
			if s.DeviceCredential != nil {
				pairs[[2]string{s.DeviceCredential.OperatorDID, s.DeviceCredential.RevocationID}] = true
			}
			if s.Authorization != nil {
				pairs[[2]string{s.Authorization.OperatorDID, s.Authorization.RevocationID}] = true
			}
		}
		for _, s := range d.OpSessions {
			pairs[[2]string{s.OperatorDID, s.RevocationID}] = true
		}
		for p := range pairs {
			if r, err := tx.Revocation(p[0], p[1]); err == nil {
				d.Revocations[p[0]+" "+p[1]] = r
			}
		}
		if d.RevocationCount, err = tx.RevocationCount(); err != nil {
			return err
		}
		return tx.EachCounter(func(k string, c store.Counter) error {
			d.Counters[k] = c
			return nil
		})
	})
	if err != nil {
		t.Fatalf("dumping the store: %v", err)
	}
	slices.SortFunc(d.Nodes, func(a, b store.Node) int { return bytes.Compare(a.Key[:], b.Key[:]) })
	slices.SortFunc(d.Sessions, func(a, b binding.BindingSession) int { return strings.Compare(a.ID, b.ID) })
	return d
}

// hostileSorted is the name of each item, in sorted order.
func hostileSorted[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	sort.Strings(out)
	return out
}

// bytes encodes the dump; map keys are sorted by encoding/json, so equal stores give equal
// bytes.
func (d hostileDump) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withoutLoginCounters is the dump without the login budgets' counters: on a shared store a
// refused login is counted there, as a refused resolve is everywhere.
func (d hostileDump) withoutLoginCounters() hostileDump {
	kept := map[string]store.Counter{}
	for k, c := range d.Counters {
		if !strings.HasPrefix(k, "login-") {
			kept[k] = c
		}
	}
	d.Counters = kept
	return d
}

// withoutCounters is the dump with its counters left out: a counted resolve failure is the
// one change a failed request may make.
func (d hostileDump) withoutCounters() hostileDump {
	d.Counters = nil
	return d
}

// hostileSameStore fails t unless the two dumps are byte-for-byte equal.
func hostileSameStore(t testing.TB, what string, before, after hostileDump) {
	t.Helper()
	if !bytes.Equal(before.bytes(t), after.bytes(t)) {
		t.Errorf("%s changed the store (-before +after):\n%s", what, cmp.Diff(before, after))
	}
}

// hostileErrorBody checks that raw is exactly {"code","error"} with the given code and a non-empty
// text, the one shape of every error answer.
func hostileErrorBody(t testing.TB, what string, raw []byte, code string) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Errorf("%s: error body is not a JSON object: %q", what, raw)
		return
	}
	var e api.ErrorBody
	_ = json.Unmarshal(raw, &e)
	if len(fields) != 2 || e.Code != code || e.Error == "" {
		t.Errorf("%s: want {code:%s, error}, got %s", what, code, raw)
	}
}

// arena is a harness with a registered (verified) node and a logged-in operator who may
// bind, the state most bad requests are aimed at.
type arena struct {
	*harness
	n     node
	op    operator
	token string
}

// The matrices send many failing resolves from one address; the address limit has its own
// tests.
var arenaResolveLimit = resolveAddressLimit(1 << 20)

func newArena(t *testing.T, opts ...harnessOption) *arena {
	t.Helper()
	return arenaOn(t, newHarness(t, append([]harnessOption{arenaResolveLimit}, opts...)...))
}

// newArenaOver is newArena on Badger seen through wrap, for a test that watches or holds the
// registry's store calls.
func newArenaOver(t *testing.T, wrap func(store.Store) store.Store) *arena {
	t.Helper()
	dir := t.TempDir()
	st, err := badger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return arenaOn(t, startHarness(t, wrap(st), dir, testkit.NewClock(epoch), arenaResolveLimit))
}

func arenaOn(t *testing.T, h *harness) *arena {
	t.Helper()
	w := &arena{harness: h, n: newNode(t, "node"), op: newOperator(t, "op", h.now(), "nodes.bind")}
	h.ok("POST", "/api/v1/register", w.n.registration(t, "203.0.113.7:7000"), "", nil)
	w.token = w.op.login(h)
	return w
}

// hostileDecode decodes b into a typed request; ok is false when b's types no longer fit.
func hostileDecode[T any](t testing.TB, b jsonTree) (T, bool) {
	var v T
	raw, err := json.Marshal(b)
	if err != nil {
		return v, false
	}
	return v, json.Unmarshal(raw, &v) == nil
}

// hostileBase58 is a key, in whatever encoding a request gave it, as messages 3 and 6 sign
// it: base58. ok is false when the text is no key.
func hostileBase58(key string) (string, bool) {
	k, err := didkey.DecodeKey(key)
	if err != nil {
		return "", false
	}
	return k.Base58(), true
}

// hostileValue is the case's offending value as JSON, and the raw text to send instead when
// the value is not JSON.
func hostileValue(t testing.TB, c testkit.Reject) (any, string) {
	t.Helper()
	if c.RawValue != "" {
		return rawMarker, c.RawValue
	}
	dec := json.NewDecoder(strings.NewReader(c.FieldsJSON))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		t.Fatalf("%s: fields_json: %v", c.ID, err)
	}
	v, ok := fields[c.Field]
	if !ok {
		t.Fatalf("%s: fields_json has no field %s", c.ID, c.Field)
	}
	return v, ""
}
