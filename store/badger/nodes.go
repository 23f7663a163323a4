package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
	"github.com/svrp/svrp/store/internal/rules"
)

// A heartbeat flush (WriteTouchedNode) writes the node's last_seen under a key of its own,
// 8 bytes, instead of rewriting the whole record; a read takes the later of the record's
// last_seen and that key's. PutNode and DeleteNode remove the key, since the record they
// write (or remove) carries its own. A directory from before this layout has no such keys,
// so it opens as it is.

func (t *badgerTx) Node(k didkey.PublicKey) (store.Node, error) {
	if err := t.Readable(); err != nil {
		return store.Node{}, err
	}
	n, err := t.getNode(key(pNode, k.Hex()))
	if err != nil {
		return n, err
	}
	raw, err := t.getRaw(key(pSeen, k.Hex()))
	switch {
	case err == nil:
		laterSeen(&n, raw)
	case !errors.Is(err, store.ErrNotFound):
		return store.Node{}, err
	}
	return n, nil
}

// laterSeen moves n's last_seen to raw, a g/ value, when that is later.
func laterSeen(n *store.Node, raw []byte) {
	if len(raw) != 8 {
		return
	}
	if seen := time.Unix(0, int64(binary.BigEndian.Uint64(raw))).UTC(); seen.After(n.LastSeen) {
		n.LastSeen = seen
	}
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

// WriteTouchedNode is one write of 8 bytes, no read.
func (t *badgerTx) WriteTouchedNode(n store.Node) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.setRaw(key(pSeen, n.Key.Hex()), binary.BigEndian.AppendUint64(nil, uint64(n.LastSeen.UnixNano())))
}

// dropSeen removes the g/ key of k, if it has one.
func (t *badgerTx) dropSeen(k didkey.PublicKey) error {
	if _, err := t.getRaw(key(pSeen, k.Hex())); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	return t.del(key(pSeen, k.Hex()))
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
		if err := t.dropSeen(n.Key); err != nil {
			return err
		}
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
	if err := t.dropSeen(k); err != nil {
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

// EachNode walks the records and the g/ keys side by side: both are in the order of the
// node keys' hex, so each record meets its g/ key, if any, without a lookup of its own.
func (t *badgerTx) EachNode(fn func(store.Node) error) error {
	p := []byte(pNode)
	txn, err := t.reader()
	if err != nil {
		return err
	}
	opts := dgbadger.DefaultIteratorOptions
	opts.Prefix = []byte(pSeen)
	seen := txn.NewIterator(opts)
	defer seen.Close()
	seen.Rewind()
	return t.scan(p, false, func(rest, v []byte) error {
		n, err := nodecodec.Decode(v)
		if err != nil {
			return fmt.Errorf("store: failed to decode %s: %w", kind(p), err)
		}
		for ; seen.Valid() && bytes.Compare(seen.Item().Key()[len(pSeen):], rest) < 0; seen.Next() {
		}
		if seen.Valid() && bytes.Equal(seen.Item().Key()[len(pSeen):], rest) {
			if err := seen.Item().Value(func(raw []byte) error { laterSeen(&n, raw); return nil }); err != nil {
				return fmt.Errorf("store: failed to read %s: %w", kind(seen.Item().Key()), err)
			}
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
