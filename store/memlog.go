package store

import (
	"slices"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/store/internal/rules"
)

// memLog is the transparency log of the memory store.
type memLog struct {
	entries [][]byte
	hashes  []tlog.Hash
	seed    *[32]byte
}

func (t *memTx) LogSize() (int64, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	return int64(len(t.d.log.entries)), nil
}

func (t *memTx) LogEntries(start, end int64) ([][]byte, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	if err := rules.CheckLogRange(int64(len(t.d.log.entries)), start, end); err != nil {
		return nil, err
	}
	out := make([][]byte, 0, end-start)
	for _, e := range t.d.log.entries[start:end] {
		out = append(out, slices.Clone(e))
	}
	return out, nil
}

func (t *memTx) LogHashes(indexes []int64) ([]tlog.Hash, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.d.log.hashes)) {
			return nil, ErrNotFound
		}
		out[i] = t.d.log.hashes[x]
	}
	return out, nil
}

func (t *memTx) AppendLog(index int64, entry []byte, hashes []tlog.Hash) error {
	l := &t.d.log
	if err := rules.CheckLogAppend(&t.TxState, t.LogSize, index, hashes); err != nil {
		return err
	}
	n, h := len(l.entries), len(l.hashes)
	t.undo = append(t.undo, func() { l.entries, l.hashes = l.entries[:n], l.hashes[:h] })
	l.entries = append(l.entries, slices.Clone(entry))
	l.hashes = append(l.hashes, hashes...)
	return nil
}

func (t *memTx) LogSeed() ([32]byte, error) {
	if err := t.Readable(); err != nil {
		return [32]byte{}, err
	}
	if t.d.log.seed == nil {
		return [32]byte{}, ErrNotFound
	}
	return *t.d.log.seed, nil
}

func (t *memTx) PutLogSeed(seed [32]byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	old := t.d.log.seed
	t.undo = append(t.undo, func() { t.d.log.seed = old })
	t.d.log.seed = &seed
	return nil
}
