package badger

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// The transparency log's keys. Each entry is one record, "l/<16-hex index>", holding the
// Merkle hashes its append stored (one per level, level 0 first, 32 bytes each) after a byte
// that counts them, then the entry: an append writes two keys, the record and the size,
// where a key per hash would double what each registration commits. Indexes are fixed-width
// hex, so key order is index order.
const (
	pLogEntry = "l/"
	kLogSize  = "m/log-size"
	kLogSeed  = "m/log-seed"
)

func logKey(i int64) []byte { return fmt.Appendf(nil, "%s%016x", pLogEntry, i) }

// logRecord reads the record of entry i and splits it into its hashes and the entry.
func (t *badgerTx) logRecord(i int64) (hashes, entry []byte, err error) {
	v, err := t.getRaw(logKey(i))
	if err != nil {
		return nil, nil, err
	}
	if len(v) < 1 || len(v) < 1+32*int(v[0]) {
		return nil, nil, fmt.Errorf("store: log record %d is cut short", i)
	}
	n := 1 + 32*int(v[0])
	return v[1:n], v[n:], nil
}

func (t *badgerTx) LogSize() (int64, error) {
	v, err := t.getRaw([]byte(kLogSize))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store: the log's size %q: %w", v, err)
	}
	return n, nil
}

func (t *badgerTx) LogEntries(start, end int64) ([][]byte, error) {
	size, err := t.LogSize()
	if err != nil {
		return nil, err
	}
	if err := rules.CheckLogRange(size, start, end); err != nil {
		return nil, err
	}
	out := make([][]byte, 0, end-start)
	for i := start; i < end; i++ {
		_, e, err := t.logRecord(i)
		if err != nil {
			return nil, fmt.Errorf("store: log entry %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// LogHashes finds each hash in the record of the entry whose append stored it: the hash of
// level L and index n is stored by entry ((n+1) << L) − 1, at position L.
func (t *badgerTx) LogHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 {
			return nil, store.ErrNotFound
		}
		level, n := tlog.SplitStoredHashIndex(x)
		hs, _, err := t.logRecord((n+1)<<level - 1)
		if err != nil {
			return nil, err
		}
		if len(hs) < 32*(level+1) {
			return nil, fmt.Errorf("store: log hash %d is missing from its record", x)
		}
		copy(out[i][:], hs[32*level:])
	}
	return out, nil
}

func (t *badgerTx) AppendLog(index int64, entry []byte, hashes []tlog.Hash) error {
	if err := rules.CheckLogAppend(&t.TxState, t.LogSize, index, hashes); err != nil {
		return err
	}
	v := make([]byte, 0, 1+32*len(hashes)+len(entry))
	v = append(v, byte(len(hashes)))
	for _, h := range hashes {
		v = append(v, h[:]...)
	}
	// The record lies past the log's end, so its key does not exist yet.
	if err := t.setFresh(logKey(index), append(v, entry...)); err != nil {
		return err
	}
	return t.setRaw([]byte(kLogSize), strconv.AppendInt(nil, index+1, 10))
}

func (t *badgerTx) LogSeed() ([32]byte, error) {
	v, err := t.getRaw([]byte(kLogSeed))
	if err != nil {
		return [32]byte{}, err
	}
	if len(v) != 32 {
		return [32]byte{}, fmt.Errorf("store: the log's seed is %d bytes", len(v))
	}
	return [32]byte(v), nil
}

func (t *badgerTx) PutLogSeed(seed [32]byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.setRaw([]byte(kLogSeed), seed[:])
}
