// Package move copies a registry's records from one store to another (svrpd migrate) and
// keeps and restores a Badger data directory as a file (svrpd backup, svrpd restore). It
// goes through the store contract only, so any store can be a source or a target; it is not
// a replication: a copy is taken once, from one read transaction of the source.
package move

import (
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
)

// write is one record, ready to be put into a target transaction.
type write func(store.Tx) error

// kind is one kind of record: how to visit each record of it in a store, as the write that
// puts it into another. A kind visited in the source and in the target after the copy must
// give the same count, which is how a copy is verified.
type kind struct {
	name string
	each func(tx store.Tx, now time.Time, emit func(write) error) error
}

// kinds is every kind of record a copy carries, in the order it writes them: records that
// others point at first, though the stores check no references. A new table in the store is
// one more entry here.
//
// Left out, on purpose: consumed login challenges and the shared challenge key (a challenge
// lives for minutes, and a target gets a key of its own when a daemon first starts on it,
// so no challenge issued before the copy verifies after it), the reserved ids of binding
// sessions deleted after their retention (the contract offers no way to list them), and
// bearer sessions already expired at the start of the copy.
var kinds = []kind{
	{"nodes", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachNode(func(n store.Node) error {
			return emit(func(t store.Tx) error { return t.PutNode(n) })
		})
	}},
	{"binding sessions", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachBindingSession(func(s binding.BindingSession) error {
			return emit(func(t store.Tx) error { return t.PutBindingSession(s) })
		})
	}},
	{"bindings", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachBinding(func(b binding.Binding) error {
			return emit(func(t store.Tx) error { return t.PutBinding(b) })
		})
	}},
	// Pins first: a pinned body names its root key from the first request the target
	// serves, so a colliding key cannot take the body in the moment after a move.
	{"operator pins", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachOperatorPin(func(p store.OperatorPin) error {
			return emit(func(t store.Tx) error { return t.PutOperatorPin(p) })
		})
	}},
	{"revocations", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachRevocation(func(r store.Revocation) error {
			return emit(func(t store.Tx) error { return t.PutRevocation(r) })
		})
	}},
	{"operator sessions", func(tx store.Tx, now time.Time, emit func(write) error) error {
		return tx.EachBearerSession(func(h [32]byte, s authn.BearerSession) error {
			if !s.ExpiresAt.After(now) {
				return nil
			}
			return emit(func(t store.Tx) error { return t.PutBearerSession(h, s) })
		})
	}},
	// Counters are the rate limits' windows and the failed-attempt counts: carried so that a
	// move does not hand a guesser a fresh budget.
	{"counters", func(tx store.Tx, _ time.Time, emit func(write) error) error {
		return tx.EachCounter(func(k string, c binding.Counter) error {
			return emit(func(t store.Tx) error { return t.PutCounter(k, c) })
		})
	}},
}
