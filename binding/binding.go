// Package binding holds the rules of the node-to-operator binding handshake (description
// 2.3–2.5, 3.1 and 4.4; docs/protocol.md §5.4, §6 and §8): the session state machine, the checks
// each binding endpoint makes and their order, the re-verification of the four-signature chain,
// short codes and binding tokens, and the resolve failure counters.
//
// # What it does not do
//
// It keeps nothing and talks to nothing: no storage, no HTTP, no clock and no randomness of
// its own, and no package state that changes. The registry reads the clock once per request,
// loads a session in a store transaction, calls this package with that time (and a random
// source where one is needed), and stores what comes back. Times are compared as the protocol
// says (section 1): the given now in UTC, truncated to whole seconds. Every function is total:
// any input gives a result or an error, never a panic.
//
// The checks that need the store — a binding_session_id used before (SESSION_EXISTS), the
// [MaxOpenSessionsPerNode] limit, finding a session by the hash of a code, the bearer session
// and that its operator resolved the session — and the JSON shape of request bodies belong to
// the registry.
//
// # Sessions are values
//
// A [BindingSession] is a value and [Apply] is a pure transition: it returns a new session and never
// changes its input, so a caller that gets an error still holds the session it had. The
// transitions are data, one table ([Transitions] lists it); Apply adds only expiry, which
// comes first, and the error codes.
//
// # The handshake
//
// Each step keeps three phases apart: shape (injectivity, field limits, timestamp form; all
// BAD_REQUEST), verification against the stored session, then the transition.
//
//	initiate   ValidateInitiate (CheckInitiate, then VerifyInitiateSignature), NewShortCode,
//	           NewBindingToken, HashSecret, NewBindingSession                                 → INITIATED
//	resolve    NormalizePresented, HashSecret, Apply(Resolve)                                 → PENDING_OPERATOR
//	authorize  CheckAuthorizationShape, VerifyAuthorization, Apply(Authorize)                 → PENDING_NODE_ACCEPTANCE
//	accept     CheckAcceptanceShape, CheckAcceptance, Apply(Accept), VerifyChain,
//	           Apply(VerifyOK) and Activate, or Apply(VerifyFail)                             → ACTIVE
//	reject     CheckAcceptanceShape, CheckAcceptance, VerifyAcceptanceSignature,
//	           Apply(NodeReject)                                                              → REJECTED_BY_NODE
//
// Operator reject and cancel are Apply(OperatorReject) and Apply(Cancel) once the registry has
// checked the caller. Leaving (docs/protocol.md §10.5, §10.6) does not move a state: [Unbind] marks
// an ACTIVE session's binding ended, [Supersede] marks the one a newer activation replaces,
// [CheckRevoked] refuses revoked credentials at authorize and accept, and [BindingRevoked]
// finds the bindings a revocation ends. [RepairAtStart] returns a session left VERIFYING by a stopped process to
// PENDING_NODE_ACCEPTANCE.
//
// # Errors
//
// Every error carries a protocol code (package proto) and matches one of the sentinels below
// under errors.Is; errors of packages this one calls (didkey's ID_BINDING_*, authn's DC_*)
// pass through with their own codes. Expiry is a state, not an error: an event on an expired
// session is BAD_STATE. Error texts name fields and links, never a short code or a token.
package binding

import "github.com/svrp/svrp/proto"

// Sentinels for errors.Is. Errors of this package carry more detail, each a case of one of
// these ([proto.Error.With]), so errors.Is matches it; a sentinel of another package with the
// same code does not.
var (
	// ErrBadState: the event does not fit the session's state, often because it is terminal
	// or expired (409).
	ErrBadState = proto.New(proto.BadState, "the operation does not fit the session's state")
	// ErrAlreadyActive: the binding is already active; success arriving twice (409).
	ErrAlreadyActive = proto.New(proto.AlreadyActive, "the binding is already active")
	// ErrTTLTooLong: expires_at − created_at is not in (0, 600] seconds (400).
	ErrTTLTooLong = proto.New(proto.TTLTooLong, "the session window must be more than 0 and at most 600 seconds")
	// ErrAlreadyExpired: expires_at is not after the registry's clock (400).
	ErrAlreadyExpired = proto.New(proto.AlreadyExpired, "the session has already expired")
	// ErrBadRequest: a field is malformed, over its limit, or does not match the session (400).
	ErrBadRequest = proto.New(proto.BadRequest, "malformed or mismatched field")
	// ErrBadSignature: a signature of the chain does not verify (401).
	ErrBadSignature = proto.New(proto.BadSignature, "signature does not verify")
	// ErrPermissionDenied: the credential is not the resolving operator's, or lacks
	// nodes.bind (403).
	ErrPermissionDenied = proto.New(proto.PermissionDenied, "permission denied")
	// ErrScopeExceeded: the authorization grants more than the node requested (403).
	ErrScopeExceeded = proto.New(proto.ScopeExceeded, "the authorization exceeds the request")
	// ErrAuthzRevoked: the authorization's (operator_did, revocation_id) is revoked (401,
	// docs/protocol.md §10.5).
	ErrAuthzRevoked = proto.New(proto.AuthzRevoked, "the authorization is revoked")
	// ErrAuthzExpired: the authorization is outside its own validity window (401).
	ErrAuthzExpired = proto.New(proto.AuthzExpired, "the authorization is outside its validity window")
	// ErrRateLimited: too many failed resolves, or too many open sessions for one node (429).
	// This package only counts; the registry returns it.
	ErrRateLimited = proto.New(proto.RateLimited, "too many attempts")
	// ErrSessionExists: the binding_session_id was used before (409). Only the store can
	// tell; the registry returns it.
	ErrSessionExists = proto.New(proto.SessionExists, "this binding_session_id was already used")
)

func badRequest(msg string) error { return ErrBadRequest.With("%s", msg) }
