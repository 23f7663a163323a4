package store

import (
	"time"

	"github.com/svrp/svrp/didkey"
)

// OperatorPin is the root key an operator DID body is pinned to (docs/protocol.md §10.8): the
// root key of the first login under that body that passed the root signature, for good. A
// short DID body is 8 hex characters of a hash, so another root key with the same body can be
// found by brute force; the pin is what makes the body name one key.
//
// A record pins its body only when a login wrote it ([OperatorPin.Pins]). A revocation writes
// a record too, to count the revocations its root key holds under the body, and that record
// pins nothing: a login under the body by another root key replaces it. Records are never
// deleted, and the root key of a record that pins never changes.
type OperatorPin struct {
	// Body is the DID body pinned: 8 or 10 lowercase hex characters.
	Body     string           `json:"body"`
	RootKey  didkey.PublicKey `json:"root_key"`
	PinnedAt time.Time        `json:"pinned_at"`
	// ByLogin is set when a login that passed the root signature wrote or took over the
	// record, however the login ended.
	ByLogin bool `json:"by_login,omitempty"`
	// LoggedInAt is when a credential of the root key first logged in under this body;
	// zero when none has.
	LoggedInAt time.Time `json:"logged_in_at,omitempty"`
	// Revocations is the number of revocations the root key recorded under this body.
	Revocations int `json:"revocations,omitempty"`
}

// Pins reports whether the record pins its body to RootKey: a login wrote it. A record
// without ByLogin whose root key logged in pins too: a successful login is a login, whenever
// the record was written; one written by a revocation, or by a failed login before logins
// marked their records, pins nothing.
func (p OperatorPin) Pins() bool { return p.ByLogin || p.LoggedIn() }

// LoggedIn reports whether a credential of the pinned root key has logged in under the body.
func (p OperatorPin) LoggedIn() bool { return !p.LoggedInAt.IsZero() }
