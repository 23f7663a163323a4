package store

import (
	"context"
	"crypto/rand"
	"errors"

	"golang.org/x/mod/sumdb/tlog"
)

// LogTx is the transparency log (package translog) as a store keeps it: entries by index,
// the Merkle hashes stored for them by storage index (tlog's layout), and the seed of the
// key that signs its checkpoints. The registry appends an entry in the transaction of the
// write it records, so the log holds an entry for every committed write and none for a write
// that was not; in a store shared by several processes, each append reads the log's size,
// so two concurrent appends conflict and one runs again: the log has one order, whichever
// process writes. Entries and hashes are never removed or changed.
type LogTx interface {
	// LogSize returns the number of entries.
	LogSize() (int64, error)
	// LogEntries returns the entries of indexes [start, end), which must lie in the log.
	LogEntries(start, end int64) ([][]byte, error)
	// LogHashes returns the stored hashes at the given storage indexes, in their order;
	// ErrNotFound when one is not stored.
	LogHashes(indexes []int64) ([]tlog.Hash, error)
	// AppendLog stores entry at index and hashes at the storage indexes from
	// tlog.StoredHashIndex(0, index) on. index must be LogSize() and hashes the number
	// that entry adds, or nothing is written and the error says so.
	AppendLog(index int64, entry []byte, hashes []tlog.Hash) error
	// LogSeed returns the seed of the log's signing key, ErrNotFound when none was put.
	LogSeed() ([32]byte, error)
	// PutLogSeed stores the seed of the log's signing key, replacing any.
	PutLogSeed(seed [32]byte) error
}

// LogSeed returns the seed of the log's signing key, making one from crypto/rand the
// first time, so that the key is the store's: every process that opens the store signs
// with it, and a copy of the store (backup, restore, migrate) carries it.
func LogSeed(ctx context.Context, s Store) ([32]byte, error) {
	var seed [32]byte
	err := s.Update(ctx, func(tx Tx) error {
		var err error
		seed, err = tx.LogSeed()
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		rand.Read(seed[:])
		return tx.PutLogSeed(seed)
	})
	return seed, err
}
