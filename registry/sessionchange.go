package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// A change of a binding session that verifies signatures is made in three steps, so that no
// Ed25519 work is done inside a write transaction, where it would hold up the writes queued
// behind it (and be done again when the store retries the transaction):
//
//  1. read, in a View: the session, expiry applied, and what the checks need beside it;
//  2. verify, with no store access: every check of the protocol on what was read, in the
//     protocol's order, signatures included; it yields the session to write;
//  3. write, in an Update: the session is read again and, when it is still the version that
//     was verified, the checks that must see the store as it is written (a revocation) are
//     made and the change is written.
//
// When the session changed between 1 and 3, the change starts over from 1, so the answer is
// the one the protocol gives for the session as it now is.
type sessionChange struct {
	// read, when not nil, reads in the View what verify needs beside the session.
	read func(tx store.Tx, sess binding.BindingSession) error
	// verify checks the request against sess, the session as read, and returns the session
	// to write. It must not touch the store.
	verify func(sess binding.BindingSession) (binding.BindingSession, error)
	// write, when not nil, runs in the Update before next is written: the checks against the
	// store as it is written, and the writes that go with the change.
	write func(tx store.Tx, next binding.BindingSession) error
}

// errSessionChanged is how the write step tells changeSession to start over.
var errSessionChanged = errors.New("registry: the binding session changed since it was verified")

// changeSession makes c's change of session id and returns the session written.
func (s *Service) changeSession(ctx context.Context, id string, now time.Time, c sessionChange) (binding.BindingSession, error) {
	for range limits.MaxVerifyRounds {
		var read binding.BindingSession
		err := s.store.View(ctx, func(tx store.Tx) (err error) {
			if read, err = sessionAt(tx, id, now); err != nil || c.read == nil {
				return err
			}
			return c.read(tx, read)
		})
		if err != nil {
			return binding.BindingSession{}, err
		}
		next, err := c.verify(read)
		if err != nil {
			return binding.BindingSession{}, err
		}
		err = s.store.Update(ctx, func(tx store.Tx) error {
			cur, err := sessionAt(tx, id, now)
			if err != nil {
				return err
			}
			if !sameVersion(read, cur) {
				return errSessionChanged
			}
			if c.write != nil {
				if err := c.write(tx, next); err != nil {
					return err
				}
			}
			return tx.PutBindingSession(next)
		})
		if !errors.Is(err, errSessionChanged) {
			return next, err
		}
	}
	return binding.BindingSession{}, fmt.Errorf("binding session %s changed %d times while being verified", id, limits.MaxVerifyRounds)
}

// sessionOf reads session id; an unknown id is NOT_FOUND.
func sessionOf(tx store.Tx, id string) (binding.BindingSession, error) {
	sess, err := tx.BindingSession(id)
	if errors.Is(err, store.ErrNotFound) {
		return binding.BindingSession{}, errSessionNotFound()
	}
	return sess, err
}

// sessionAt reads session id with expiry applied at now; an unknown id is NOT_FOUND.
func sessionAt(tx store.Tx, id string, now time.Time) (binding.BindingSession, error) {
	sess, err := sessionOf(tx, id)
	if err != nil {
		return binding.BindingSession{}, err
	}
	return binding.ExpireIfDue(sess, now), nil
}

// sameVersion reports whether cur, read in the write, is the version of the session that
// read was. A session's state only moves forward, every write of it sets updated_at, and the
// only writes that leave the state as it is mark an ACTIVE session unbound, once: so state,
// updated_at and the unbinding mark together name one version. What verification reads of a
// session (its request, node key, operator and credentials) is set with a change of state
// and never changed after.
func sameVersion(read, cur binding.BindingSession) bool {
	return cur.State == read.State && cur.UpdatedAt.Equal(read.UpdatedAt) && cur.UnboundBy == read.UnboundBy
}

// revocationsRead is what a View found revoked among the credentials a request carries, for a
// check that runs outside any transaction. It answers only for the pairs it read.
type revocationsRead map[[2]string]bool

// readRevocations reads whether each (operator_did, revocation_id) pair is revoked, for the
// checks of dc (see [revocations]).
func readRevocations(tx store.Tx, dc authn.DeviceCredential, pairs ...[2]string) (revocationsRead, error) {
	rl := revocations(tx, dc)
	read := make(revocationsRead, len(pairs))
	for _, p := range pairs {
		revoked, err := rl.Revoked(p[0], p[1])
		if err != nil {
			return nil, err
		}
		read[p] = revoked
	}
	return read, nil
}

// Revoked implements [authn.Revocations].
func (r revocationsRead) Revoked(operatorDID, revocationID string) (bool, error) {
	revoked, ok := r[[2]string{operatorDID, revocationID}]
	if !ok {
		return false, errors.New("registry: a revocation was asked that the read did not read")
	}
	return revoked, nil
}

var _ authn.Revocations = revocationsRead(nil)

// readPin reads the pin of operatorDID's body, for checks that run outside any transaction:
// the set holds it when the body is pinned, and is empty otherwise. A string that is not an
// operator DID has none: the credential checks refuse it (DC_ID_BINDING) before they ask.
func readPin(tx store.Tx, operatorDID string) (authn.PinSet, error) {
	did, err := didkey.Parse(operatorDID)
	if err != nil || !did.IsOperator() {
		return nil, nil
	}
	p, err := tx.OperatorPin(did.Body())
	if errors.Is(err, store.ErrNotFound) || err == nil && !p.Pins() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return authn.PinSet{did.Body(): p.RootKey}, nil
}

// recheckPin asks the pins again in tx, for a credential that passed the checks against read:
// a pin never changes once written, so only a body that was not pinned at the read is read
// again.
func recheckPin(tx store.Tx, read authn.PinSet, dc authn.DeviceCredential) error {
	if len(read) > 0 {
		return nil
	}
	did, root, err := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
	if err != nil {
		return proto.Errorf(proto.DCIDBinding, "device credential: %w", err)
	}
	_, _, err = checkPin(tx, did, root)
	return err
}
