package badger

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// The transparency log's keys. Indexes are 16 hex digits, so key order is index order.
const (
	pLogEntry = "l/e/"
	pLogHash  = "l/h/"
	kLogSize  = "m/log-size"
	kLogSeed  = "m/log-seed"
)

func logKey(prefix string, i int64) []byte { return fmt.Appendf(nil, "%s%016x", prefix, i) }

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
		e, err := t.getRaw(logKey(pLogEntry, i))
		if err != nil {
			return nil, fmt.Errorf("store: log entry %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func (t *badgerTx) LogHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		v, err := t.getRaw(logKey(pLogHash, x))
		if err != nil {
			return nil, err
		}
		if len(v) != len(out[i]) {
			return nil, fmt.Errorf("store: log hash %d is %d bytes", x, len(v))
		}
		copy(out[i][:], v)
	}
	return out, nil
}

func (t *badgerTx) AppendLog(index int64, entry []byte, hashes []tlog.Hash) error {
	if err := rules.CheckLogAppend(&t.TxState, t.LogSize, index, hashes); err != nil {
		return err
	}
	if err := t.setRaw(logKey(pLogEntry, index), entry); err != nil {
		return err
	}
	at := tlog.StoredHashIndex(0, index)
	for i, h := range hashes {
		if err := t.setRaw(logKey(pLogHash, at+int64(i)), h[:]); err != nil {
			return err
		}
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
