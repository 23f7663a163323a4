// Package rules holds what every store applies alike, so that a registry tested against
// one store does not break on another: the life of a transaction, the checks on what a
// binding session must hold to be read back, and the steps built of other Tx methods.
package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
)

// TxState is the life of a transaction: no use after its function returned, no write in a
// View, no write from inside an Each function.
type TxState struct {
	Write     bool
	Done      bool
	Iterating int
}

// Readable refuses a Tx used after its function returned.
func (t *TxState) Readable() error {
	if t.Done {
		return ErrTxDone
	}
	return nil
}

// Writable refuses what Readable does, a write in a View and a write during an Each.
func (t *TxState) Writable() error {
	switch {
	case t.Done:
		return ErrTxDone
	case !t.Write:
		return ErrWriteInView
	case t.Iterating > 0:
		return ErrWriteInEach
	}
	return nil
}

// The misuses of a transaction; package store exports them under the same names.
var (
	ErrWriteInView = errors.New("store: write in a read-only transaction")
	ErrWriteInEach = errors.New("store: write during an Each iteration")
	ErrTxDone      = errors.New("store: transaction used after its function returned")
	ErrClosed      = errors.New("store: closed")
)

// CheckSession refuses what could be written but never read back: an empty id cannot be
// looked up, and a state outside the known ones has no stored spelling, so an encoding
// would fail when decoding it. Every store checks the same so that all fail alike.
func CheckSession(s binding.BindingSession) error {
	if s.ID == "" {
		return errors.New("store: binding session without an id")
	}
	if _, err := binding.ParseState(s.State.String()); err != nil {
		return fmt.Errorf("store: binding session with state %d: %w", uint8(s.State), err)
	}
	return nil
}

// UsedIDHash is what a store keeps of a deleted session's id: enough to refuse the id
// again, in a fixed 64 bytes whatever the id's length.
func UsedIDHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// SecretHashes returns the hashes of s worth indexing: a zero hash means "no such secret"
// and must not make every such session findable under it.
func SecretHashes(s binding.BindingSession) [][32]byte {
	var hs [][32]byte
	for _, h := range [...][32]byte{s.CodeHash, s.TokenHash} {
		if h != ([32]byte{}) && !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	return hs
}

// Counting is what a counter value does: package store's Counter, left a type parameter
// here because package store imports this one.
type Counting[C any] interface {
	Fail(now time.Time, window time.Duration) C
}

// CounterReader is the part of a Tx that reads a counter, with the state of its life.
type CounterReader[C any] interface {
	Readable() error
	Counter(key string) (C, error)
}

// CounterTx is the part of a Tx that reads and writes a counter, with the state of its life.
type CounterTx[C any] interface {
	CounterReader[C]
	Writable() error
	PutCounter(key string, c C) error
}

// CountEvent is CountEvent on a Tx whose Update runs alone, so that a read and a write in
// one transaction are one step. A Tx that may not write is refused before the read.
func CountEvent[C Counting[C]](tx CounterTx[C], key string, now time.Time, window time.Duration) (C, error) {
	var zero C
	if err := tx.Writable(); err != nil {
		return zero, err
	}
	c, err := tx.Counter(key)
	if err != nil {
		return zero, err
	}
	c = c.Fail(now, window)
	if err := tx.PutCounter(key, c); err != nil {
		return zero, err
	}
	return c, nil
}

// Counters is Counters made of one Counter per key. A Tx past its function is refused even
// for no keys.
func Counters[C any](tx CounterReader[C], keys []string) ([]C, error) {
	if err := tx.Readable(); err != nil {
		return nil, err
	}
	out := make([]C, len(keys))
	for i, k := range keys {
		c, err := tx.Counter(k)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// SortedKeys returns the keys of m in the order of compare: stores that keep records in
// maps visit them in key order, as the stores that keep them sorted do.
func SortedKeys[K comparable, V any](m map[K]V, compare func(a, b K) int) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compare)
	return ks
}

// CompareKeys orders node keys as their bytes.
func CompareKeys(a, b didkey.PublicKey) int { return bytes.Compare(a[:], b[:]) }

// CompareHashes orders hashes as their bytes.
func CompareHashes(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) }

// ErrLogAppend is an append to the transparency log at an index other than its size, or
// with other than the hashes that index adds: a caller's mistake, refused so that no store
// keeps a log whose hashes do not match its entries.
var ErrLogAppend = errors.New("store: a log append out of order")

// CheckLogAppend checks an append of hashes at index in a transaction t whose log's size
// is what size returns: t writable, and the append in order.
func CheckLogAppend(t *TxState, size func() (int64, error), index int64, hashes []tlog.Hash) error {
	if err := t.Writable(); err != nil {
		return err
	}
	n, err := size()
	if err != nil {
		return err
	}
	if index != n || int64(len(hashes)) != tlog.StoredHashCount(index+1)-tlog.StoredHashCount(index) {
		return fmt.Errorf("%w: entry %d with %d hashes to a log of %d", ErrLogAppend, index, len(hashes), n)
	}
	return nil
}

// CheckLogRange checks that [start, end) lies in a log of size entries.
func CheckLogRange(size, start, end int64) error {
	if start < 0 || start > end || end > size {
		return fmt.Errorf("store: log entries [%d, %d) of a log of %d", start, end, size)
	}
	return nil
}
