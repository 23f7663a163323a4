package store

import (
	"time"

	"github.com/svrp/svrp/didkey"
)

// OperatorPin is the root key an operator DID body is pinned to (docs/protocol.md §10.8): the
// first root key the registry accepted under that body, for good. A short DID body is 8 hex
// characters of a hash, so another root key with the same body can be found by brute force;
// the pin is what makes the body name one key.
//
// Pins are never deleted. The registry writes a pin when it first accepts a root key under a
// body, and writes it again only to record that the root key logged in or to count the
// revocations it holds; the root key of a stored pin never changes.
type OperatorPin struct {
	// Body is the DID body pinned: 8 or 10 lowercase hex characters.
	Body     string           `json:"body"`
	RootKey  didkey.PublicKey `json:"root_key"`
	PinnedAt time.Time        `json:"pinned_at"`
	// LoggedInAt is when a credential of the root key first logged in under this body;
	// zero when none has.
	LoggedInAt time.Time `json:"logged_in_at,omitempty"`
	// Revocations is the number of revocations the root key recorded under this body.
	Revocations int `json:"revocations,omitempty"`
}

// LoggedIn reports whether a credential of the pinned root key has logged in under the body.
func (p OperatorPin) LoggedIn() bool { return !p.LoggedInAt.IsZero() }
