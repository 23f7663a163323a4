// Package binding holds the rules of the node-to-operator binding handshake.
package binding

import (
	"io"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/proto"
)

var errUnimplemented = proto.New(proto.Internal, "binding: not implemented")

// Event is something that happens to a binding session.
type Event uint8

// Events. Do not reorder.
const (
	EventInvalid Event = iota
	Resolve
	Authorize
	Accept
	VerifyOK
	VerifyFail
	NodeReject
	OperatorReject
	Cancel
	Expire
)

// Apply applies ev to s at now and returns the new session, or the protocol error.
func Apply(s Session, ev Event, now time.Time) (Session, error) { return s, errUnimplemented }

// ExpireIfDue returns s moved to EXPIRED when it is non-terminal and its expires_at has passed.
func ExpireIfDue(s Session, now time.Time) Session { return s }

// InitiateRequest is the body of POST /v1/bindings/initiate.
type InitiateRequest struct {
	canonical.BindingSession
	NodeSignature string `json:"node_signature"`
}

// ValidateInitiate checks an initiate request in the profile's order.
func ValidateInitiate(req InitiateRequest, prefix string, now time.Time) (didkey.PublicKey, error) {
	return didkey.PublicKey{}, errUnimplemented
}

// NewSession returns the INITIATED session for a validated request.
func NewSession(req InitiateRequest, key didkey.PublicKey, codeHash, tokenHash [32]byte, now time.Time) Session {
	return Session{}
}

// VerifyAuthorization applies the authorize checks from the credential on.
func VerifyAuthorization(s Session, dc authn.DeviceCredential, az AuthorizationCredential, prefix string, now time.Time) error {
	return errUnimplemented
}

// CheckAcceptance checks that an acceptance's fields match the session.
func CheckAcceptance(s Session, acc Acceptance, prefix string, accepted bool) error {
	return errUnimplemented
}

// VerifyChain re-verifies all four signatures of a session with its acceptance.
func VerifyChain(s Session, acc Acceptance, prefix string) error { return errUnimplemented }

// Activate returns the Binding that an accepted, verified session creates.
func Activate(s Session, now time.Time) Binding { return Binding{} }

// NewShortCode draws a short code.
func NewShortCode(rand io.Reader) (string, error) { return "", errUnimplemented }

// NormalizeCode maps a presented code or token to the form that is hashed.
func NormalizeCode(in string) string { return in }

// HashSecret returns the SHA-256 of a normalised code or token.
func HashSecret(s string) [32]byte { return [32]byte{} }

// NewBindingToken draws a binding token.
func NewBindingToken(rand io.Reader) (string, error) { return "", errUnimplemented }

// Blocked reports whether the counter is over limit within window at now.
func (c Counter) Blocked(now time.Time, limit int, window time.Duration) bool { return false }

// Fail records one failure at now.
func (c Counter) Fail(now time.Time, window time.Duration) Counter { return c }
