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
	// DefaultLoginFailureOperatorLimit is the number of failed logins that may name one
	// operator DID per loginWindow. Beyond it, attempts for that DID are refused only from
	// client addresses that themselves failed within the window: a stranger replaying an
	// operator's (public) DeviceCredential with bad signatures cannot lock that operator out
	// of logging in from a clean address.
	DefaultLoginFailureOperatorLimit = 60
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

// Pages of the node listings (docs/protocol.md §5.1).
const (
	// maxListingPage is the largest limit a listing answers; a larger one is BAD_REQUEST.
	// A page is built whole to be tagged and compressed, and a client that pages does so to
	// take the table in parts: 10,000 records is about 5 MB, a part a phone takes in one
	// answer, and a watcher of a busy network collects a minute of changes in a page or two.
	maxListingPage = 10_000

	// maxCursorKey bounds the tie-breaking key a cursor carries: a node key is 32 bytes,
	// and a bound node's DID at most 256. A longer cursor is none the registry gave.
	maxCursorKey = 512

	// maxListingVariants is how many distinct answers (filter, page and kind) a listing
	// snapshot keeps the entity tag and gzip form of. The popular answers — the whole
	// table, the pages watchers follow — are asked for many times per snapshot and computed
	// once; a stranger spelling ever new filters gets each computed for itself (the cost of
	// answering it, no more) and cannot grow the snapshot beyond this many.
	maxListingVariants = 256
)

// The network view (GET /v1/network/stats, network.go).
const (
	// networkStatsMaxAge is how old the answer may grow before a request rebuilds it, in one
	// pass over the node table. Every other request reads the answer as built, so a client
	// polling as fast as it can costs what reading a few kilobytes costs, whatever the
	// network's size; the page polls every few seconds, and counts this stale are fresh
	// enough for a picture of the network.
	networkStatsMaxAge = 5 * time.Second

	// networkStatsGroups is how many regions and capabilities a breakdown names; the rest
	// are counted together. Both are strings strangers choose, as many as they like: without
	// a bound one answer would carry them all.
	networkStatsGroups = 20

	// networkHistorySpan is how long the sweep keeps a step of the history: the span of the
	// longest series (a week). Older steps are no longer shown, and the ring reuses their
	// keys anyway, so the history takes a fixed number of counters in the store.
	networkHistorySpan = 7 * 24 * time.Hour
)
