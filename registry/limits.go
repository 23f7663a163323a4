package registry

import "time"

// Every bound the registry applies to what strangers send, with the reason it has the value
// it has. Bounds that a daemon flag may change are Default*; the flag's value arrives in
// [Config]. The protocol's own bounds (docs/protocol.md §8: field lengths, per-code and per-node
// limits) are in package binding and authn; these are the ones a public service adds where the
// protocol is silent.

// Sessions, logins, resolves and client addresses.
//
// A client address is the TCP peer's IP, or, when the peer is a trusted proxy, the address
// the proxy reports (see [Config.TrustedProxies]). IPv4 addresses count one by one; IPv6
// addresses count by their /64, since one IPv6 client commonly holds a whole /64 and could
// otherwise be millions of clients.
const (
	// DefaultInitiateAddressLimit is the number of binding initiates one client address may
	// make per initiateWindow. A node opens a session when its operator binds it, a few times
	// in its life; 120 in ten minutes leaves room for a host running dozens of nodes, while
	// one address can no longer fill the store with sessions of fresh keys (each key may hold
	// 16 open sessions, and keys are free).
	DefaultInitiateAddressLimit = 120
	initiateWindow              = 10 * time.Minute

	// DefaultMaxOpenBindingSessions caps the binding sessions open at once over all keys and
	// addresses; the next initiate is RATE_LIMITED. A session lives at most 15 minutes, so
	// this is far above what honest binding traffic reaches; at about 2 KiB a session it
	// bounds the open sessions' store to some 100 MiB.
	DefaultMaxOpenBindingSessions = 50_000

	// DefaultMaxBearerSessions caps the operator bearer sessions alive at once (each lives an
	// hour); the next login is RATE_LIMITED. A session is a few hundred bytes.
	DefaultMaxBearerSessions = 100_000

	// DefaultLoginFailureAddressLimit is the number of failed logins one client address may
	// make per loginWindow; further attempts from it are RATE_LIMITED until the window ends.
	// An operator who mistypes nothing (logins are signed by a device) fails rarely; a flood
	// of garbage signatures stops after this many.
	DefaultLoginFailureAddressLimit = 30
	// DefaultLoginFailureOperatorLimit is the number of failed logins that may name one
	// operator DID per loginWindow. Beyond it, attempts for that DID are refused only from
	// client addresses that themselves failed within the window: a stranger replaying an
	// operator's (public) DeviceCredential with bad signatures cannot lock that operator out
	// of logging in from a clean address.
	DefaultLoginFailureOperatorLimit = 60
	loginWindow                      = 10 * time.Minute

	// DefaultLoginAddressLimit bounds the login attempts (successful or not) one client
	// address may make per challenge lifetime (authn.ChallengeTTL, 300 s). Every attempt that
	// reaches the challenge check consumes a challenge, and consumed challenges are kept for
	// their lifetime in a set of authn.DefaultMaxUsedChallenges (about a million) entries: so
	// one address holds at most this many entries of it, and filling it takes some 4,000
	// addresses logging in at full rate (30,000 if they fail, which the failure limit stops
	// sooner). 256 logins in five minutes is far more than an operator's devices make.
	DefaultLoginAddressLimit = 256

	// DefaultResolveOperatorLimit is the number of failed resolves one operator DID (all its
	// bearer sessions together) may make per binding.ResolveWindow: the per-address budget
	// alone is no budget for an operator who sends from many addresses.
	DefaultResolveOperatorLimit = 30
	// DefaultResolveGlobalLimit is the number of failed resolves over all clients per
	// binding.ResolveWindow. With 31^8 codes, 5,000 guesses per window find a live code
	// with a chance of about 10^-8 per open session over its 15-minute life; honest
	// operators, who mistype a code now and then, do not come near it.
	DefaultResolveGlobalLimit = 5_000

	// capWarnEvery is how often reaching a global cap is logged: once per interval at warn
	// level, not once per refused request, so a flood cannot flood the log too.
	capWarnEvery = time.Minute

	// maxTrackedClients bounds the client addresses that the in-memory limiters (login
	// failures and attempts) track at once. Beyond it the addresses not yet tracked share one
	// budget, so a sender with more addresses than this gains nothing over one that has
	// exactly this many, and the limiter's memory stays under some 10 MiB.
	maxTrackedClients = 1 << 16
)

// The credential revocation list (docs/protocol.md §10.5). Anyone can make a root key and
// sign revocations for it, so the list is a table a stranger can grow.
const (
	// DefaultMaxRevocations bounds the list. Entries are never dropped, since dropping one
	// would quietly un-revoke a credential: when the list is full, new revocations get
	// RATE_LIMITED and the daemon's operator must raise the bound. A record is a few hundred
	// bytes, so a million is a few hundred MB at most.
	DefaultMaxRevocations = 1_000_000
	// DefaultRevokeAddressLimit is the number of new revocations one client address may
	// record per revokeWindow. An operator revokes a handful of devices on a bad day; this
	// keeps one address from filling the list. Repeats of a recorded revocation do not count.
	DefaultRevokeAddressLimit = 60
	revokeWindow              = time.Hour
	revokeCounterPrefix       = "revoke/"
)
