// Package move copies a registry's records from one store to another (svrpd migrate) and
// keeps and restores a Badger data directory as a file (svrpd backup, svrpd restore). It
// goes through the store contract only, so any store can be a source or a target; it is not
// a replication: a copy is taken once, from one read transaction of the source.
package move

import (
	"errors"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/translog"
)

// write is one record, ready to be put into a target transaction.
type write func(store.Tx) error

// kind is one kind of record: how to visit each record of it in a store, as the write that
// puts it into another. A kind visited in the source and in the target after the copy must
// give the same count, which is how a copy is verified.
type kind struct {
	name string
	each func(tx store.Tx, now time.Time, emit func(write) error) error
	// ordered is a kind whose writes must commit in the order each emits them: the
	// transparency log, appended entry by entry.
	ordered bool
}

// kinds is every kind of record a copy carries, in the order it writes them: records that
// others point at first, though the stores check no references. A new table in the store is
// one more entry here.
//
// The transparency log is carried whole, with the seed of its key, so that the target
// serves the same log under the same key and a client that checked the source's
// checkpoints checks the target's as extensions of them.
//
// Left out, on purpose: consumed login challenges and the shared challenge key (a challenge
// lives for minutes, and a target gets a key of its own when a daemon first starts on it,
// so no challenge issued before the copy verifies after it), the reserved ids of binding
// sessions deleted after their retention (the contract offers no way to list them), and
// bearer sessions already expired at the start of the copy.
var kinds = []kind{
	records("nodes", store.Tx.EachNode, store.Tx.PutNode),
	records("binding sessions", store.Tx.EachBindingSession, store.Tx.PutBindingSession),
	records("bindings", store.Tx.EachBinding, store.Tx.PutBinding),
	// Pins first: a pinned body names its root key from the first request the target
	// serves, so a colliding key cannot take the body in the moment after a move.
	records("operator pins", store.Tx.EachOperatorPin, store.Tx.PutOperatorPin),
	records("revocations", store.Tx.EachRevocation, store.Tx.PutRevocation),
	{"operator sessions", func(tx store.Tx, now time.Time, emit func(write) error) error {
		return tx.EachBearerSession(func(h [32]byte, s authn.BearerSession) error {
			if !s.ExpiresAt.After(now) {
				return nil
			}
			return emit(func(t store.Tx) error { return t.PutBearerSession(h, s) })
		})
	}, false},
	// Counters are the rate limits' windows and the failed-attempt counts: carried so that a
	// move does not hand a guesser a fresh budget.
	{"counters", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachCounter(func(k string, c store.Counter) error {
			return emit(func(t store.Tx) error { return t.PutCounter(k, c) })
		})
	}, false},
	{"log key", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		seed, err := tx.LogSeed()
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return emit(func(t store.Tx) error { return t.PutLogSeed(seed) })
	}, false},
	{"log entries", eachLogEntry, true},
}

// eachLogEntry emits the log's entries in order, read a tile's width at a time, each as an
// append: the target computes the hashes again from the entries, so a copy of a log whose
// hashes do not match its entries does not verify.
func eachLogEntry(tx store.Tx, _ time.Time, emit func(write) error) error {
	size, err := tx.LogSize()
	if err != nil {
		return err
	}
	for start := int64(0); start < size; start += translog.TileWidth {
		entries, err := tx.LogEntries(start, min(start+translog.TileWidth, size))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := emit(func(t store.Tx) error { _, err := translog.AppendBytes(t, e); return err }); err != nil {
				return err
			}
		}
	}
	return nil
}

// records is a kind whose every record is carried as it is: each visits them, put writes one.
func records[T any](name string, each func(store.Tx, func(T) error) error, put func(store.Tx, T) error) kind {
	return kind{name, func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return each(tx, func(v T) error {
			return emit(func(t store.Tx) error { return put(t, v) })
		})
	}, false}
}
