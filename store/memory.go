package store

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store/internal/rules"
)

// NewMemory returns an empty store that lives in memory and is lost with the process.
//
// Views run concurrently; Updates run one at a time and exclude Views, so an Update never
// conflicts and its function runs exactly once. A function that returns an error or panics
// has its writes undone before anyone else sees them. Each methods visit records in key
// order, as the Badger store does, so tests see the same order from both.
func NewMemory() Store {
	return &memStore{d: memData{
		nodes:      make(map[didkey.PublicKey]Node),
		byDID:      make(map[string]didkey.PublicKey),
		byBody:     make(map[string]map[didkey.PublicKey]struct{}),
		sessions:   make(map[string]binding.BindingSession),
		bySecret:   make(map[[32]byte]string),
		byNode:     make(map[didkey.PublicKey]map[string]struct{}),
		bindings:   make(map[didkey.PublicKey]binding.Binding),
		byOperator: make(map[string]map[didkey.PublicKey]struct{}),
		opSessions: make(map[[32]byte]authn.BearerSession),
		byOpSess:   make(map[string]map[[32]byte]struct{}),
		counters:   make(map[string]Counter),
		revoked:    make(map[[2]string]Revocation),
		pins:       make(map[string]OperatorPin),
		usedIDs:    make(map[string]struct{}),
	}}
}

type memStore struct {
	Defaults
	mu     sync.RWMutex
	closed bool
	d      memData
}

var _ Store = (*memStore)(nil)

func (m *memStore) ReadCounters(ctx context.Context, keys ...string) ([]Counter, error) {
	return ReadCountersInView(ctx, m, keys...)
}

func (m *memStore) TouchNode(ctx context.Context, key didkey.PublicKey, seen time.Time) error {
	return TouchNodeInUpdate(ctx, m, key, seen)
}

func (m *memStore) ScanNodes(ctx context.Context, fn func(*Node) error) error {
	return ScanNodesInView(ctx, m, fn)
}

// memData holds the records, each a private clone, and the indexes the Tx lookups need.
// The indexes hold only what the records currently say; putTx keeps them in step.
type memData struct {
	nodes      map[didkey.PublicKey]Node
	byDID      map[string]didkey.PublicKey
	byBody     map[string]map[didkey.PublicKey]struct{}
	sessions   map[string]binding.BindingSession
	bySecret   map[[32]byte]string
	byNode     map[didkey.PublicKey]map[string]struct{}
	bindings   map[didkey.PublicKey]binding.Binding
	byOperator map[string]map[didkey.PublicKey]struct{}
	opSessions map[[32]byte]authn.BearerSession
	byOpSess   map[string]map[[32]byte]struct{}
	counters   map[string]Counter
	revoked    map[[2]string]Revocation
	pins       map[string]OperatorPin
	usedIDs    map[string]struct{} // usedIDHash of deleted sessions
	log        memLog
}

func (m *memStore) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	tx := &memTx{d: &m.d}
	defer func() { tx.Done = true }()
	return fn(tx)
}

func (m *memStore) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	tx := &memTx{d: &m.d, TxState: rules.TxState{Write: true}}
	committed := false
	defer func() {
		tx.Done = true
		if !committed {
			tx.undo.rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	return nil
}

func (m *memStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// undoLog records how to restore each map entry an Update changed. Writing in place under
// the exclusive lock and undoing on failure costs only the writes, where copying the maps
// for each Update would cost the whole store.
type undoLog []func()

func (u *undoLog) rollback() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}

func mapSet[K comparable, V any](u *undoLog, m map[K]V, k K, v V) {
	old, had := m[k]
	*u = append(*u, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
	m[k] = v
}

func mapDelete[K comparable, V any](u *undoLog, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	*u = append(*u, func() { m[k] = old })
	delete(m, k)
}

func setAdd[K1, K2 comparable](u *undoLog, m map[K1]map[K2]struct{}, a K1, b K2) {
	inner, ok := m[a]
	if !ok {
		inner = make(map[K2]struct{})
		mapSet(u, m, a, inner)
	}
	mapSet(u, inner, b, struct{}{})
}

// setRemove drops empty inner sets so that an index does not keep every value it ever held.
// Undo runs in reverse, so the inner set is back in place before its member is restored.
func setRemove[K1, K2 comparable](u *undoLog, m map[K1]map[K2]struct{}, a K1, b K2) {
	inner, ok := m[a]
	if !ok {
		return
	}
	mapDelete(u, inner, b)
	if len(inner) == 0 {
		mapDelete(u, m, a)
	}
}

type memTx struct {
	d *memData
	rules.TxState
	undo undoLog
}

var _ Tx = (*memTx)(nil)

// get is the value of m under k, or ErrNotFound. clone, where the value holds slices or
// pointers, makes the copy the caller may change.
func get[K comparable, V any](t *memTx, m map[K]V, k K, clone func(V) V) (V, error) {
	var zero V
	if err := t.Readable(); err != nil {
		return zero, err
	}
	v, ok := m[k]
	if !ok {
		return zero, ErrNotFound
	}
	if clone != nil {
		v = clone(v)
	}
	return v, nil
}

// remove deletes the value of m under k, once unindex has taken it out of the indexes that
// point at it; a key that is not there is no error.
func remove[K comparable, V any](t *memTx, m map[K]V, k K, unindex func(V) error) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, had := m[k]
	if !had {
		return nil
	}
	if err := unindex(old); err != nil {
		return err
	}
	mapDelete(&t.undo, m, k)
	return nil
}

// indexed is what the index set lists, in key order, each key made into what the lookup
// returns by value; nil for an empty set.
func indexed[K comparable, V any](t *memTx, set map[K]struct{}, order func(a, b K) int, value func(K) V) ([]V, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	if len(set) == 0 {
		return nil, nil
	}
	out := make([]V, 0, len(set))
	for _, k := range rules.SortedKeys(set, order) {
		out = append(out, value(k))
	}
	return out, nil
}

// itself is the value of an index that lists the keys themselves.
func itself[K any](k K) K { return k }

// each calls fn on the values of m in key order, refusing writes while it runs.
func each[K comparable, V any](t *memTx, m map[K]V, less func(a, b K) int, fn func(K, V) error) error {
	if err := t.Readable(); err != nil {
		return err
	}
	t.Iterating++
	defer func() { t.Iterating-- }()
	for _, k := range rules.SortedKeys(m, less) {
		if err := fn(k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

func (t *memTx) Node(key didkey.PublicKey) (Node, error) {
	return get(t, t.d.nodes, key, cloneNode)
}

func (t *memTx) PutNode(n Node) error {
	if err := t.Writable(); err != nil {
		return err
	}
	var oldDID *string
	if old := lookup(t.d.nodes, n.Key); old != nil {
		oldDID = &old.DID
	}
	if err := rules.PutNode(memIndexes{t}, n.Key, oldDID, n.DID); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.nodes, n.Key, cloneNode(n))
	return nil
}

func (t *memTx) PutNodeRevision(n Node) (uint64, error) { return 0, t.PutNode(n) }

func (t *memTx) DeleteNode(key didkey.PublicKey) error {
	return remove(t, t.d.nodes, key, func(old Node) error { return rules.DeleteNode(memIndexes{t}, key, old.DID) })
}

func (t *memTx) WriteTouchedNode(n Node) error { return t.PutNode(n) }

func (t *memTx) ConsumeChallenge([]byte, time.Time) error { return ErrChallengesNotKept }

func (t *memTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	return get(t, t.d.byDID, did, nil)
}

func (t *memTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	return indexed(t, t.d.byBody[body], rules.CompareKeys, itself)
}

func (t *memTx) EachNode(fn func(Node) error) error {
	return each(t, t.d.nodes, rules.CompareKeys, func(_ didkey.PublicKey, n Node) error { return fn(cloneNode(n)) })
}

func (t *memTx) NodeCount() (int, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	return len(t.d.nodes), nil
}

func (t *memTx) BindingSession(id string) (binding.BindingSession, error) {
	return get(t, t.d.sessions, id, cloneSession)
}

func (t *memTx) PutBindingSession(s binding.BindingSession) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := rules.CheckSession(s); err != nil {
		return err
	}
	if err := rules.PutSession(memIndexes{t}, lookup(t.d.sessions, s.ID), s); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.sessions, s.ID, cloneSession(s))
	return nil
}

func (t *memTx) DeleteBindingSession(id string) error {
	return remove(t, t.d.sessions, id, func(old binding.BindingSession) error { return rules.DeleteSession(memIndexes{t}, old) })
}

func (t *memTx) BindingSessionIDUsed(id string) (bool, error) {
	if err := t.Readable(); err != nil {
		return false, err
	}
	_, live := t.d.sessions[id]
	_, gone := t.d.usedIDs[rules.UsedIDHash(id)]
	return live || gone, nil
}

func (t *memTx) BindingSessionIDBySecret(h [32]byte) (string, error) {
	return get(t, t.d.bySecret, h, nil)
}

func (t *memTx) OpenBindingSessionsByNode(key didkey.PublicKey) ([]binding.BindingSession, error) {
	return indexed(t, t.d.byNode[key], strings.Compare, func(id string) binding.BindingSession { return cloneSession(t.d.sessions[id]) })
}

func (t *memTx) EachBindingSession(fn func(binding.BindingSession) error) error {
	return each(t, t.d.sessions, strings.Compare, func(_ string, s binding.BindingSession) error { return fn(cloneSession(s)) })
}

func (t *memTx) Binding(node didkey.PublicKey) (binding.Binding, error) {
	return get(t, t.d.bindings, node, cloneBinding)
}

func (t *memTx) PutBinding(b binding.Binding) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := rules.PutBinding(memIndexes{t}, lookup(t.d.bindings, b.NodeKey), b); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.bindings, b.NodeKey, cloneBinding(b))
	return nil
}

func (t *memTx) BindingsByOperator(operatorDID string) ([]binding.Binding, error) {
	return indexed(t, t.d.byOperator[operatorDID], rules.CompareKeys, func(k didkey.PublicKey) binding.Binding { return cloneBinding(t.d.bindings[k]) })
}

func (t *memTx) DeleteBinding(node didkey.PublicKey) error {
	return remove(t, t.d.bindings, node, func(old binding.Binding) error { return rules.DeleteBinding(memIndexes{t}, old) })
}

func (t *memTx) EachBinding(fn func(binding.Binding) error) error {
	return each(t, t.d.bindings, rules.CompareKeys, func(_ didkey.PublicKey, b binding.Binding) error { return fn(cloneBinding(b)) })
}

func (t *memTx) EachRevocation(fn func(Revocation) error) error {
	return each(t, t.d.revoked, compareRevocationKeys, func(_ [2]string, r Revocation) error { return fn(r) })
}

func compareRevocationKeys(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

func (t *memTx) Revocation(operatorDID, revocationID string) (Revocation, error) {
	return get(t, t.d.revoked, [2]string{operatorDID, revocationID}, nil)
}

func (t *memTx) PutRevocation(r Revocation) error {
	if err := t.Writable(); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.revoked, [2]string{r.OperatorDID, r.RevocationID}, r)
	return nil
}

func (t *memTx) RevocationCount() (int, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	return len(t.d.revoked), nil
}

func (t *memTx) BearerSession(tokenHash [32]byte) (authn.BearerSession, error) {
	return get(t, t.d.opSessions, tokenHash, cloneBearerSession)
}

func (t *memTx) PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := rules.PutBearerSession(memIndexes{t}, tokenHash, lookup(t.d.opSessions, tokenHash), s); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.opSessions, tokenHash, cloneBearerSession(s))
	return nil
}

func (t *memTx) DeleteBearerSession(tokenHash [32]byte) error {
	return remove(t, t.d.opSessions, tokenHash, func(old authn.BearerSession) error {
		setRemove(&t.undo, t.d.byOpSess, old.OperatorDID, tokenHash)
		return nil
	})
}

func (t *memTx) BearerSessionsOf(operatorDID string) ([][32]byte, error) {
	return indexed(t, t.d.byOpSess[operatorDID], rules.CompareHashes, itself)
}

func (t *memTx) EachBearerSession(fn func(tokenHash [32]byte, s authn.BearerSession) error) error {
	return each(t, t.d.opSessions, rules.CompareHashes, func(h [32]byte, s authn.BearerSession) error { return fn(h, cloneBearerSession(s)) })
}

func (t *memTx) Counter(key string) (Counter, error) {
	if err := t.Readable(); err != nil {
		return Counter{}, err
	}
	return cloneCounter(t.d.counters[key]), nil
}

func (t *memTx) Counters(keys ...string) ([]Counter, error) {
	return rules.Counters(t, keys)
}

func (t *memTx) CountEvent(key string, now time.Time, window time.Duration) (Counter, error) {
	return rules.CountEvent(t, key, now, window)
}

func (t *memTx) PutCounter(key string, c Counter) error {
	if err := t.Writable(); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.counters, key, cloneCounter(c))
	return nil
}

func (t *memTx) DeleteCounter(key string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	mapDelete(&t.undo, t.d.counters, key)
	return nil
}

func (t *memTx) EachCounter(fn func(key string, c Counter) error) error {
	return each(t, t.d.counters, strings.Compare, func(k string, c Counter) error { return fn(k, cloneCounter(c)) })
}
