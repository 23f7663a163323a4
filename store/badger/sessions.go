package badger

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

func (t *badgerTx) BindingSession(id string) (binding.BindingSession, error) {
	if err := t.Readable(); err != nil {
		return binding.BindingSession{}, err
	}
	var s binding.BindingSession
	err := t.get(key(pSession, id), &s)
	return s, err
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
	var ids []string
	if err := t.scan(key(pByNode, k.Hex(), ""), true, func(rest, _ []byte) error {
		ids = append(ids, string(rest))
		return nil
	}); err != nil {
		return nil, err
	}
	var out []binding.BindingSession
	for _, id := range ids {
		s, err := t.BindingSession(id)
		if err != nil {
			return nil, fmt.Errorf("store: session index names a missing session: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
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
	if err := t.Readable(); err != nil {
		return binding.Binding{}, err
	}
	var b binding.Binding
	err := t.get(key(pBinding, node.Hex()), &b)
	return b, err
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
	var keys []didkey.PublicKey
	if err := t.scan(key(pOperator, operatorDID, ""), true, func(rest, _ []byte) error {
		if k, ok := decodeKey(rest); ok {
			keys = append(keys, k)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []binding.Binding
	for _, k := range keys {
		b, err := t.Binding(k)
		if err != nil {
			return nil, fmt.Errorf("store: operator index names a missing binding: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
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
	if err := t.Readable(); err != nil {
		return authn.BearerSession{}, err
	}
	var s authn.BearerSession
	err := t.get(key(pOpSession, hex.EncodeToString(tokenHash[:])), &s)
	return s, err
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

func (t *badgerTx) BearerSessionsOf(operatorDID string) ([][32]byte, error) {
	var out [][32]byte
	err := t.scan(key(pOpByOp, operatorDID, ""), true, func(rest, _ []byte) error {
		// Exactly one 64-hex hash after the prefix: a DID with '/' in it cannot reach
		// another DID's entries.
		if h, ok := decodeKey(rest); ok {
			out = append(out, h)
		}
		return nil
	})
	return out, err
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
