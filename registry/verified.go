package registry

import (
	"context"
	"reflect"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
)

// verified keeps the answers of the signature checks one write made in its dry run (see
// updateVerified), each with the session it was made on.
type verified struct{ entries []verifiedEntry }

type verifiedEntry struct {
	sess binding.BindingSession
	err  error
}

// check returns f's answer for sess: remembered when f already ran on an equal session,
// computed and remembered otherwise. f must depend only on sess and on what the caller
// holds constant; a check that reads the store (a revocation) is made after it, outside.
func (v *verified) check(sess binding.BindingSession, f func() error) error {
	for _, e := range v.entries {
		if reflect.DeepEqual(e.sess, sess) {
			return e.err
		}
	}
	err := f()
	v.entries = append(v.entries, verifiedEntry{sess, err})
	return err
}

// updateVerified runs fn twice: first in a read-only View, where its checks run and its
// signature verifications, made through v, are remembered, then in the write transaction,
// where a verification of the same session reuses the answer. So the write transaction
// does no Ed25519 work, and a transaction retried after a conflict none again, unless the
// session changed between the two. The View's outcome is discarded whatever it was: its
// writes fail as read-only, and the Update decides.
func (s *Service) updateVerified(ctx context.Context, fn func(tx store.Tx, v *verified) error) error {
	v := &verified{}
	_ = s.store.View(ctx, func(tx store.Tx) error { return fn(tx, v) })
	return s.store.Update(ctx, func(tx store.Tx) error { return fn(tx, v) })
}
