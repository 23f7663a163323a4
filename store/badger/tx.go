package badger

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

type badgerTx struct {
	txn *dgbadger.Txn
	db  *dgbadger.DB // a View's: txn is begun from it at the first read
	rules.TxState
	// undo holds, for each key this Tx wrote, what the shared transaction held before, so
	// that a failing function of a group can be taken back alone. Nil when the Tx has the
	// transaction to itself.
	undo map[string]undoEntry
}

// undoEntry is a key's state before a function wrote it.
type undoEntry struct {
	old     []byte
	existed bool
}

// remember records k's state before its first write by this Tx.
func (t *badgerTx) remember(k []byte) error {
	if t.undo == nil {
		return nil
	}
	if _, seen := t.undo[string(k)]; seen {
		return nil
	}
	old, err := t.getRaw(k)
	switch {
	case err == nil:
		t.undo[string(k)] = undoEntry{old: old, existed: true}
	case errors.Is(err, store.ErrNotFound):
		t.undo[string(k)] = undoEntry{}
	default:
		return err
	}
	return nil
}

// rollback restores every key this Tx wrote to its state before the Tx.
func (t *badgerTx) rollback() error {
	for k, e := range t.undo {
		var err error
		if e.existed {
			err = t.txn.Set([]byte(k), e.old)
		} else {
			err = t.txn.Delete([]byte(k))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var _ store.Tx = (*badgerTx)(nil)

func key(prefix string, parts ...string) []byte {
	k := []byte(prefix)
	for i, p := range parts {
		if i > 0 {
			k = append(k, '/')
		}
		k = append(k, p...)
	}
	return k
}

// kinds name the record kinds of the key layout for error messages, which carry no key or
// value; any other key is an index entry.
var kinds = []struct{ prefix, name string }{
	{pNode, "node"}, {pSeen, "node heartbeat"}, {pSession, "binding session"}, {pBinding, "binding"},
	{pOpSession, "bearer session"}, {pCounter, "counter"}, {pRevoked, "revocation"},
	{pPin, "operator pin"}, {pLogEntry, "log entry"},
}

func kind(k []byte) string {
	for _, e := range kinds {
		if bytes.HasPrefix(k, []byte(e.prefix)) {
			return e.name
		}
	}
	return "index"
}

// reader returns the transaction reads go through, beginning a View's at its first read.
func (t *badgerTx) reader() (*dgbadger.Txn, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	if t.txn == nil {
		if t.db.IsClosed() {
			return nil, store.ErrClosed
		}
		t.txn = t.db.NewTransaction(false)
	}
	return t.txn, nil
}

func (t *badgerTx) getRaw(k []byte) ([]byte, error) {
	txn, err := t.reader()
	if err != nil {
		return nil, err
	}
	item, err := txn.Get(k)
	if errors.Is(err, dgbadger.ErrKeyNotFound) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: failed to read %s: %w", kind(k), err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("store: failed to read %s: %w", kind(k), err)
	}
	return v, nil
}

func (t *badgerTx) get(k []byte, v any) error {
	raw, err := t.getRaw(k)
	if err != nil {
		return err
	}
	return decode(k, raw, v)
}

// record reads the JSON record under k; a Tx past its function gets ErrTxDone from the
// read.
func record[T any](t *badgerTx, k []byte) (T, error) {
	var v T
	err := t.get(k, &v)
	return v, err
}

// stored returns the record under k, nil when there is none.
func stored[T any](t *badgerTx, k []byte) (*T, error) {
	var v T
	err := t.get(k, &v)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func decode(k, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("store: failed to decode %s: %w", kind(k), err)
	}
	return nil
}

func (t *badgerTx) setRaw(k, v []byte) error {
	if err := t.remember(k); err != nil {
		return err
	}
	if err := t.txn.Set(k, v); err != nil {
		return fmt.Errorf("store: failed to write %s: %w", kind(k), err)
	}
	return nil
}

// setFresh is setRaw for a key the caller knows is absent (a log entry or hash past the
// log's end): its undo entry is "absent", with no read to find out.
func (t *badgerTx) setFresh(k, v []byte) error {
	if t.undo != nil {
		if _, seen := t.undo[string(k)]; !seen {
			t.undo[string(k)] = undoEntry{}
		}
	}
	if err := t.txn.Set(k, v); err != nil {
		return fmt.Errorf("store: failed to write %s: %w", kind(k), err)
	}
	return nil
}

func (t *badgerTx) put(k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: failed to encode %s: %w", kind(k), err)
	}
	return t.setRaw(k, raw)
}

func (t *badgerTx) del(k []byte) error {
	if err := t.remember(k); err != nil {
		return err
	}
	if err := t.txn.Delete(k); err != nil {
		return fmt.Errorf("store: failed to delete %s: %w", kind(k), err)
	}
	return nil
}

// scan calls fn with the part of each key after prefix and, unless keysOnly, the value, in
// key order. Both are valid only during the call. Writes are refused meanwhile, as the Tx
// contract asks of Each functions.
func (t *badgerTx) scan(prefix []byte, keysOnly bool, fn func(rest, val []byte) error) error {
	if err := t.Readable(); err != nil {
		return err
	}
	t.Iterating++
	defer func() { t.Iterating-- }()
	opts := dgbadger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = !keysOnly
	txn, err := t.reader()
	if err != nil {
		return err
	}
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		// Badger's own buffers, valid until the next item: every caller decodes or copies
		// what it keeps, and a start-up scan of a million nodes saves two copies a record.
		item := it.Item()
		k := item.Key()
		if keysOnly {
			if err := fn(k[len(prefix):], nil); err != nil {
				return err
			}
			continue
		}
		var ferr error
		if err := item.Value(func(v []byte) error {
			ferr = fn(k[len(prefix):], v)
			return nil
		}); err != nil {
			return fmt.Errorf("store: failed to read %s: %w", kind(k), err)
		}
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// members returns what parse makes of the rest of each key under prefix, in key order,
// skipping what it refuses: the members of an index group.
func members[M any](t *badgerTx, prefix []byte, parse func([]byte) (M, bool)) ([]M, error) {
	var out []M
	err := t.scan(prefix, true, func(rest, _ []byte) error {
		if m, ok := parse(rest); ok {
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// readEach reads the record each member of an index group names; a missing one is an
// index out of step with its records.
func readEach[M, R any](ms []M, read func(M) (R, error), index string) ([]R, error) {
	var out []R
	for _, m := range ms {
		r, err := read(m)
		if err != nil {
			return nil, fmt.Errorf("store: the %s index names a missing record: %w", index, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseNodeKey(b []byte) (didkey.PublicKey, bool) { return decodeKey(b) }

func parseID(b []byte) (string, bool) { return string(b), true }

// decodeKey parses a hex node key or hash from a key or an index value; ok is false for
// anything else, which a scan then skips as not its own.
func decodeKey(s []byte) (k [32]byte, ok bool) {
	if len(s) != 2*len(k) {
		return k, false
	}
	if _, err := hex.Decode(k[:], s); err != nil {
		return k, false
	}
	return k, true
}
