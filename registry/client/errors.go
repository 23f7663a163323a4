package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
)

// Sentinels for errors.Is.
var (
	// ErrTransport matches every [*TransportError].
	ErrTransport = errors.New("svrp client: transport error")
	// ErrNotYetWired matches every [*NotYetWiredError].
	ErrNotYetWired = errors.New("svrp client: not yet wired")
)

// Error is an error answer of the registry: its HTTP status and the {code, error} body.
// Branch on the code (the contract), never on Message (text that may change).
type Error struct {
	// Status is the HTTP status, for example 401.
	Status int
	// ErrorCode is the protocol code of the body, for example proto.NoSession. It is empty
	// when the answer carried no svrp error body (a proxy's 502 page, say).
	ErrorCode proto.Code
	// Message is the body's human text.
	Message string
	// RetryAfter is what the answer's Retry-After header asked a client to wait before
	// trying again (a 503 STORE_UNAVAILABLE sends it), 0 when it sent none in seconds.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.ErrorCode == "" {
		return fmt.Sprintf("svrp: HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return fmt.Sprintf("svrp: %s (HTTP %d): %s", e.ErrorCode, e.Status, e.Message)
}

// Code returns the protocol code, for example "NO_SESSION".
func (e *Error) Code() string { return string(e.ErrorCode) }

// Is reports whether target is an *Error with the same code and, when target sets one, the
// same status, so that errors.Is(err, &client.Error{ErrorCode: proto.NoSession}) works.
//
// An answer carries a code, not the identity of the error the registry made, so it matches
// no package's sentinel: errors.Is(err, authn.ErrNoSession) is false for an answer while
// CodeOf(err) == proto.NoSession holds. Naming one sentinel per code would claim what the
// answer does not say, since several share a code (BAD_REQUEST is binding's, authn's and
// canonical's).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.ErrorCode == e.ErrorCode && (t.Status == 0 || t.Status == e.Status)
}

// Temporary reports whether the protocol lets a client try again: HTTP 429 and 5xx.
func (e *Error) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// TransportError is a request that got no HTTP answer: DNS, TLS, a time-out, a refused or
// broken connection, or a response that could not be read. Its code is TRANSPORT_ERROR.
type TransportError struct {
	// Method and Path name the request, for example "POST /api/v1/register".
	Method, Path string
	// Err is the underlying failure.
	Err error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("svrp client: %s %s: %s: %v", e.Method, e.Path, proto.TransportError, e.Err)
}

// Code returns "TRANSPORT_ERROR".
func (e *TransportError) Code() string { return string(proto.TransportError) }

// Unwrap returns the underlying failure, so errors.Is(err, context.DeadlineExceeded) works.
func (e *TransportError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrTransport) true.
func (e *TransportError) Is(target error) bool { return target == ErrTransport }

// Capability levels of a NOT_YET_WIRED refusal (description section 1).
const (
	LevelNotYetWired = "not_yet_wired"
	LevelTesting     = "testing"
	LevelPlanned     = "planned"
)

// SourceLedger is the credits source under which amounts are measurements.
const SourceLedger = "ledger"

// NotYetWiredError refuses to read a credits view as a balance while no ledger stands behind
// it: every amount is then a placeholder, and a zero means nothing is counting. The raw
// envelope is offered instead, with its disclaimer and source.
type NotYetWiredError struct {
	// Level is LevelNotYetWired, LevelTesting or LevelPlanned.
	Level string
	// Envelope is the credits view as the registry sent it.
	Envelope api.Credits
}

func (e *NotYetWiredError) Error() string {
	return fmt.Sprintf("svrp client: %s: credits source is %q, not %q: amounts are placeholders, not a balance (level %s)",
		proto.NotYetWired, e.Envelope.Source, SourceLedger, e.Level)
}

// Code returns "NOT_YET_WIRED".
func (e *NotYetWiredError) Code() string { return string(proto.NotYetWired) }

// Is makes errors.Is(err, ErrNotYetWired) true.
func (e *NotYetWiredError) Is(target error) bool { return target == ErrNotYetWired }

// levelOf maps a credits source to the level of its refusal. A source the client does not
// know is treated as not wired: only "ledger" is ever read as a balance.
func levelOf(source string) string {
	switch source {
	case LevelTesting, LevelPlanned:
		return source
	}
	return LevelNotYetWired
}

// SessionEndedError reports that a binding session reached a terminal state while a caller
// was waiting for it to move on (for example EXPIRED, REJECTED_BY_OPERATOR or CANCELLED).
type SessionEndedError struct {
	BindingSessionID string
	State            string
}

func (e *SessionEndedError) Error() string {
	return fmt.Sprintf("svrp client: binding session %s ended in state %s", e.BindingSessionID, e.State)
}

// Code returns "BAD_STATE": nothing more can happen in the session.
func (e *SessionEndedError) Code() string { return string(proto.BadState) }

// CodeOf returns the protocol code err carries (through any wrapping), or "" when it carries
// none.
func CodeOf(err error) proto.Code {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return proto.Code(c.Code())
	}
	return ""
}

// localError is a refusal the client makes before sending anything, with the code the
// registry would have answered, so callers branch on one set of codes.
func localError(code proto.Code, msg string) error { return proto.New(code, "svrp client: "+msg) }
