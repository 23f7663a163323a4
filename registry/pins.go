package registry

import (
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
// accepts under it — a login whose credential passed the root signature (step 3 of §5.2),
// however the login then ends, or a revocation whose signature verified — and a credential
// or revocation naming that body with another root key is DID_COLLISION, decided after the
// root signature: at login before the credential's window and any challenge (authn.Pins
// says where the checks ask), at authorize before the credential's window, at revoke before
// the revocation's bounds. Authorize asks and never pins: its bearer's login pinned already.
//
// Bearer sessions, resolved binding sessions and bindings are keyed by the operator DID
// string, which a pin makes one root key's; revocations are looked up by root key (see
// [revocations]), so one made under either spelling of a root key's DID revokes the
// credentials of both, and none made under another root key ever counts.

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
		return store.OperatorPin{}, true, authn.ErrDIDCollision
	}
	return pin, true, nil
}

// pinOperator pins did's body to root unless it is pinned already (DID_COLLISION when to
// another key), logging the pin with proof, and, when loggedIn, records that the root key
// logged in under it. It writes only what changed, and returns the pin as stored.
func pinOperator(tx store.Tx, did didkey.DID, root didkey.PublicKey, now time.Time, loggedIn bool, proof rootProof) (store.OperatorPin, error) {
	pin, found, err := checkPin(tx, did, root)
	if err != nil {
		return store.OperatorPin{}, err
	}
	changed := !found
	if !found {
		pin.PinnedAt = now
		if err := logPin(tx, did, root, proof); err != nil {
			return store.OperatorPin{}, err
		}
	}
	if loggedIn && !pin.LoggedIn() {
		pin.LoggedInAt, changed = now, true
	}
	if !changed {
		return pin, nil
	}
	return pin, tx.PutOperatorPin(pin)
}

// loginState is the store's state as a login asks it in tx: the pins and the revocation
// list. It remembers the operator DID and root key the pin let pass: that credential passed
// the root signature, so its DID is pinned to that root key however the login ends
// (docs/protocol.md §10.8).
type loginState struct {
	tx     store.Tx
	passed bool
	pinned bool // the DID's body was pinned already (to root)
	did    didkey.DID
	root   didkey.PublicKey
	proof  rootProof // the credential's, for the pin's log entry
}

// CheckPin implements [authn.Pins].
func (p *loginState) CheckPin(did didkey.DID, root didkey.PublicKey) error {
	_, pinned, err := checkPin(p.tx, did, root)
	if err != nil {
		return err
	}
	p.passed, p.pinned, p.did, p.root = true, pinned, did, root
	return nil
}

// Revoked implements [authn.Revocations] as [revocations] does. authn asks it after the pin,
// so the pin read there serves and is not read again.
func (p *loginState) Revoked(operatorDID, revocationID string) (bool, error) {
	var found bool
	var err error
	switch {
	case !p.passed || p.did.String() != operatorDID:
		_, found, err = revocationOf(p.tx, operatorDID, revocationID)
	case p.pinned:
		_, found, err = revocationByRoot(p.tx, p.root, revocationID)
	default:
		_, found, err = lookupRevocation(p.tx, operatorDID, revocationID, nil)
	}
	return found, err
}

// pinsOnFailure reports whether a login that failed with err pins its operator DID: when the
// pin let it pass. authn asks the pins right after the root signature, so every failure after
// that question (DC_EXPIRED, DC_REVOKED, BAD_CHALLENGE, BAD_SIGNATURE) comes from a login
// that passed step 3, and every failure before it (steps 1–3: bad input) pins nothing. Nor
// does a failure of the registry itself (INTERNAL), which changes nothing else.
func (p *loginState) pinsOnFailure(err error) bool {
	return p.passed && proto.CodeOf(err) != proto.Internal
}

// pin pins, in tx, the operator DID that the pin let pass to its root key, as [pinOperator].
func (p *loginState) pin(tx store.Tx, now time.Time) error {
	_, err := pinOperator(tx, p.did, p.root, now, false, p.proof)
	return err
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
