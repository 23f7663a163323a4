package badger

import (
	"errors"
	"fmt"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
	"github.com/svrp/svrp/store/internal/rules"
)

func (t *badgerTx) Node(k didkey.PublicKey) (store.Node, error) {
	if err := t.Readable(); err != nil {
		return store.Node{}, err
	}
	return t.getNode(key(pNode, k.Hex()))
}

// getNode reads a node record in its binary form (package store/internal/nodecodec).
func (t *badgerTx) getNode(k []byte) (store.Node, error) {
	raw, err := t.getRaw(k)
	if err != nil {
		return store.Node{}, err
	}
	n, err := nodecodec.Decode(raw)
	if err != nil {
		return store.Node{}, fmt.Errorf("store: failed to decode %s: %w", kind(k), err)
	}
	return n, nil
}

// WriteTouchedNode is one write, no read.
func (t *badgerTx) WriteTouchedNode(n store.Node) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.setRaw(key(pNode, n.Key.Hex()), nodecodec.Append(nil, n))
}

func (t *badgerTx) PutNode(n store.Node) error {
	if err := t.Writable(); err != nil {
		return err
	}
	var oldDID *string
	old, err := t.getNode(key(pNode, n.Key.Hex()))
	switch {
	case err == nil:
		oldDID = &old.DID
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := rules.PutNode(indexes{t}, n.Key, oldDID, n.DID); err != nil {
		return err
	}
	return t.setRaw(key(pNode, n.Key.Hex()), nodecodec.Append(nil, n))
}

func (t *badgerTx) PutNodeRevision(n store.Node) (uint64, error) { return 0, t.PutNode(n) }

func (t *badgerTx) DeleteNode(k didkey.PublicKey) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old, err := t.getNode(key(pNode, k.Hex()))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := rules.DeleteNode(indexes{t}, k, old.DID); err != nil {
		return err
	}
	return t.del(key(pNode, k.Hex()))
}

func (t *badgerTx) ConsumeChallenge([]byte, time.Time) error { return store.ErrChallengesNotKept }

func (t *badgerTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	if err := t.Readable(); err != nil {
		return didkey.PublicKey{}, err
	}
	raw, err := t.getRaw(key(pDID, did))
	if err != nil {
		return didkey.PublicKey{}, err
	}
	k, ok := decodeKey(raw)
	if !ok {
		return didkey.PublicKey{}, errors.New("store: corrupt DID index entry")
	}
	return k, nil
}

func (t *badgerTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	return members(t, key(pBody, body, ""), parseNodeKey)
}

func (t *badgerTx) EachNode(fn func(store.Node) error) error {
	p := []byte(pNode)
	return t.scan(p, false, func(_, v []byte) error {
		n, err := nodecodec.Decode(v)
		if err != nil {
			return fmt.Errorf("store: failed to decode %s: %w", kind(p), err)
		}
		return fn(n)
	})
}

func (t *badgerTx) NodeCount() (int, error) {
	n := 0
	err := t.scan([]byte(pNode), true, func(_, _ []byte) error {
		n++
		return nil
	})
	return n, err
}
