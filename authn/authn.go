// Package authn holds the rules that decide who is calling the svrp registry: operators, who
// log in with a device key that their root key vouched for, and nodes, which sign each
// request with their own key (docs/protocol.md §3, §5.2 and §7).
//
// # What it does
//
//   - [VerifyCredential] checks a DeviceCredential: the root key derives the o-tagged operator
//     DID (DC_ID_BINDING), the root key signed message 2 (DC_BAD_SIGNATURE), the DID is not
//     pinned to another root key ([Pins], DID_COLLISION), and the registry's clock lies in
//     the credential's window with 5 s of skew (DC_EXPIRED).
//   - [VerifyLogin] runs the six checks of POST /v1/auth/device-login and the registry's two
//     (the pin, the revocation list) in the protocol's order and stops at the first failure,
//     so the code returned is always that of the earliest failing step. The challenge is
//     consumed at step 5, before the login signature is checked, so a failed attempt burns
//     it.
//   - [VerifyRevocation] checks a credential revocation signed by the root key, and
//     [CheckCredentialRevoked] refuses a credential on a revocation list passed in
//     (DC_REVOKED); [SignRevocation] makes one offline (docs/protocol.md §10.5).
//   - [Challenger] issues single-use login challenges in bounded memory, whatever the request
//     rate (see its documentation for the bound and why it fails closed).
//   - [NewToken], [HashToken], [NewBearerSession], [BearerSession.Check] and [ParseBearer] are the bearer
//     sessions that a successful login opens: one hour, never refreshed.
//   - [NodeChecker] checks a node-signed request: id-binding, then freshness of ts, then the
//     signature, in the order of description section 5.4.
//
// # What it leaves to others
//
// The package is pure logic. What the registry's state decides — the pins of operator DIDs,
// the revocation list, the used challenges — is asked of values the caller passes in
// ([Pins], [Revocations], [Challenges]) at fixed points of the order. It stores nothing
// (sessions are values the caller keeps under [HashToken] of the token; the only state is a
// [Challenger]'s used-set), speaks no HTTP (the JSON shape of a request — fields present, of
// the right JSON type — is the HTTP layer's check), and has no clock or randomness of its
// own: every function that needs the time takes now, and everything that draws random bytes
// takes an io.Reader. Time comparisons truncate now to whole seconds, as the protocol asks.
//
// # Errors
//
// Every error is a *proto.Error whose code is the wire code. Match it with errors.Is against
// the sentinels below (or the didkey and canonical ones), or read it with proto.CodeOf.
// Error texts never contain a token, a seed or a challenge.
package authn

import (
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// Sentinels for errors.Is, one per rejection reason. Errors returned by this package carry
// more detail but match one of these (or a didkey or canonical sentinel where that package's
// code is the answer).
var (
	// ErrDCIDBinding: the credential's root key does not derive its o-tagged operator DID, or
	// it, the DID or the device key does not parse (DC_ID_BINDING).
	ErrDCIDBinding = proto.New(proto.DCIDBinding, "device credential id-binding failed")
	// ErrDCBadSignature: the root key's signature over the credential is malformed or does
	// not verify (DC_BAD_SIGNATURE).
	ErrDCBadSignature = proto.New(proto.DCBadSignature, "device credential signature does not verify")
	// ErrDCExpired: the registry's clock lies outside the credential's validity window, or a
	// credential timestamp is malformed (DC_EXPIRED).
	ErrDCExpired = proto.New(proto.DCExpired, "device credential outside its validity window")
	// ErrDCRevoked: the credential's (operator_did, revocation_id) was revoked by the
	// operator's root key (DC_REVOKED, docs/protocol.md §10.5).
	ErrDCRevoked = proto.New(proto.DCRevoked, "device credential revoked")
	// ErrDIDCollision: the credential's or revocation's operator DID body is pinned to
	// another root key (DID_COLLISION, docs/protocol.md §10.8). Its text is the answer the
	// protocol gives, so it is returned as it is.
	ErrDIDCollision = proto.New(proto.DIDCollision, "this operator DID belongs to another root key; use the 10-hex form")
	// ErrBadChallenge: the login challenge was not issued here, has expired, was already
	// used, or cannot be recorded as used (BAD_CHALLENGE).
	ErrBadChallenge = proto.New(proto.BadChallenge, "challenge unknown, expired or already used")
	// ErrBadSignature: a login or node signature does not verify, or something it signs is
	// malformed (BAD_SIGNATURE).
	ErrBadSignature = proto.New(proto.BadSignature, "signature does not verify")
	// ErrNoSession: no usable bearer token was sent, or the token names no session
	// (NO_SESSION).
	ErrNoSession = proto.New(proto.NoSession, "no session")
	// ErrSessionExpired: the session passed its hour (SESSION_EXPIRED).
	ErrSessionExpired = proto.New(proto.SessionExpired, "session expired")
	// ErrStaleTS: a node's ts is more than NodeTSTolerance from the registry's clock
	// (STALE_TS).
	ErrStaleTS = proto.New(proto.StaleTS, "timestamp too far from registry time")
	// ErrBadRequest: a field breaks the injectivity rules or a field limit (BAD_REQUEST).
	ErrBadRequest = proto.New(proto.BadRequest, "malformed request")
)

// Times fixed by the description and the protocol.
const (
	// ChallengeTTL is how long a login challenge can be used after it is issued
	// (expires_in of POST /v1/auth/challenge).
	ChallengeTTL = 300 * time.Second
	// SessionTTL is the life of a bearer session; sessions are never refreshed.
	SessionTTL = 3600 * time.Second
	// CredentialSkew is the clock skew allowed at both ends of a DeviceCredential's window.
	CredentialSkew = 5 * time.Second
	// NodeTSTolerance is how far a node's ts may lie from the registry's clock.
	NodeTSTolerance = 300 * time.Second
)

// NodesBind is the permission a DeviceCredential needs to authorize a binding. Login needs
// none.
const NodesBind = "nodes.bind"

// Field limits of docs/protocol.md §8 that apply to a DeviceCredential. The body limit of
// 64 KiB already bounds the work; these keep stored credentials small and predictable.
const (
	// MaxIDLen bounds credential_id, device_id and revocation_id, in bytes (at least 1).
	MaxIDLen = 256
	// MaxPermissions bounds the number of permissions.
	MaxPermissions = 64
	// MaxPermissionLen bounds one permission, in bytes (at least 1).
	MaxPermissionLen = 64
)

// Device is what a verified DeviceCredential proves: this device key may act for this
// operator. Values come from [VerifyCredential] and [VerifyLogin] only.
type Device struct {
	OperatorDID didkey.DID
	RootKey     didkey.PublicKey
	Credential  DeviceCredential
}

// HasPermission reports whether the credential grants p.
func (d Device) HasPermission(p string) bool {
	for _, q := range d.Credential.Permissions {
		if q == p {
			return true
		}
	}
	return false
}

// DeviceKey decodes the credential's device_public_key. VerifyCredential has already refused
// a key that does not decode (DC_ID_BINDING, docs/protocol.md §5.2), so the error is for a Device that
// did not come from it.
func (d Device) DeviceKey() (didkey.PublicKey, error) {
	k, err := didkey.DecodeKey(d.Credential.DevicePublicKey)
	if err != nil {
		return didkey.PublicKey{}, ErrDCIDBinding.With("device_public_key is not a 32-byte key: %w", err)
	}
	return k, nil
}

// Login is the body of POST /v1/auth/device-login.
type Login struct {
	DeviceCredential DeviceCredential `json:"device_credential"`
	Challenge        string           `json:"challenge"`
	IssuedAt         string           `json:"issued_at"`
	Signature        string           `json:"signature"`
}

// ChallengeChecker checks a challenge without consuming it, for a caller that records
// consumption itself; [Challenger] implements it.
type ChallengeChecker interface {
	Check(challenge string, now time.Time) (id []byte, expires time.Time, err error)
}

// Challenges issues and consumes single-use login challenges. Implementations are safe for
// concurrent use.
type Challenges interface {
	// Issue returns a new challenge, usable for ChallengeTTL from now. Its error, if any, is
	// the implementation's (an INTERNAL one for a failing random source).
	Issue(now time.Time) (string, error)
	// Consume accepts a challenge that was issued, has not expired and has not been consumed,
	// and marks it consumed in the same atomic step, so that of any number of concurrent
	// calls for one challenge exactly one returns nil. A refusal matches [ErrBadChallenge];
	// any other error (a failing store, say) is passed through by [VerifyLogin] unchanged.
	Consume(challenge string, now time.Time) error
}
