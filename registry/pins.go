package registry

import (
	"context"
	"errors"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/store"
)

// Operators are their root keys (docs/protocol.md §10.8). An operator DID body is 8 or 10 hex
// characters of a hash of the root key, so another root key with the same short body is
// some 2^32 key generations away. Each body is pinned to the first root key the registry
// accepts under it — a login whose credential passed the root signature, or a revocation
// whose signature verified — and a credential or revocation naming that body with another
// root key is DID_COLLISION, before any challenge is consumed.
//
// Bearer sessions, resolved binding sessions and bindings are keyed by the operator DID
// string, which a pin makes one root key's; revocations are looked up by root key (see
// [revocations]), so one made under either spelling of a root's DID revokes the
// credentials of both, and none made under another root key ever counts.

func errDIDCollision() error {
	return proto.New(proto.DIDCollision, "this operator DID belongs to another root key; use the 10-hex form")
}

// checkPin returns the pin of did's body, found or not, and DID_COLLISION when the body is
// pinned to a root key other than root.
func checkPin(tx store.Tx, did didkey.DID, root didkey.PublicKey) (store.OperatorPin, bool, error) {
	pin, err := tx.OperatorPin(did.Body())
	if errors.Is(err, store.ErrNotFound) {
		return store.OperatorPin{Body: did.Body(), RootKey: root}, false, nil
	}
	if err != nil {
		return store.OperatorPin{}, false, err
	}
	if pin.RootKey != root {
		return store.OperatorPin{}, true, errDIDCollision()
	}
	return pin, true, nil
}

// pinOperator pins did's body to root unless it is pinned already (DID_COLLISION when to
// another key) and, when loggedIn, records that the root key logged in under it. It writes
// only what changed, and returns the pin as stored.
func pinOperator(tx store.Tx, did didkey.DID, root didkey.PublicKey, now time.Time, loggedIn bool) (store.OperatorPin, error) {
	pin, found, err := checkPin(tx, did, root)
	if err != nil {
		return store.OperatorPin{}, err
	}
	changed := !found
	if !found {
		pin.PinnedAt = now
	}
	if loggedIn && !pin.LoggedIn() {
		pin.LoggedInAt, changed = now, true
	}
	if !changed {
		return pin, nil
	}
	return pin, tx.PutOperatorPin(pin)
}

// credentialOperator is the operator DID and root key of a credential that passed the
// credential checks (docs/protocol.md §5.2 steps 1–4), which parsed both already.
func credentialOperator(dc authn.DeviceCredential) (didkey.DID, didkey.PublicKey, error) {
	did, root, err := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
	if err != nil {
		return didkey.DID{}, didkey.PublicKey{}, proto.Errorf(proto.DCIDBinding, "device credential: %w", err)
	}
	return did, root, nil
}

// loginChecks is what a login checks in the store after the credential's own checks and
// before its challenge: the pin of its operator DID (DID_COLLISION), then its revocation
// (DC_REVOKED). It is passed to authn.VerifyLogin as its revocation list, which asks it at
// exactly that point; *reached tells whether it was asked and passed the pin.
func loginChecks(tx store.Tx, dc authn.DeviceCredential, reached *bool) authn.Revocations {
	return authn.RevocationFunc(func(operatorDID, revocationID string) (bool, error) {
		did, root, err := credentialOperator(dc)
		if err != nil {
			return false, err
		}
		_, pinned, err := checkPin(tx, did, root)
		if err != nil {
			return false, err
		}
		*reached = true
		if !pinned {
			_, found, err := lookupRevocation(tx, operatorDID, revocationID, nil)
			return found, err
		}
		_, found, err := revocationByRoot(tx, root, revocationID)
		return found, err
	})
}

// revocations is the revocation list as the pure checks of authn and binding read it: the
// store's, inside the transaction that acts on the answer, keyed by root key. A pair
// (operator DID, revocation_id) is revoked when a revocation of that id is recorded under
// either spelling of the DID's pinned root key and was signed by that key. A DID whose
// body is not pinned has no credential that logged in, and is looked up as written.
func revocations(tx store.Tx) authn.Revocations {
	return authn.RevocationFunc(func(operatorDID, revocationID string) (bool, error) {
		_, found, err := revocationOf(tx, operatorDID, revocationID)
		return found, err
	})
}

// revocationOf finds the revocation of (operatorDID, revocationID) as [revocations] does.
func revocationOf(tx store.Tx, operatorDID, revocationID string) (store.Revocation, bool, error) {
	did, err := didkey.Parse(operatorDID)
	if err != nil || !did.IsOperator() {
		return lookupRevocation(tx, operatorDID, revocationID, nil)
	}
	pin, err := tx.OperatorPin(did.Body())
	if errors.Is(err, store.ErrNotFound) {
		return lookupRevocation(tx, operatorDID, revocationID, nil)
	}
	if err != nil {
		return store.Revocation{}, false, err
	}
	return revocationByRoot(tx, pin.RootKey, revocationID)
}

// revocationByRoot finds a revocation of revocationID signed by root under either spelling of
// its operator DID.
func revocationByRoot(tx store.Tx, root didkey.PublicKey, revocationID string) (store.Revocation, bool, error) {
	for _, spelling := range operatorSpellings(root) {
		r, found, err := lookupRevocation(tx, spelling, revocationID, &root)
		if found || err != nil {
			return r, found, err
		}
	}
	return store.Revocation{}, false, nil
}

// lookupRevocation reads one revocation record; with root, only one signed by that key
// counts.
func lookupRevocation(tx store.Tx, operatorDID, revocationID string, root *didkey.PublicKey) (store.Revocation, bool, error) {
	r, err := tx.Revocation(operatorDID, revocationID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Revocation{}, false, nil
	}
	if err != nil {
		return store.Revocation{}, false, err
	}
	if root != nil {
		if k, err := didkey.DecodeKey(r.RootPublicKey); err != nil || k != *root {
			return store.Revocation{}, false, nil
		}
	}
	return r, true, nil
}

// operatorSpellings returns the operator DIDs of a root key that carry a body: the short
// and the 10-hex form.
func operatorSpellings(root didkey.PublicKey) []string {
	var out []string
	for _, f := range []didkey.Form{didkey.FormShort, didkey.FormFallback} {
		if d, err := didkey.OperatorDID(root, f); err == nil {
			out = append(out, d.String())
		}
	}
	return out
}

// pinCredential pins the operator of a credential that passed the credential checks, as
// [pinOperator].
func pinCredential(tx store.Tx, dc authn.DeviceCredential, now time.Time, loggedIn bool) error {
	did, root, err := credentialOperator(dc)
	if err != nil {
		return err
	}
	_, err = pinOperator(tx, did, root, now, loggedIn)
	return err
}

// failedAfterPin reports whether a login error comes from a step after the pin was checked
// (the challenge or the login signature): such a login passed the root signature, so its
// operator DID is pinned although it failed.
func failedAfterPin(err error) bool {
	c := proto.CodeOf(err)
	return c == proto.BadChallenge || c == proto.BadSignature
}

// pinFailedLogin pins the operator of a login that passed the pin check and then failed.
func (s *Service) pinFailedLogin(ctx context.Context, dc authn.DeviceCredential, now time.Time) error {
	return s.store.Update(ctx, func(tx store.Tx) error { return pinCredential(tx, dc, now, false) })
}

// pinnedSpellings returns the operator DIDs of root whose bodies are pinned to it: those
// under which it may hold sessions and bindings.
func pinnedSpellings(tx store.Tx, root didkey.PublicKey) ([]string, error) {
	var out []string
	for _, spelling := range operatorSpellings(root) {
		did, err := didkey.Parse(spelling)
		if err != nil {
			return nil, err
		}
		pin, err := tx.OperatorPin(did.Body())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if pin.RootKey == root {
			out = append(out, spelling)
		}
	}
	return out, nil
}
