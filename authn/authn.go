// Package authn holds the rules of operator login and of signed node requests.
package authn

import (
	"io"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/proto"
)

var errUnimplemented = proto.New(proto.Internal, "authn: not implemented")

// Device is what a verified DeviceCredential proves: this device key may act for this operator.
type Device struct {
	OperatorDID didkey.DID
	RootKey     didkey.PublicKey
	Credential  DeviceCredential
}

// HasPermission reports whether the credential grants p.
func (d Device) HasPermission(p string) bool { return false }

// Login is the body of POST /v1/auth/device-login.
type Login struct {
	DeviceCredential DeviceCredential `json:"device_credential"`
	Challenge        string           `json:"challenge"`
	IssuedAt         string           `json:"issued_at"`
	Signature        string           `json:"signature"`
}

// Challenges issues and consumes single-use login challenges.
type Challenges interface {
	Issue(now time.Time) (string, error)
	Consume(challenge string, now time.Time) error
}

// CheckCredentialShape applies login step 1 to a credential's fields.
func CheckCredentialShape(dc DeviceCredential) error { return errUnimplemented }

// VerifyCredential applies login steps 2–4 to a DeviceCredential.
func VerifyCredential(dc DeviceCredential, prefix string, now time.Time) (Device, error) {
	return Device{}, errUnimplemented
}

// VerifyLogin applies login steps 1–6 in order.
func VerifyLogin(l Login, prefix string, now time.Time, ch Challenges) (Device, error) {
	return Device{}, errUnimplemented
}

// NewToken returns a new bearer token and its SHA-256.
func NewToken(rand io.Reader) (string, [32]byte, error) { return "", [32]byte{}, errUnimplemented }

// HashToken returns the SHA-256 under which a token's session is kept.
func HashToken(token string) [32]byte { return [32]byte{} }

// NewSession starts a session for operatorDID at now.
func NewSession(operatorDID string, now time.Time) Session { return Session{} }

// Check reports whether the session is still valid at now.
func (s Session) Check(now time.Time) error { return errUnimplemented }

// ParseBearer extracts the token from an Authorization header.
func ParseBearer(header string) (string, error) { return "", errUnimplemented }

// VerifyNodeRequest checks a signed node request: id-binding, then ts, then the signature.
func VerifyNodeRequest(did string, key didkey.PublicKey, ts int64, now time.Time, prefix string, m canonical.Message, sig string) error {
	return errUnimplemented
}
