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
// some 2^32 key generations away. Each body is pinned to the root key of the first login
// under it whose credential passed the root signature (step 3 of §5.2), however the login
// then ends, and a credential or revocation naming that body with another root key is
// DID_COLLISION, decided after the root signature: at login before the credential's window
// and any challenge (authn.Pins says where the checks ask), at authorize before the
// credential's window, at revoke before the revocation's bounds. Authorize asks and never
// pins: its bearer's login pinned already. A revocation pins nothing: it costs no login, and
// a stranger with a colliding root key would otherwise hold a victim's DID before the
// victim's first login here.
//
// Bearer sessions, resolved binding sessions and bindings are keyed by the operator DID
// string, which a pin makes one root key's. Revocations are matched by root key and
// revocation_id (see [revocationByRoot]): one made under either spelling of a root key's DID
// revokes the credentials of both, pinned or not, and none made under another root key ever
// counts.

// checkPin returns the record of did's body as root may write it, and whether the body is
// pinned (to root); DID_COLLISION when it is pinned to another root key. A record that pins
// nothing and names another root key is not root's to count in: root gets a fresh one.
func checkPin(tx store.Tx, did didkey.DID, root didkey.PublicKey) (store.OperatorPin, bool, error) {
	pin, err := tx.OperatorPin(did.Body())
	if errors.Is(err, store.ErrNotFound) {
		return store.OperatorPin{Body: did.Body(), RootKey: root}, false, nil
	}
	if err != nil {
		return store.OperatorPin{}, false, err
	}
	switch {
	case pin.RootKey == root:
		return pin, pin.Pins(), nil
	case pin.Pins():
		return store.OperatorPin{}, true, authn.ErrDIDCollision
	}
	return store.OperatorPin{Body: did.Body(), RootKey: root}, false, nil
}

// pinOperator pins did's body to root for a login that passed the root signature, unless it
// is pinned already (DID_COLLISION when to another key), logging the pin with proof, and, when
// loggedIn, records that the root key logged in under it. It writes only what changed, and
// returns the record as stored.
func pinOperator(tx store.Tx, did didkey.DID, root didkey.PublicKey, now time.Time, loggedIn bool, proof rootProof) (store.OperatorPin, error) {
	pin, pinned, err := checkPin(tx, did, root)
	if err != nil {
		return store.OperatorPin{}, err
	}
	changed := !pinned
	if !pinned {
		pin.PinnedAt, pin.ByLogin = now, true
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
// (docs/protocol.md §10.8), and its revocations are looked up by that root key.
type loginState struct {
	tx     store.Tx
	passed bool
	did    didkey.DID
	root   didkey.PublicKey
	proof  rootProof // the credential's, for the pin's log entry
	// unrevoked is the revocation_id last found unrevoked in tx, so that the login tail's
	// check in the transaction of the checks reads the list once.
	unrevoked string
}

// CheckPin implements [authn.Pins].
func (p *loginState) CheckPin(did didkey.DID, root didkey.PublicKey) error {
	if _, _, err := checkPin(p.tx, did, root); err != nil {
		return err
	}
	p.passed, p.did, p.root = true, did, root
	return nil
}

// Revoked implements [authn.Revocations]: authn asks it after the pin, about the credential
// whose root key the pin saw.
func (p *loginState) Revoked(operatorDID, revocationID string) (bool, error) {
	if !p.passed || p.did.String() != operatorDID {
		_, found, err := lookupRevocation(p.tx, operatorDID, revocationID, nil)
		return found, err
	}
	if p.unrevoked == revocationID && revocationID != "" {
		return false, nil
	}
	_, found, err := revocationByRoot(p.tx, p.root, revocationID)
	if err == nil && !found {
		p.unrevoked = revocationID
	}
	return found, err
}

// passedAs is the state of a login that dev passed, read in tx: what the login tail checks in
// a transaction other than the one of the checks.
func passedAs(tx store.Tx, dev authn.Device, proof rootProof) *loginState {
	return &loginState{tx: tx, passed: true, did: dev.OperatorDID, root: dev.RootKey, proof: proof}
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

// revocations is the revocation list as the checks of one DeviceCredential, and of the
// authorization and binding it made, read it: the store's, inside the transaction that acts
// on the answer. The credential's own operator DID is revoked for a revocation_id when a
// revocation of that id signed by the credential's root key is recorded under either
// spelling of its DID (docs/protocol.md §10.8). A DID other than the credential's, which the
// checks refuse anyway, is looked up as written.
func revocations(tx store.Tx, dc authn.DeviceCredential) authn.Revocations {
	_, root, rootErr := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
	return authn.RevocationFunc(func(operatorDID, revocationID string) (bool, error) {
		var found bool
		var err error
		if rootErr == nil && operatorDID == dc.OperatorDID {
			_, found, err = revocationByRoot(tx, root, revocationID)
		} else {
			_, found, err = lookupRevocation(tx, operatorDID, revocationID, nil)
		}
		return found, err
	})
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
	if root != nil && !revokedBy(r, *root) {
		return store.Revocation{}, false, nil
	}
	return r, true, nil
}

// revokedBy reports whether r was signed by root.
func revokedBy(r store.Revocation, root didkey.PublicKey) bool {
	k, err := didkey.DecodeKey(r.RootPublicKey)
	return err == nil && k == root
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
		if pin.RootKey == root && pin.Pins() {
			out = append(out, spelling)
		}
	}
	return out, nil
}
