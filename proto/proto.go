// Package proto holds the protocol error codes of the svrp wire protocol (docs/protocol.md) and the
// one error type that carries them. Every package of the module returns errors of this type, so a
// caller — the HTTP layer above all — can read the code with [CodeOf] and map it to a status in
// exactly one place, or branch with errors.Is on a package's sentinel.
//
// # Identity and code
//
// An error's identity and its code are two things. errors.Is matches an [Error] as itself: a
// sentinel (a package-level error made by [New]) matches itself and the errors made from it by
// [Error.With], never another error that happens to share its code. BAD_REQUEST alone is the
// answer of a malformed field in canonical, a mismatched one in binding and a broken login in
// authn; a caller that asks errors.Is(err, binding.ErrBadRequest) learns that binding refused,
// while a caller that needs the code — the HTTP table, a client, a metric — asks [CodeOf].
//
// It is public and imports nothing but the standard library, so that a program using only
// registry/client branches on the same [Code] constants the registry sends.
//
// The text of an [Error] is what a client reads in the `error` field of the body, so it names no
// Go package: "no bearer token sent", not "authn: no bearer token sent". Context that only a Go
// caller or a log needs is added by wrapping (fmt.Errorf("loading the session: %w", err)); the
// HTTP layer sends the text of the outermost coded error in the chain, never a wrapper's.
package proto

import (
	"errors"
	"fmt"
)

// Code is a stable protocol error code, as sent in the `code` field of an error body.
type Code string

// Codes of the service description (section 7) and of the protocol's extensions.
const (
	IDBindingFailed   Code = "ID_BINDING_FAILED"
	IDBindingRequired Code = "ID_BINDING_REQUIRED"
	BadSignature      Code = "BAD_SIGNATURE"
	NoSession         Code = "NO_SESSION"
	SessionExpired    Code = "SESSION_EXPIRED"
	BadChallenge      Code = "BAD_CHALLENGE"
	DCIDBinding       Code = "DC_ID_BINDING"
	DCBadSignature    Code = "DC_BAD_SIGNATURE"
	DCExpired         Code = "DC_EXPIRED"
	StaleTS           Code = "STALE_TS"
	NotFound          Code = "NOT_FOUND"
	RateLimited       Code = "RATE_LIMITED"
	SessionExists     Code = "SESSION_EXISTS"
	BadState          Code = "BAD_STATE"
	AlreadyActive     Code = "ALREADY_ACTIVE"
	TTLTooLong        Code = "TTL_TOO_LONG"
	AlreadyExpired    Code = "ALREADY_EXPIRED"

	BadRequest       Code = "BAD_REQUEST"
	PermissionDenied Code = "PERMISSION_DENIED"
	ScopeExceeded    Code = "SCOPE_EXCEEDED"
	UnknownDID       Code = "UNKNOWN_DID"
	MethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	AuthzExpired     Code = "AUTHZ_EXPIRED"
	DIDCollision     Code = "DID_COLLISION"
	DCRevoked        Code = "DC_REVOKED"
	AuthzRevoked     Code = "AUTHZ_REVOKED"
	PayloadTooLarge  Code = "PAYLOAD_TOO_LARGE"
	Internal         Code = "INTERNAL"
	// StoreUnavailable refuses a write while the store cannot safely take one: its disk is
	// below the free-space reserve, or its data directory is gone, replaced or read-only.
	// Reads keep working; the write changed nothing and may be retried later.
	StoreUnavailable Code = "STORE_UNAVAILABLE"

	// Client-side codes (docs/protocol.md §9): raised by the client, never sent by the server.
	NotYetWired    Code = "NOT_YET_WIRED"
	TransportError Code = "TRANSPORT_ERROR"
)

// Error is a failure that maps to one protocol code. Its text is for people and never
// contains a secret; its code is the contract. It may carry a cause, the error that made it,
// and may be a case of a sentinel ([Error.With]), which errors.Is then matches.
type Error struct {
	code  Code
	msg   string
	cause error
	of    *Error // the sentinel this error is a case of, or nil
}

// New returns an error with the given code and human text, with an identity of its own:
// errors.Is matches it only as itself and as what [Error.With] makes from it. Declared as a
// package variable it is a sentinel; made in a function it is a one-off that callers read by
// its code.
func New(code Code, msg string) *Error { return &Error{code: code, msg: msg} }

// Errorf returns an error with the given code and the text fmt.Errorf formats. The operand of
// a %w verb becomes its cause: the text includes the cause's, and errors.Is and errors.As reach
// the cause through [Error.Unwrap], while [CodeOf] still answers this error's code.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	cause := errors.Unwrap(err)
	if _, many := err.(interface{ Unwrap() []error }); many {
		cause = err
	}
	return &Error{code: code, msg: err.Error(), cause: cause}
}

// With returns a case of e: an error with e's code and the text fmt.Errorf formats, which
// errors.Is matches as e (and as every sentinel e is itself a case of). A package returns
// such cases, each saying what exactly was wrong, while its callers branch on its sentinels.
// The operand of a %w verb becomes the cause, as with [Errorf].
func (e *Error) With(format string, args ...any) *Error {
	c := Errorf(e.code, format, args...)
	c.of = e
	return c
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the cause of the error, or nil.
func (e *Error) Unwrap() error { return e.cause }

// Code returns the protocol code, for example "ID_BINDING_FAILED".
func (e *Error) Code() string { return string(e.code) }

// Is reports whether e is a case of target ([Error.With]). errors.Is compares e with target
// itself before it asks, so an error is always itself; no two errors are the same because
// they share a code.
func (e *Error) Is(target error) bool {
	for s := e.of; s != nil; s = s.of {
		if s == target {
			return true
		}
	}
	return false
}

// CodeOf returns the protocol code carried by err, or Internal when err carries none. The code
// is that of the outermost coded error in err's chain: a cause's code never overrides it.
func CodeOf(err error) Code {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return Code(c.Code())
	}
	return Internal
}

// Text returns the text a client may read for err: that of the outermost coded error in err's
// chain, without the context of the wrappers around it, or "" when err carries no code (an
// internal error, whose text is for the log only).
func Text(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		if e, ok := c.(error); ok {
			return e.Error()
		}
	}
	return ""
}
