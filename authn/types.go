package authn

import (
	"time"

	"github.com/svrp/svrp/canonical"
)

// DeviceCredential is the wire form of a DeviceCredential (docs/protocol.md §4.2): the fields of
// message 2 and the root key's base58 signature over them.
type DeviceCredential struct {
	canonical.DeviceCredential
	Signature string `json:"signature"`
}

// BearerSession is a bearer session as the registry keeps it: who logged in and until when. The
// token itself is never kept; callers store a BearerSession under [HashToken] of it.
type BearerSession struct {
	OperatorDID string `json:"operator_did"`
	// RevocationID is the revocation_id of the credential that logged in, so that revoking
	// it ends the session (docs/protocol.md §10.5).
	RevocationID string    `json:"revocation_id,omitempty"`
	IssuedAt     time.Time `json:"issued_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Origin is the client group (an IPv4 address, an IPv6 /64) the login came from, which the
	// registry's quotas count it against at every level of the address hierarchy (package
	// registry/netblock). Records stored by earlier releases hold the IPv4 /24 or IPv6 /48
	// instead, which counts as the narrowest group known; empty for the oldest, which count
	// together. It is stored under its earlier name, address_block.
	Origin string `json:"address_block,omitempty"`
}
