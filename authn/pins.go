package authn

import (
	"github.com/svrp/svrp/didkey"
)

// Pins is the registry's pinning of operator DIDs to root keys (docs/protocol.md §10.8) as the
// credential checks ask it. An operator DID body is a few hex characters of a hash of the root
// key, so another root key with the same body can be found by brute force; the registry
// therefore pins each body to the root key of the first login under it, and a credential
// naming that body with another root key is refused with DID_COLLISION.
//
// [VerifyCredential] (and with it [VerifyLogin] and authorize) asks it right after the root
// signature verified and before the credential's window: a forged credential is still
// DC_BAD_SIGNATURE and learns nothing of the pins, and an expired credential naming a pinned
// DID with another root key is DID_COLLISION, not DC_EXPIRED.
//
// Asking records nothing: pinning is the caller's business. The registry passes a lookup in
// its store, inside the transaction that acts on the answer.
type Pins interface {
	// CheckPin returns [ErrDIDCollision] when the body of operator is pinned to a root key
	// other than root, and nil when it is pinned to root or to nothing. Any other error is
	// the pins' own failure, which the checks pass through unchanged.
	CheckPin(operator didkey.DID, root didkey.PublicKey) error
}

// checkPin asks pins about (operator, root); a nil pins pins nothing.
func checkPin(pins Pins, operator didkey.DID, root didkey.PublicKey) error {
	if pins == nil {
		return nil
	}
	return pins.CheckPin(operator, root)
}

// PinFunc adapts a function to [Pins].
type PinFunc func(operator didkey.DID, root didkey.PublicKey) error

// CheckPin implements [Pins].
func (f PinFunc) CheckPin(operator didkey.DID, root didkey.PublicKey) error { return f(operator, root) }

// PinSet is a fixed set of pins, the root key of each pinned DID body: the pins a caller read
// before the checks, or holds in memory.
type PinSet map[string]didkey.PublicKey

// CheckPin implements [Pins].
func (s PinSet) CheckPin(operator didkey.DID, root didkey.PublicKey) error {
	if k, ok := s[operator.Body()]; ok && k != root {
		return ErrDIDCollision
	}
	return nil
}
