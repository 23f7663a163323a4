package binding

import "time"

// Every bound the binding rules apply, with the reason it has the value it has. Bounds that a
// daemon flag may change are marked; the registry passes their configured value in.
const (
	// MaxSessionTTL bounds expires_at − created_at (description 2.3 and 8): a session is a
	// short ceremony with a human in the loop, and an open code is a guessing target for as
	// long as it lives.
	MaxSessionTTL = 600 * time.Second

	// MaxPostDating is how far created_at may lie ahead of the registry's clock (docs/protocol.md
	// §5.4). It matches the node poll tolerance (description 8), so a node whose clock is as far
	// off as a poll may be can still open a session, while a code issued now lives at most
	// MaxPostDating + MaxSessionTTL (15 minutes).
	MaxPostDating = 300 * time.Second

	// AuthorizationSkew is the clock skew allowed around an AuthorizationCredential's own
	// validity window (docs/protocol.md §7, AUTHZ_EXPIRED); it is the DeviceCredential's skew
	// (description 5.2), since both are signed on the operator's device.
	AuthorizationSkew = 5 * time.Second

	// MaxOpenSessionsPerNode is the number of non-terminal sessions one node key may hold
	// (docs/protocol.md §8); the next initiate is RATE_LIMITED. It keeps one key from filling the
	// store and the code space. The registry enforces it, as only the store can count.
	MaxOpenSessionsPerNode = 16

	// MinTerminalRetention is how long a terminal session stays readable (docs/protocol.md §6), so
	// a node or operator polling status after the fact still learns the outcome. Its id stays
	// reserved forever, whatever the registry removes.
	MinTerminalRetention = 24 * time.Hour
)

// Field limits (docs/protocol.md §8). They bound what the registry stores and signs per session;
// with the 64 KiB body limit they keep every check linear in a small input.
const (
	// MaxSessionIDLen bounds binding_session_id, which also names paths
	// (/v1/bindings/{id}/...): hence its URL-safe alphabet [A-Za-z0-9._-].
	MaxSessionIDLen = 128
	// MaxTextLen bounds device_summary, os, region, nonce and revocation_id, in bytes.
	MaxTextLen = 256
	// MaxListItems bounds requested_task_types and task_types.
	MaxListItems = 64
	// MaxListItemLen bounds each task type, in bytes.
	MaxListItemLen = 64
)

// Short codes and binding tokens (docs/protocol.md §1).
const (
	// ShortCodeAlphabet is authoritative: 31 symbols, without 0, 1, I, O and also L, so a
	// code read aloud or copied by hand has no look-alikes.
	ShortCodeAlphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
	// ShortCodeLength gives 31^8 ≈ 8.5·10^11 codes: with at most 5 guesses per code and 30
	// per address per 10-minute window, guessing a live code is hopeless in a session's life.
	ShortCodeLength = 8
	// BindingTokenBytes is the token's entropy, 128 bits (compat): tokens are pasted, not
	// typed, so they can be long enough that counting guesses is only a second line.
	BindingTokenBytes = 16

	// codeRejectFrom is the first random byte value that is thrown away: 248 = 8·31 is the
	// largest multiple of 31 that fits in a byte, so b % 31 is uniform over the bytes kept.
	codeRejectFrom = 8 * len(ShortCodeAlphabet)
	// maxCodeReads bounds the draws for one code. A working source needs one read of
	// codeReadSize bytes with probability above 0.999999; a source stuck on rejected bytes
	// gets an error instead of a loop.
	maxCodeReads = 64
	codeReadSize = 16
)

// Resolve failure counting (description 4.4 and 8, docs/protocol.md §5.4).
const (
	// ResolveFailureLimit failed resolves of one code or token within ResolveWindow block the
	// next attempt (the 6th) with RATE_LIMITED, valid code or not.
	ResolveFailureLimit = 5
	// ResolveWindow is the counting window, from the first failure; a success clears the
	// counter.
	ResolveWindow = 600 * time.Second
	// ResolveNodeFailureLimit failed resolves naming one node key within ResolveWindow make
	// the next resolves naming it RATE_LIMITED, but only from the client addresses that
	// themselves failed on it (docs/protocol.md §10.9): strangers spending it cannot lock out
	// the operator who holds the node's code.
	ResolveNodeFailureLimit = 5
	// DefaultAddressResolveLimit is the default number of failed resolves per client address
	// and window (a daemon flag), so that guessing many different codes is throttled too.
	DefaultAddressResolveLimit = 30
)

// PermissionBind is the DeviceCredential permission that binding requires (docs/protocol.md §4.2).
const PermissionBind = "nodes.bind"
