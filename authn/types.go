package authn

import (
	"time"

	"github.com/svrp/svrp/canonical"
)

// DeviceCredential is the wire form of a DeviceCredential (profile 4.2): the fields of
// message 2 and the root key's base58 signature over them.
type DeviceCredential struct {
	canonical.DeviceCredential
	Signature string `json:"signature"`
}

// Session is a bearer session as the registry keeps it: who logged in and until when. The
// token itself is never kept; callers store a Session under [HashToken] of it.
type Session struct {
	OperatorDID string    `json:"operator_did"`
	IssuedAt    time.Time `json:"issued_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}
