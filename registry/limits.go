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
// the proxy reports in the one header it was said to write (see [Config.TrustedProxies] and
// [Config.ClientAddressHeader]). IPv4 addresses count one by one; IPv6 addresses count by
// their /64, since one IPv6 client commonly holds a whole /64 and could otherwise be millions
// of clients. Every per-address budget also has an aggregate per address block (an IPv4 /24,
// an IPv6 /48; see [AddressBlock]) of DefaultAddressBlockFactor times its limit.
//
// The budget tables, what each counts and whom it can refuse (docs/protocol.md, "Budgets"):
//
//   - login attempts (memory; store counters when challenges are kept in the store): logins
//     per address and per block per challenge lifetime. Refuses that address or block.
//   - login failures (likewise): failed logins per address and per block per loginWindow.
//     Refuses that address or block, for every operator.
//   - login failures per address and operator (likewise): failed logins of one address naming
//     one operator DID. Refuses that address, for that operator only. Nothing counts per
//     DID alone, so no stranger can spend a budget an operator's own logins need.
//   - malformed requests (memory): 400s and 413s per address and per block per
//     malformedWindow. Refuses that address or block, before reading its bodies.
//   - register, initiate, failed resolve and revoke counters (store): per address and per
//     block. Each refuses that address or block for that action only.
//   - failed resolves per code, per operator and over all (store): the guessing bounds of
//     binding codes; per operator refuses that operator's sessions, the global one anyone.
//   - initiates per node key (store): refuses that key.
//
// The memory tables each track at most DefaultMaxTrackedClients keys; what they do when
// full is said there.
const (
	// DefaultAddressBlockFactor is how many addresses' worth of each per-address budget one
	// address block may spend together: with 16, a /24 of 256 addresses gets what 16 get,
	// and so does a /48 of 65,536 /64s, which otherwise would be 65,536 clients. A NAT or a
	// proxy-less campus behind one /24 rarely has 16 clients at a budget's edge at once.
	DefaultAddressBlockFactor = 16

	// DefaultInitiateAddressLimit is the number of binding initiates one client address may
	// make per initiateWindow. A node opens a session when its operator binds it, a few times
	// in its life; 120 in ten minutes leaves room for a host running dozens of nodes, while
	// one address can no longer fill the store with sessions of fresh keys (each key may hold
	// 16 open sessions, and keys are free).
	DefaultInitiateAddressLimit = 120
	initiateWindow              = 10 * time.Minute

	// DefaultInitiateKeyLimit is the number of binding initiates one node key may make per
	// initiateWindow. A node opens a session when an operator binds it, once or a few times;
	// a key that opens and cancels sessions as fast as it can from many addresses (each
	// under its own limit) is doing nothing a node needs, and each initiate costs the
	// registry a verification and a durable write. Both initiate budgets are read before
	// the signature is verified, so an initiate over either costs a counter read.
	DefaultInitiateKeyLimit = 60

	// DefaultMaxOpenBindingSessions caps the binding sessions open at once over all keys and
	// addresses; the next initiate is RATE_LIMITED. A session lives at most 15 minutes, so
	// this is far above what honest binding traffic reaches; at about 2 KiB a session it
	// bounds the open sessions' store to some 100 MiB.
	DefaultMaxOpenBindingSessions = 50_000

	// DefaultMaxBearerSessions caps the operator bearer sessions alive at once (each lives an
	// hour); the next login is RATE_LIMITED. A session is a few hundred bytes.
	//
	// Both session caps are counted in memory, checked before the write at no cost of a
	// query, and counted again from the store at every sweep interval (Sweep, or Recount on
	// the daemons another is sweeping for). On a store shared by N daemons each sees the
	// others' new and ended sessions at its next count, so the caps may be exceeded by what
	// the other N−1 daemons add within one sweep interval (and by the few writes in flight
	// while a count reads), not multiplied by N.
	DefaultMaxBearerSessions = 100_000

	// DefaultLoginFailureAddressLimit is the number of failed logins one client address may
	// make per loginWindow; further attempts from it are RATE_LIMITED until the window ends.
	// An operator who mistypes nothing (logins are signed by a device) fails rarely; a flood
	// of garbage signatures stops after this many.
	DefaultLoginFailureAddressLimit = 30
	// DefaultLoginFailureOperatorLimit is the number of failed logins one client address may
	// make naming one operator DID per loginWindow; beyond it that address's logins for that
	// DID are RATE_LIMITED, and nobody else's. Failures are never counted per DID alone: a
	// DID is public, so a count any stranger can add to would let strangers lock its
	// operator out (an operator who failed once, on a spent challenge, was refused after 60
	// strangers' failures). It refuses only the address that failed; the per-address budget
	// above bounds how many DIDs one address may fail on.
	DefaultLoginFailureOperatorLimit = 10
	loginWindow                      = 10 * time.Minute

	// DefaultMalformedAddressLimit is the number of malformed requests — answered 400
	// BAD_REQUEST or 413 PAYLOAD_TOO_LARGE — one client address may send per
	// malformedWindow. Beyond it every request from that address is RATE_LIMITED before its
	// body is read, and its connection is closed, until the window ends. A client that
	// follows the protocol sends none, but a 64 KiB body of one long string costs the
	// registry half a millisecond of a core to read, decode and refuse: one address
	// sending them back to back would otherwise take the cores honest clients need. It is a
	// guard of each daemon's own CPU, so each daemon counts in memory what reaches it.
	DefaultMalformedAddressLimit = 60
	malformedWindow              = time.Minute

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

	// DefaultMaxTrackedClients bounds the keys each in-memory budget table (login attempts,
	// login failures per address and per address and DID, malformed requests) tracks at
	// once, so a table's memory stays under some 10 MiB however many keys strangers use. A
	// key the table does not track counts as fresh: it is never charged with another key's
	// events. When the table is full, a new key makes room by forgetting the least useful
	// entry among the least recently used: one whose window ended, else the one with the
	// fewest events. So a sender with more addresses than the table holds forgets its own
	// counts first (and gains a fresh budget per address it cycles through, which the
	// per-block budgets bound), while the entry of an address that keeps being refused stays.
	DefaultMaxTrackedClients = 1 << 16
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

// Node records, their listings and replays (docs/protocol.md §8 and §10.1–10.3).
//
// Registering is free and signatures are public, so a stranger can grow the node table, make
// its records as large as the field limits allow, ask for its listings as often and in as
// many spellings as it likes, and send back what others signed.
const (
	// maxSignatureBytes caps the registration signature stored as given in grace mode
	// (docs/protocol.md §8). A base58 Ed25519 signature is 86–88 characters, so every wrong-length
	// signature grace mode speaks of still fits; without a cap one GET /nodes carried
	// whatever 64 KiB strings strangers registered, once per node.
	maxSignatureBytes = 256

	// DefaultMaxNodes is the default of the global node cap (--max-nodes): new keys beyond it
	// get 429 RATE_LIMITED. Registering is free and the per-address limit only slows one
	// address, so without a global cap enough addresses grow the table, its memory and every
	// listing without end. A million records take about 1 GB with their listing.
	DefaultMaxNodes = 1_000_000

	// maxListingBytes bounds the memory that encoded listings hold at once: the current
	// snapshot, and older ones that slow readers are still being sent. A new snapshot is
	// built only when the ones still held leave room for it; otherwise readers get the
	// newest one already built, at most as stale as those readers are slow (the write
	// timeout bounds that). One snapshot is always allowed, however large: with a million
	// nodes it is about 450 MB, and refusing to list would be worse than holding it.
	maxListingBytes = 512 << 20

	// heartbeatMarkTTL is how long the registry remembers a key's last heartbeat ts (docs/protocol.md
	// §10.3): beyond the ts tolerance, any older ts is refused as STALE_TS anyway, so the mark
	// can go and the table holds only the keys that sent a heartbeat in the last ten minutes.
	heartbeatMarkTTL = 600 * time.Second

	// listingSlotCount listings are written at once; other readers wait their turn. Writing
	// a large listing is mostly copying, and sixteen greedy readers copying at once on a
	// two-core machine starved every other request (an honest login's p50 went from 1 ms to
	// about 50 ms); queued, they cost the others far less (5–15 ms) and lose no throughput.
	listingSlotCount = 2

	// listingSlotHold is the longest one listing holds its turn. A reader that has not taken
	// its listing by then keeps receiving it without a turn, so slow readers cannot keep
	// everyone else's listings waiting for the write timeout.
	listingSlotHold = time.Second

	// listingWriteBuffer is what a filtered listing copies its records through: a filter
	// costs this much per reader, not a copy of the listing.
	listingWriteBuffer = 32 << 10
)
