package badger

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// indexes are the index entries of the key layout (badger.go) as one Update changes them;
// the rules package decides which change.
type indexes struct{ t *badgerTx }

// owner reads an owner entry, ok false when there is none.
func (x indexes) owner(k []byte) (v []byte, ok bool, err error) {
	v, err = x.t.getRaw(k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// DIDOwner reads an entry that does not hold a key as no entry: the caller then leaves it.
func (x indexes) DIDOwner(did string) (didkey.PublicKey, bool, error) {
	v, ok, err := x.owner(key(pDID, did))
	if !ok {
		return didkey.PublicKey{}, false, err
	}
	k, ok := decodeKey(v)
	return k, ok, nil
}

func (x indexes) SetDIDOwner(did string, k didkey.PublicKey) error {
	return x.t.setRaw(key(pDID, did), []byte(k.Hex()))
}

func (x indexes) DropDIDOwner(did string) error { return x.t.del(key(pDID, did)) }

func secretKey(h [32]byte) []byte { return key(pSecret, hex.EncodeToString(h[:])) }

func (x indexes) SecretOwner(h [32]byte) (string, bool, error) {
	v, ok, err := x.owner(secretKey(h))
	return string(v), ok, err
}

func (x indexes) SetSecretOwner(h [32]byte, id string) error {
	return x.t.setRaw(secretKey(h), []byte(id))
}

func (x indexes) DropSecretOwner(h [32]byte) error { return x.t.del(secretKey(h)) }

func (x indexes) AddShortBody(k didkey.PublicKey) error {
	return x.t.setRaw(key(pBody, k.ShortBody(), k.Hex()), nil)
}

func (x indexes) DropShortBody(k didkey.PublicKey) error {
	return x.t.del(key(pBody, k.ShortBody(), k.Hex()))
}

func (x indexes) AddOpenSession(node didkey.PublicKey, id string) error {
	return x.t.setRaw(key(pByNode, node.Hex(), id), nil)
}

func (x indexes) DropOpenSession(node didkey.PublicKey, id string) error {
	return x.t.del(key(pByNode, node.Hex(), id))
}

func (x indexes) AddOperatorBinding(operatorDID string, node didkey.PublicKey) error {
	return x.t.setRaw(key(pOperator, operatorDID, node.Hex()), nil)
}

func (x indexes) DropOperatorBinding(operatorDID string, node didkey.PublicKey) error {
	return x.t.del(key(pOperator, operatorDID, node.Hex()))
}

func (x indexes) AddOperatorSession(operatorDID string, tokenHash [32]byte) error {
	list, err := x.t.operatorSessions(operatorDID)
	if err != nil {
		return err
	}
	// In byte order, the order in which the other stores list them.
	i, found := slices.BinarySearchFunc(list, tokenHash, compareHash)
	if found {
		return nil
	}
	return x.t.setOperatorSessions(operatorDID, slices.Insert(list, i, tokenHash))
}

func (x indexes) DropOperatorSession(operatorDID string, tokenHash [32]byte) error {
	list, err := x.t.operatorSessions(operatorDID)
	if err != nil {
		return err
	}
	i, found := slices.BinarySearchFunc(list, tokenHash, compareHash)
	if !found {
		return nil
	}
	return x.t.setOperatorSessions(operatorDID, slices.Delete(list, i, i+1))
}

func (x indexes) MarkSessionIDUsed(id string) error {
	return x.t.setRaw(key(pUsedID, rules.UsedIDHash(id)), nil)
}

var _ rules.Indexes = indexes{}

func compareHash(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) }
