package badger

import (
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// Binding sessions, active bindings, bearer sessions, revocations and counters are JSON
// records, each with its index entries (indexes.go) changed in the same transaction.
// Revocations are counted in m/revocations as each new one is put, so that the bound on the
// list is one read.

func (t *badgerTx) BindingSession(id string) (binding.BindingSession, error) {
	return record[binding.BindingSession](t, key(pSession, id))
}

func (t *badgerTx) PutBindingSession(s binding.BindingSession) error {
	if err := t.Writable(); err != nil {
		return err
	}
	if err := rules.CheckSession(s); err != nil {
		return err
	}
	old, err := stored[binding.BindingSession](t, key(pSession, s.ID))
	if err != nil {
		return err
	}
	if err := rules.PutSession(indexes{t}, old, s); err != nil {
		return err
	}
	return t.put(key(pSession, s.ID), s)
}

func (t *badgerTx) DeleteBindingSession(id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := stored[binding.BindingSession](t, key(pSession, id))
	if err != nil || old == nil {
		return err
	}
	if err := rules.DeleteSession(indexes{t}, *old); err != nil {
		return err
	}
	return t.del(key(pSession, id))
}

func (t *badgerTx) BindingSessionIDUsed(id string) (bool, error) {
	if err := t.Readable(); err != nil {
		return false, err
	}
	for _, k := range [][]byte{key(pSession, id), key(pUsedID, rules.UsedIDHash(id))} {
		_, err := t.getRaw(k)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}

func (t *badgerTx) BindingSessionIDBySecret(h [32]byte) (string, error) {
	if err := t.Readable(); err != nil {
		return "", err
	}
	id, err := t.getRaw(key(pSecret, hex.EncodeToString(h[:])))
	return string(id), err
}

func (t *badgerTx) OpenBindingSessionsByNode(k didkey.PublicKey) ([]binding.BindingSession, error) {
	ids, err := members(t, key(pByNode, k.Hex(), ""), parseID)
	if err != nil {
		return nil, err
	}
	return readEach(ids, t.BindingSession, "session")
}

func (t *badgerTx) EachBindingSession(fn func(binding.BindingSession) error) error {
	p := []byte(pSession)
	return t.scan(p, false, func(_, v []byte) error {
		var s binding.BindingSession
		if err := decode(p, v, &s); err != nil {
			return err
		}
		return fn(s)
	})
}

func (t *badgerTx) Binding(node didkey.PublicKey) (binding.Binding, error) {
	return record[binding.Binding](t, key(pBinding, node.Hex()))
}

func (t *badgerTx) PutBinding(b binding.Binding) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := stored[binding.Binding](t, key(pBinding, b.NodeKey.Hex()))
	if err != nil {
		return err
	}
	if err := rules.PutBinding(indexes{t}, old, b); err != nil {
		return err
	}
	return t.put(key(pBinding, b.NodeKey.Hex()), b)
}

func (t *badgerTx) BindingsByOperator(operatorDID string) ([]binding.Binding, error) {
	keys, err := members(t, key(pOperator, operatorDID, ""), parseNodeKey)
	if err != nil {
		return nil, err
	}
	return readEach(keys, t.Binding, "operator")
}

func (t *badgerTx) DeleteBinding(node didkey.PublicKey) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := stored[binding.Binding](t, key(pBinding, node.Hex()))
	if err != nil || old == nil {
		return err
	}
	if err := rules.DeleteBinding(indexes{t}, *old); err != nil {
		return err
	}
	return t.del(key(pBinding, node.Hex()))
}

func (t *badgerTx) BearerSession(tokenHash [32]byte) (authn.BearerSession, error) {
	return record[authn.BearerSession](t, key(pOpSession, hex.EncodeToString(tokenHash[:])))
}

func (t *badgerTx) PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error {
	if err := t.Writable(); err != nil {
		return err
	}
	k := key(pOpSession, hex.EncodeToString(tokenHash[:]))
	old, err := stored[authn.BearerSession](t, k)
	if err != nil {
		return err
	}
	if err := rules.PutBearerSession(indexes{t}, tokenHash, old, s); err != nil {
		return err
	}
	return t.put(k, s)
}

func (t *badgerTx) DeleteBearerSession(tokenHash [32]byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	k := key(pOpSession, hex.EncodeToString(tokenHash[:]))
	old, err := stored[authn.BearerSession](t, k)
	if err != nil || old == nil {
		return err
	}
	if err := (indexes{t}).DropOperatorSession(old.OperatorDID, tokenHash); err != nil {
		return err
	}
	return t.del(k)
}

func (t *badgerTx) EachBinding(fn func(binding.Binding) error) error {
	return eachValue(t, pBinding, fn)
}

func (t *badgerTx) EachRevocation(fn func(store.Revocation) error) error {
	return eachValue(t, pRevoked, fn)
}

// eachValue decodes every record under prefix p, whose keys say nothing the record does not.
func eachValue[T any](t *badgerTx, p string, fn func(T) error) error {
	return t.scan([]byte(p), false, func(_, v []byte) error {
		var r T
		if err := decode([]byte(p), v, &r); err != nil {
			return err
		}
		return fn(r)
	})
}

func (t *badgerTx) BearerSessionsOf(operatorDID string) ([][32]byte, error) {
	return t.operatorSessions(operatorDID)
}

// operatorSessions reads the token hashes of operatorDID's v/ record; none when it has none.
func (t *badgerTx) operatorSessions(operatorDID string) ([][32]byte, error) {
	raw, err := t.getRaw(key(pOpSessions, operatorDID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(raw)%32 != 0 {
		return nil, errors.New("store: corrupt operator session list")
	}
	list := make([][32]byte, len(raw)/32)
	for i := range list {
		list[i] = [32]byte(raw[32*i:])
	}
	return list, nil
}

// setOperatorSessions writes operatorDID's v/ record, or deletes it when list is empty.
func (t *badgerTx) setOperatorSessions(operatorDID string, list [][32]byte) error {
	k := key(pOpSessions, operatorDID)
	if len(list) == 0 {
		return t.del(k)
	}
	raw := make([]byte, 0, 32*len(list))
	for _, h := range list {
		raw = append(raw, h[:]...)
	}
	return t.setRaw(k, raw)
}

func (t *badgerTx) EachBearerSession(fn func(tokenHash [32]byte, s authn.BearerSession) error) error {
	p := []byte(pOpSession)
	return t.scan(p, false, func(rest, v []byte) error {
		h, ok := decodeKey(rest)
		if !ok {
			return errors.New("store: corrupt bearer session key")
		}
		var s authn.BearerSession
		if err := decode(p, v, &s); err != nil {
			return err
		}
		return fn(h, s)
	})
}

// revocationKey hex-encodes both parts: a revocation_id may hold '/', and the store does not
// rely on the registry having checked the DID.
func revocationKey(operatorDID, revocationID string) []byte {
	return key(pRevoked, hex.EncodeToString([]byte(operatorDID)), hex.EncodeToString([]byte(revocationID)))
}

func (t *badgerTx) Revocation(operatorDID, revocationID string) (store.Revocation, error) {
	return record[store.Revocation](t, revocationKey(operatorDID, revocationID))
}

func (t *badgerTx) PutRevocation(r store.Revocation) error {
	if err := t.Writable(); err != nil {
		return err
	}
	k := revocationKey(r.OperatorDID, r.RevocationID)
	if _, err := t.getRaw(k); errors.Is(err, store.ErrNotFound) {
		n, err := t.RevocationCount()
		if err != nil {
			return err
		}
		if err := t.setRaw([]byte(kRevokedCount), strconv.AppendInt(nil, int64(n)+1, 10)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return t.put(k, r)
}

func (t *badgerTx) RevocationCount() (int, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	raw, err := t.getRaw([]byte(kRevokedCount))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return 0, errors.New("store: corrupt revocation count")
	}
	return n, nil
}

func (t *badgerTx) Counter(k string) (store.Counter, error) {
	c, err := record[store.Counter](t, key(pCounter, k))
	if errors.Is(err, store.ErrNotFound) {
		return store.Counter{}, nil
	}
	return c, err
}

func (t *badgerTx) Counters(keys ...string) ([]store.Counter, error) {
	return rules.Counters(t, keys)
}

func (t *badgerTx) CountEvent(k string, now time.Time, window time.Duration) (store.Counter, error) {
	return rules.CountEvent(t, k, now, window)
}

func (t *badgerTx) PutCounter(k string, c store.Counter) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.put(key(pCounter, k), c)
}

func (t *badgerTx) DeleteCounter(k string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.del(key(pCounter, k))
}

func (t *badgerTx) EachCounter(fn func(key string, c store.Counter) error) error {
	p := []byte(pCounter)
	return t.scan(p, false, func(rest, v []byte) error {
		var c store.Counter
		if err := decode(p, v, &c); err != nil {
			return err
		}
		return fn(string(rest), c)
	})
}
