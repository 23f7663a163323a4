package store

import (
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store/internal/rules"
)

// memIndexes are the memory store's indexes as one Update changes them, every change
// through its undo log; the rules package decides which change.
type memIndexes struct{ t *memTx }

// lookup returns a copy of m[k], or nil when m has no k.
func lookup[K comparable, V any](m map[K]V, k K) *V {
	v, ok := m[k]
	if !ok {
		return nil
	}
	return &v
}

func (x memIndexes) DIDOwner(did string) (didkey.PublicKey, bool, error) {
	k, ok := x.t.d.byDID[did]
	return k, ok, nil
}

func (x memIndexes) SetDIDOwner(did string, k didkey.PublicKey) error {
	mapSet(&x.t.undo, x.t.d.byDID, did, k)
	return nil
}

func (x memIndexes) DropDIDOwner(did string) error {
	mapDelete(&x.t.undo, x.t.d.byDID, did)
	return nil
}

func (x memIndexes) SecretOwner(h [32]byte) (string, bool, error) {
	id, ok := x.t.d.bySecret[h]
	return id, ok, nil
}

func (x memIndexes) SetSecretOwner(h [32]byte, id string) error {
	mapSet(&x.t.undo, x.t.d.bySecret, h, id)
	return nil
}

func (x memIndexes) DropSecretOwner(h [32]byte) error {
	mapDelete(&x.t.undo, x.t.d.bySecret, h)
	return nil
}

func (x memIndexes) AddShortBody(k didkey.PublicKey) error {
	setAdd(&x.t.undo, x.t.d.byBody, k.ShortBody(), k)
	return nil
}

func (x memIndexes) DropShortBody(k didkey.PublicKey) error {
	setRemove(&x.t.undo, x.t.d.byBody, k.ShortBody(), k)
	return nil
}

func (x memIndexes) AddOpenSession(node didkey.PublicKey, id string) error {
	setAdd(&x.t.undo, x.t.d.byNode, node, id)
	return nil
}

func (x memIndexes) DropOpenSession(node didkey.PublicKey, id string) error {
	setRemove(&x.t.undo, x.t.d.byNode, node, id)
	return nil
}

func (x memIndexes) AddOperatorBinding(operatorDID string, node didkey.PublicKey) error {
	setAdd(&x.t.undo, x.t.d.byOperator, operatorDID, node)
	return nil
}

func (x memIndexes) DropOperatorBinding(operatorDID string, node didkey.PublicKey) error {
	setRemove(&x.t.undo, x.t.d.byOperator, operatorDID, node)
	return nil
}

func (x memIndexes) AddOperatorSession(operatorDID string, tokenHash [32]byte) error {
	setAdd(&x.t.undo, x.t.d.byOpSess, operatorDID, tokenHash)
	return nil
}

func (x memIndexes) DropOperatorSession(operatorDID string, tokenHash [32]byte) error {
	setRemove(&x.t.undo, x.t.d.byOpSess, operatorDID, tokenHash)
	return nil
}

func (x memIndexes) MarkSessionIDUsed(id string) error {
	mapSet(&x.t.undo, x.t.d.usedIDs, rules.UsedIDHash(id), struct{}{})
	return nil
}
