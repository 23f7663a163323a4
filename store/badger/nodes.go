package badger

import (
	"errors"
	"fmt"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
)

func (t *badgerTx) Node(k didkey.PublicKey) (store.Node, error) {
	if err := t.Readable(); err != nil {
		return store.Node{}, err
	}
	return t.getNode(key(pNode, k.Hex()))
}

// getNode reads a node record in its binary form (nodecodec.go).
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
	old, err := t.getNode(key(pNode, n.Key.Hex()))
	had := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if !had || old.DID != n.DID {
		if had && old.DID != "" {
			owner, err := t.getRaw(key(pDID, old.DID))
			switch {
			case err == nil && string(owner) == n.Key.Hex():
				if err := t.del(key(pDID, old.DID)); err != nil {
					return err
				}
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		if n.DID != "" {
			if err := t.setRaw(key(pDID, n.DID), []byte(n.Key.Hex())); err != nil {
				return err
			}
		}
	}
	if !had {
		if err := t.setRaw(key(pBody, n.Key.ShortBody(), n.Key.Hex()), nil); err != nil {
			return err
		}
	}
	return t.setRaw(key(pNode, n.Key.Hex()), nodecodec.Append(nil, n))
}

func (t *badgerTx) PutNodeRevision(n store.Node) (uint64, error) { return 0, t.PutNode(n) }

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
	var keys []didkey.PublicKey
	err := t.scan(key(pBody, body, ""), true, func(rest, _ []byte) error {
		if k, ok := decodeKey(rest); ok {
			keys = append(keys, k)
		}
		return nil
	})
	return keys, err
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
