// Package limits declares every bound the registry applies to what strangers send, with the
// reason it has the value it has and who it can refuse. The bounds an operator may change are
// the fields of [Limits], each declared once in [Bounds] (bounds.go) with its flag of svrpd
// serve, its default and the refusals it makes; the others are the constants below. The
// protocol's own bounds (docs/protocol.md §8: field lengths, per-code and per-node limits) are
// in package binding and authn; these are the ones a public service adds where the protocol
// is silent.
//
// It decides values only. It does not count, refuse or remember anything: package registry
// applies each bound where its declaration says, with the tables of package registry/budget
// and registry/admission, and package registry/httpapi names the refusals.
package limits

import (
	"time"

	"github.com/svrp/svrp/registry/admission"
	"github.com/svrp/svrp/registry/netblock"
)

// A client address is the TCP peer's IP, or, when the peer is a trusted proxy, the address
// the proxy reports in the one header it was said to write (see WithClientAddress in package
// registry/httpapi). IPv4 addresses count one by one; IPv6 addresses count by
// their /64, since one IPv6 client commonly holds a whole /64 and could otherwise be millions
// of clients. Every per-address budget also has an aggregate per address block (an IPv4 /24,
// an IPv6 /48; see package registry/netblock) of [Limits.AddressBlockFactor] times its limit.
//
// The budget tables, what each counts and whom it can refuse (docs/protocol.md, "Budgets"):
//
//   - login attempts (memory; store counters when challenges are kept in the store): logins
//     per address and per block per challenge lifetime. Refuses that address or block.
//   - login failures (likewise): failed logins per address and per block per LoginWindow.
//     Refuses that address or block, for every operator.
//   - login failures per address and operator (likewise): failed logins of one address naming
//     one operator DID. Refuses that address, for that operator only. Nothing counts per
//     DID alone, so no stranger can spend a budget an operator's own logins need.
//   - malformed requests (memory): 400s and 413s per address and per block per
//     MalformedWindow. Refuses that address or block, before reading its bodies.
//   - heartbeat replays (memory): heartbeats a node key's mark answers without a
//     verification (a repeat of the last accepted one, or an older ts) that come from
//     another address than the accepted one, per address and per block per
//     HeartbeatReplayWindow. Refuses that address or block, for such heartbeats only.
//   - register, initiate, failed resolve and revoke counters (store): per address and per
//     block. Each refuses that address or block for that action only.
//   - failed resolves per code, per operator and over all (store): the guessing bounds of
//     binding codes; per operator refuses that operator's sessions, the global one anyone.
//   - initiates per node key (store): refuses that key.
//   - revocations held per address block (store counters) and per root key (its operator
//     pin): refuse that block or root key. The list's total refuses only revocations by root
//     keys that never logged in, and makes room by displacing one of the block holding most
//     (package registry's revocations.go).
//   - the capped tables — node records, bearer sessions, open binding sessions (package
//     registry's tables.go, package registry/admission): what one client, block and
//     network may hold of each, a share of its cap. Each refuses only that group's newcomers; a full table or group
//     gives a newcomer only the place of a stale entry, never of one in use, and otherwise
//     refuses it with a Retry-After.
//
// The memory tables each track at most [Limits.MaxTrackedClients] keys; what they do when
// full is said there.

// Limits are the bounds an operator may change. A zero field takes its value in
// [DefaultLimits]; every refusal for a limit is 429 RATE_LIMITED, named in the answer's
// limit (see Exchange.Limit in package registry/httpapi).
type Limits struct {
	// RegisterAddressLimit is the number of new node keys one client address may register
	// per RegisterWindow. Registering is free, so without it one address could fill the
	// node table up to MaxNodes; a host running many nodes registers each key once.
	RegisterAddressLimit int
	// MaxNodes caps the node records the registry holds. Registering is free and the
	// per-address limit only slows one address, so without a cap enough addresses grow the
	// table, its memory and every listing without end. A full table gives a newcomer the
	// place of a stale record — one not seen within registry.DefaultOnlineWindow and not
	// bound — never of a node in use; when none is stale the newcomer is refused (429,
	// Retry-After) until one is (package registry/admission). It refuses only newcomers: known keys still
	// re-register and heartbeat.
	MaxNodes int
	// MaxNodesPerClient, MaxNodesPerBlock and MaxNodesPerNetwork are how many node records
	// the keys first registered from one client (an IPv4 address, an IPv6 /64), one block
	// (an IPv4 /24, an IPv6 /48) and one network (an IPv4 /16, an IPv6 /32) may hold. Zero
	// is a share of MaxNodes (tableShares), so that a smaller table keeps its proportions.
	// Node keys are free, so without them one party fills MaxNodes from one network; with
	// them filling the table takes MaxNodes / MaxNodesPerNetwork networks at least. A group
	// at its quota gives its newcomer the place of its own stalest record, or refuses it:
	// each refuses only the group that holds its quota. The network share leaves room for
	// a cloud region's /16 holding tens of thousands of honest nodes.
	MaxNodesPerClient, MaxNodesPerBlock, MaxNodesPerNetwork int
	// NodeExpiry is how long a node that is not bound may go unseen (no registration or
	// heartbeat) before the sweep removes its record. Anyone can register a key and walk
	// away; a node that runs heartbeats every few minutes, and an operator's bound node is
	// kept until BoundNodeExpiry ends its binding. A removed node that comes back registers
	// again.
	NodeExpiry time.Duration
	// BoundNodeExpiry is how long a bound node may go unseen before the sweep ends its
	// binding, with unbound_by "node_unseen" on the session that made it (docs/protocol.md
	// §10.6): from then on its record is an unbound node's, which NodeExpiry, counted
	// from the same last sight, removes. Without it, binding a node would hold its record
	// for good, and an attacker binding its own nodes to its own operators could fill the
	// node table with records nothing reclaims. An operator's node that is offline for a
	// month is retired or moved more often than not; one that comes back registers and is
	// bound again. It refuses no one: it ends only the bindings of nodes that stopped
	// heartbeating themselves.
	BoundNodeExpiry time.Duration

	// InitiateAddressLimit is the number of binding initiates one client address may make
	// per InitiateWindow. A node opens a session when its operator binds it, a few times in
	// its life; the default leaves room for a host running dozens of nodes, while one
	// address can no longer fill the store with sessions of fresh keys (each key may hold
	// binding.MaxOpenSessionsPerNode open sessions, and keys are free).
	InitiateAddressLimit int
	// InitiateKeyLimit is the number of binding initiates one node key may make per
	// InitiateWindow, from any addresses. A node opens a session when an operator binds it,
	// once or a few times; a key that opens and cancels sessions as fast as it can from many
	// addresses (each under its own limit) is doing nothing a node needs, and each initiate
	// costs the registry a verification and a durable write. Both initiate budgets are read
	// before the signature is verified, so an initiate over either costs a counter read.
	InitiateKeyLimit int
	// MaxOpenBindingSessions caps the binding sessions open at once over all keys and
	// addresses. A session lives at most binding.MaxSessionTTL and moves through its states
	// within it, so every open session is in use: a full table displaces none and refuses
	// the next initiate (429, Retry-After until the first open session ends). The default is
	// far above what honest binding traffic reaches, and it bounds the open sessions' share
	// of the store.
	MaxOpenBindingSessions int
	// MaxOpenBindingSessionsPerClient, PerBlock and PerNetwork are how many open binding
	// sessions the initiates of one client, block and network (as for MaxNodesPerClient) may
	// hold at once; zero is a share of MaxOpenBindingSessions. Node keys are free, so the
	// per-key bound alone lets one party hold any number of sessions; with these, filling
	// the table takes MaxOpenBindingSessions / MaxOpenBindingSessionsPerNetwork networks. Each
	// refuses only the group that holds its quota; a host binding its nodes holds a few
	// sessions for minutes.
	MaxOpenBindingSessionsPerClient, MaxOpenBindingSessionsPerBlock, MaxOpenBindingSessionsPerNetwork int

	// ResolveAddressLimit is the number of failed resolves one client address may make per
	// binding.ResolveWindow; then every resolve from it is refused until its window ends,
	// so that guessing many different codes is throttled too (docs/protocol.md §5.4).
	ResolveAddressLimit int
	// ResolveOperatorLimit is the number of failed resolves one operator DID (all its
	// bearer sessions together) may make per binding.ResolveWindow: the per-address budget
	// alone is no budget for an operator who sends from many addresses.
	ResolveOperatorLimit int
	// ResolveGlobalLimit is the number of failed resolves over all clients per
	// binding.ResolveWindow; beyond it every resolve is refused until the window ends. A
	// guesser's chance to hit one open session's code over its life is this limit times the
	// windows in that life, over the number of codes (31^8): negligible at the default,
	// which honest operators, who mistype a code now and then, do not come near.
	ResolveGlobalLimit int

	// MaxBearerSessions caps the operator bearer sessions alive at once (each lives an
	// hour). A full table gives a login the place of a session not presented within
	// BearerIdle, the least recently presented first, never of one in use; when every session
	// is in use the login is refused (429, Retry-After) until one is idle or ends. A session
	// is a few hundred bytes.
	//
	// Both session caps are counted in memory, checked before the write at no cost of a
	// query, and counted again from the store at every sweep interval (Sweep, or Recount on
	// the daemons another is sweeping for). On a store shared by N daemons each sees the
	// others' new and ended sessions at its next count, so the caps may be exceeded by what
	// the other N−1 daemons add within one sweep interval (and by the few writes in flight
	// while a count reads), not multiplied by N. A session's use is known to the daemon it
	// was presented to.
	MaxBearerSessions int
	// MaxBearerSessionsPerClient, PerBlock and PerNetwork are how many live bearer sessions
	// the logins from one client, block and network (as for MaxNodesPerClient) may hold at
	// once; zero is a share of MaxBearerSessions. Root keys are free, so a per-operator bound
	// alone lets one party hold any number of sessions; with these, filling the table takes
	// MaxBearerSessions / MaxBearerSessionsPerNetwork networks. A group at its quota gives its
	// login the place of its own least recently presented idle session, or refuses it (until
	// one ends, idles or logs out): each refuses only the group that holds its quota. An
	// office behind one address holds one session per device.
	MaxBearerSessionsPerClient, MaxBearerSessionsPerBlock, MaxBearerSessionsPerNetwork int
	// MaxBearerSessionsPerOperator is how many live bearer sessions one operator may hold
	// at once; a login beyond it ends the operator's oldest session. Only the operator's own
	// devices can spend it (a login is signed), so it refuses no one: it bounds what one
	// operator — a stranger's self-made one included — holds of MaxBearerSessions, and ends
	// the sessions of clients that log in per run and never log out.
	MaxBearerSessionsPerOperator int
	// LoginAddressLimit bounds the login attempts (successful or not) one client address may
	// make per challenge lifetime (authn.ChallengeTTL). Every attempt that reaches the
	// challenge check consumes a challenge, and consumed challenges are kept for their
	// lifetime in a set of authn.DefaultMaxUsedChallenges entries: so one address holds at
	// most this many entries of it, and filling it takes thousands of addresses logging in
	// at full rate (more if they fail, which the failure limit stops sooner). The default
	// is far more than an operator's devices make.
	LoginAddressLimit int
	// LoginFailureAddressLimit is the number of failed logins one client address may make
	// per LoginWindow; further attempts from it are refused until the window ends. An
	// operator who mistypes nothing (logins are signed by a device) fails rarely; a flood
	// of garbage signatures stops after this many.
	LoginFailureAddressLimit int
	// LoginFailureOperatorLimit is the number of failed logins one client address may make
	// naming one operator DID per LoginWindow; beyond it that address's logins for that DID
	// are refused, and nobody else's. Failures are never counted per DID alone: a DID is
	// public, so a count any stranger can add to would let strangers lock its operator out.
	// It refuses only the address that failed; the per-address budget above bounds how many
	// DIDs one address may fail on.
	LoginFailureOperatorLimit int

	// MalformedAddressLimit is the number of malformed requests — answered 400 BAD_REQUEST
	// or 413 PAYLOAD_TOO_LARGE — one client address may send per MalformedWindow. Beyond it
	// every request from that address is refused before its body is read, and its
	// connection is closed, until the window ends. A client that follows the protocol sends
	// none, but a 64 KiB body of one long string costs the registry a noticeable share of a
	// core to read, decode and refuse: one address sending them back to back would
	// otherwise take the cores honest clients need. It is a guard of each daemon's own CPU,
	// so each daemon counts in memory what reaches it.
	MalformedAddressLimit int
	// HeartbeatReplayAddressLimit is the number of replayed heartbeats one client address
	// may send per HeartbeatReplayWindow: heartbeats a node key's mark answers without
	// verifying them (docs/protocol.md §10.3) — a repeat of the heartbeat accepted last, or
	// an older ts — from an address other than the one that heartbeat came from. Beyond it
	// that address's replays are refused; its heartbeats with a new ts are verified and
	// accepted as ever. Each replay is cheap, but a captured heartbeat sent back to back
	// from many connections still takes the cores honest clients need; the refusal is held
	// back by the daemon's refusal delay, which is what slows such a sender. A node's own
	// retries of a heartbeat come from the address that sent it and are not counted, so
	// the default only needs room for a node whose retry leaves from another address (its
	// other address family, another address of a NAT's pool): a few retries of each
	// heartbeat, of a few nodes behind one address, in a minute. It is a guard of each
	// daemon's own CPU, so each daemon counts in memory what reaches it.
	HeartbeatReplayAddressLimit int

	// MaxRevocations bounds the credential revocation list (docs/protocol.md §10.5, §8.1), a
	// table a stranger can grow: anyone can make a root key and sign revocations for it. When
	// the list is full, a newcomer takes the place of the oldest revocation by a root key that
	// never logged in here ("unproven") over the whole list, whatever its block; when none is
	// left it is refused (429) — unless it is needed: a revocation of a credential that a live
	// bearer session of its operator logged in with gets in however full the list is, since
	// that is the stolen credential it exists to stop (within its root key's, block's and
	// network's quotas, which bound what the list can pass its cap by). A record is a few
	// hundred bytes.
	MaxRevocations int
	// RevokeAddressLimit is the number of new revocations one client address may record per
	// RevokeWindow. An operator revokes a handful of devices on a bad day; this keeps one
	// address from filling the list. Repeats of a recorded revocation do not count. It
	// refuses that address only, proven root keys included (the address spent it); the
	// aggregate per address block refuses unproven revocations only, so neighbours in a /24
	// cannot spend an operator's budget.
	RevokeAddressLimit int
	// RevocationsPerRoot is the number of revocations one root key may hold under one
	// operator DID body. An operator revokes a credential per lost or retired device; a
	// thousand is a large fleet's lifetime. It refuses only that root key, and bounds what
	// one proven root key (which nothing displaces or expires) can make the list hold.
	RevocationsPerRoot int
	// RevocationsPerBlock and RevocationsPerNetwork are the number of revocations one address
	// block (an IPv4 /24, an IPv6 /48) and one network (an IPv4 /16, an IPv6 /32) may hold,
	// proven and needed ones included: they bound, per group, the revocations that never
	// expire, and make filling the list take MaxRevocations / RevocationsPerNetwork networks.
	// Each refuses new revocations from that group only; a revocation needs no bearer, so an
	// operator whose network a stranger filled sends it from another. Zero
	// RevocationsPerNetwork is 5 % of MaxRevocations. An operator revokes a handful of
	// devices, so only a group whose own clients made thousands of revocations reaches them.
	RevocationsPerBlock, RevocationsPerNetwork int
	// RevocationTTL is how long an unproven revocation is kept. The sweep
	// removes it afterwards unless its root key has logged in meanwhile. The registry cannot
	// know the expiry of the credentials a revocation names (it carries only their
	// revocation_id), so it keeps a fixed span: long enough that an operator who revokes a
	// lost device before it was ever used here is covered for weeks, short enough that a
	// stranger's list entries go. A credential that logs in makes its root key proven, and
	// from then on the operator's revocation is kept for good and never refused by the list.
	RevocationTTL time.Duration

	// AddressBlockFactor is how many addresses' worth of each per-address budget one address
	// block (an IPv4 /24, an IPv6 /48) may spend together: with 16, a /24 of 256 addresses
	// gets what 16 get, and so does a /48 of 65,536 /64s, which otherwise would be 65,536
	// clients. A NAT or a proxy-less campus behind one /24 rarely has that many clients at a
	// budget's edge at once. It refuses only the block that spent it.
	AddressBlockFactor int
	// MaxTrackedClients bounds the keys each in-memory budget table (login attempts, login
	// failures per address and per address and DID, malformed requests, heartbeat replays)
	// tracks at once, so a table's memory stays bounded however many keys strangers use. A
	// key the table does not track counts as fresh: it is never charged with another key's
	// events. When the table is full, a new key makes room by forgetting the least useful
	// entry among the least recently used: one whose window ended, else the one with the
	// fewest events. So a sender with more addresses than the table holds forgets its own
	// counts first (and gains a fresh budget per address it cycles through, which the
	// per-block budgets bound), while the entry of an address that keeps being refused
	// stays. Being full refuses no one.
	MaxTrackedClients int
}

// DefaultLimits returns the limits svrpd serves with unless told otherwise; each table's
// quota per group is its share of the table's cap (tableShares).
func DefaultLimits() Limits {
	return Limits{}.OrDefaults()
}

// OrDefaults returns l with every field that is zero or less set to its default ([Bounds]),
// and each table's quota per group to its share of the table's cap as l sets it.
func (l Limits) OrDefaults() Limits {
	for _, b := range bounds {
		if !b.Share {
			b.setDefault(&l)
		}
	}
	if l.RevocationsPerNetwork <= 0 {
		l.RevocationsPerNetwork = max(min(l.MaxRevocations, minGroupQuota), (l.MaxRevocations*tableShares[netblock.Network]+9_999)/10_000)
	}
	for _, t := range l.tables() {
		for lv, v := range t.perGroup {
			if *v <= 0 {
				*v = max(min(*t.cap, minGroupQuota), (*t.cap*tableShares[lv]+9_999)/10_000)
			}
		}
	}
	return l
}

// tableShares is each level's default quota in a capped table, in ten-thousandths of the
// table's cap: a client (an IPv4 address, an IPv6 /64) 0.5 %, a block (/24, /48) 1 %, a
// network (/16, /32) 5 %. Filling a table then takes entries from at least 20 networks,
// 100 blocks and 200 clients, each kept in use; and a cloud region's /16 holding tens of
// thousands of honest nodes, or an office's or a carrier's NAT holding a few thousand
// sessions, stays within its share of the default caps.
var tableShares = [netblock.Levels]int{50, 100, 500}

// minGroupQuota is the least default quota of a group, or the whole cap when it is smaller:
// a registry made small (a hobbyist's, a test's) still lets one host run a few nodes and one
// office log a few devices in, where its shares would round to one.
const minGroupQuota = 16

// table is a capped table's cap and its quota per group at each level, as fields of Limits,
// with the limits their refusals name.
type table struct {
	name     string
	cap      *int
	perGroup [netblock.Levels]*int
	limits   [netblock.Levels + 1]string // the refusals' limit names: per level, then the cap
}

// capped names the capped tables (package registry/admission) and their fields of Limits:
// the quotas per client, block and network, then the cap.
var capped = []struct {
	name   string
	fields [netblock.Levels + 1]string
}{
	{"nodes", [...]string{"MaxNodesPerClient", "MaxNodesPerBlock", "MaxNodesPerNetwork", "MaxNodes"}},
	{"bearer sessions", [...]string{"MaxBearerSessionsPerClient", "MaxBearerSessionsPerBlock", "MaxBearerSessionsPerNetwork", "MaxBearerSessions"}},
	{"open binding sessions", [...]string{"MaxOpenBindingSessionsPerClient", "MaxOpenBindingSessionsPerBlock", "MaxOpenBindingSessionsPerNetwork", "MaxOpenBindingSessions"}},
}

// tables lists the capped tables of l, each field with the refusal its bound declares.
func (l *Limits) tables() []table {
	out := make([]table, len(capped))
	for i, c := range capped {
		out[i].name = c.name
		for lv, f := range c.fields {
			b := boundOf(f)
			if lv < netblock.Levels {
				out[i].perGroup[lv] = b.Int(l)
			} else {
				out[i].cap = b.Int(l)
			}
			out[i].limits[lv] = b.Refuses[0]
		}
	}
	return out
}

// A Table is one capped table's bounds (package registry/admission) as a Limits sets them:
// its name, its cap and quotas per group, and the limits its refusals name, per level then
// the cap's.
type Table struct {
	Name     string
	Quota    admission.Quota
	Refusals [netblock.Levels + 1]string
}

// Tables returns the capped tables' bounds as l sets them, in the order of capped: nodes,
// bearer sessions, open binding sessions.
func (l Limits) Tables() []Table {
	ts := l.tables()
	out := make([]Table, len(ts))
	for i, t := range ts {
		out[i] = Table{Name: t.name, Quota: admission.Quota{Cap: *t.cap}, Refusals: t.limits}
		for lv, v := range t.perGroup {
			out[i].Quota.PerGroup[lv] = *v
		}
	}
	return out
}

// The windows the limits count in, and the bounds no operator needs to change.
const (
	RegisterWindow        = time.Hour
	InitiateWindow        = 10 * time.Minute
	LoginWindow           = 10 * time.Minute
	MalformedWindow       = time.Minute
	HeartbeatReplayWindow = time.Minute
	RevokeWindow          = time.Hour

	RevokeCounterPrefix = "revoke/"
	// RevokeHeldPrefix counts the revocations an address block or network holds. Its
	// counters are no window's: the sweep never removes them, and a revocation's removal
	// counts it down.
	RevokeHeldPrefix = "revoke-held/"

	// revokeVictims bounds the displacement candidates a sweep keeps in memory: the oldest
	// unproven revocations of the whole list. Between sweeps a full list admits as many
	// newcomers as that; beyond them a newcomer is refused until the next sweep finds more.
	// Each candidate is a pair of at most 512 bytes.
	RevokeVictimCount = 8192
	// RevokeExpiryPerSweep bounds the expired revocations one sweep removes, so that a sweep
	// after a long stop does not hold the store for long; the rest go at the next.
	RevokeExpiryPerSweep = 20_000

	// MaxResolveNodes and MaxResolveNodePairs bound the tables of failed resolves that name
	// a node (docs/protocol.md §10.9): per node key, and per node key and client address. They
	// refuse no one by being full: past its size a table forgets its least useful entry (the
	// least recently failed of those that refuse no one yet, unless one that reached the limit
	// has a window that ended; failing both, the least recently failed), and a key it does not
	// track counts as fresh. So an attacker who fills
	// them — each entry costs a failure, which the per-address budget meters — buys at most
	// ResolveNodeFailureLimit more guesses of a node's code, or one more per address, per
	// flush. An entry is some two hundred bytes: both tables stay under some 40 MiB.
	MaxResolveNodes     = 1 << 16
	MaxResolveNodePairs = 1 << 17

	// BearerIdle is how long a bearer session stays in use after it was last presented (or
	// issued). A client in use presents its session every few minutes (the console polls
	// every few seconds); a session idle longer is one a client logged in for and left, and
	// a full table gives its place to a login. It is still valid until it ends, until then.
	BearerIdle = 15 * time.Minute

	// MaxVictimChecks bounds the records one registration reads to find a stale one for a
	// full table. The table offers the stalest first, as of its last count, so a record it
	// offers is in use only when it was seen since; each such record is offered once per
	// count, so a registration past this bound finds the next ones at once when it tries
	// again (it is asked to, in a second), and no registration holds its transaction long.
	MaxVictimChecks = 1024

	// CapWarnEvery is how often reaching a global cap is logged: once per interval at warn
	// level, not once per refused request, so a flood cannot flood the log too.
	CapWarnEvery = time.Minute

	// MaxVerifyRounds bounds how often a binding session's change that verifies signatures
	// starts over because the session changed between its read and its write (package
	// registry's sessionchange.go).
	// A session's record changes only a few times in its life: its state only moves
	// forward, through at most four stored states, and an ACTIVE session is marked unbound
	// once. So no honest request is refused by it; a change that starts over this often has
	// met something other than a session's life, and fails INTERNAL rather than loop.
	MaxVerifyRounds = 8
)

// Node records, their listings and replays (docs/protocol.md §8 and §10.1–10.3).
//
// Registering is free and signatures are public, so a stranger can grow the node table, make
// its records as large as the field limits allow, ask for its listings as often and in as
// many spellings as it likes, and send back what others signed.
const (
	// MaxSignatureBytes caps the registration signature stored as given in grace mode
	// (docs/protocol.md §8). A base58 Ed25519 signature is 86–88 characters, so every wrong-length
	// signature grace mode speaks of still fits; without a cap one GET /nodes carried
	// whatever 64 KiB strings strangers registered, once per node.
	MaxSignatureBytes = 256

	// MaxListingBytes bounds the memory that encoded listings hold at once: the current
	// snapshot, and older ones that slow readers are still being sent. A new snapshot is
	// built only when the ones still held leave room for it; otherwise readers get the
	// newest one already built, at most as stale as those readers are slow (the write
	// timeout bounds that). One snapshot is always allowed, however large: refusing to list
	// would be worse than holding it.
	MaxListingBytes = 512 << 20

	// ListingSlotCount listings are written at once; other readers wait their turn. Writing
	// a large listing is mostly copying, and many greedy readers copying at once starved
	// every other request of the cores (an honest login waited on them); queued, they cost
	// the others far less and lose no throughput.
	ListingSlotCount = 2

	// ListingSlotHold is the longest one listing holds its turn. A reader that has not taken
	// its listing by then keeps receiving it without a turn, so slow readers cannot keep
	// everyone else's listings waiting for the write timeout.
	ListingSlotHold = time.Second
)

// Pages of the node listings (docs/protocol.md §5.1).
const (
	// MaxListingPage is the largest limit a listing answers; a larger one is BAD_REQUEST.
	// A page is built whole to be tagged and compressed, and a client that pages does so to
	// take the table in parts: 10,000 records is about 5 MB, a part a phone takes in one
	// answer, and a watcher of a busy network collects a minute of changes in a page or two.
	MaxListingPage = 10_000

	// MaxCursorKey bounds the tie-breaking key a cursor carries: a node key is 32 bytes,
	// and a bound node's DID at most 256. A longer cursor is none the registry gave.
	MaxCursorKey = 512

	// MaxListingVariants is how many distinct answers (filter, page and kind) a listing
	// snapshot keeps the entity tag and gzip form of. The popular answers — the whole
	// table, the pages watchers follow — are asked for many times per snapshot and computed
	// once; a stranger spelling ever new filters gets each computed for itself (the cost of
	// answering it, no more) and cannot grow the snapshot beyond this many.
	MaxListingVariants = 256

	// MaxListingGzipBytes bounds the gzip forms one snapshot keeps of its answers. The whole
	// table and the pages watchers follow are asked for first and most, and fit; a stranger
	// asking for ever new filters with gzip, once the room is spent, gets each answer
	// compressed for itself, paying with its own wait in the listing slots rather than with
	// the registry's memory.
	MaxListingGzipBytes = 32 << 20

	// MaxListingHeldBytes is the largest listing answer of more than a page that a snapshot
	// keeps encoded (and compressed) once it is asked for twice. Watchers of a table of some
	// hundred thousand nodes take the whole listing again and again, and a copy of bytes kept
	// costs a fraction of encoding them each time; beyond this the answer is encoded as it is
	// written, each time, so that a listing of a larger table holds no memory in proportion
	// to it. A stranger's filters can hold at most MaxListingBytes this way.
	MaxListingHeldBytes = 64 << 20
)

// The network view (GET /v1/network/stats, package registry/answers).
const (
	// NetworkStatsMaxAge is how old the answer may grow before a request rebuilds it, in one
	// pass over the node table. Every other request reads the answer as built, so a client
	// polling as fast as it can costs what reading a few kilobytes costs, whatever the
	// network's size; the page polls every few seconds, and counts this stale are fresh
	// enough for a picture of the network.
	NetworkStatsMaxAge = 5 * time.Second

	// NetworkStatsGroups is how many regions and capabilities a breakdown names; the rest
	// are counted together. Both are strings strangers choose, as many as they like: without
	// a bound one answer would carry them all.
	NetworkStatsGroups = 20

	// NetworkHistorySpan is how long the sweep keeps a step of the history: the span of the
	// longest series (a week). Older steps are no longer shown, and the ring reuses their
	// keys anyway, so the history takes a fixed number of counters in the store.
	NetworkHistorySpan = 7 * 24 * time.Hour

	// NetworkHistorySettle is how far before changed_since the series of a shorter answer
	// begin. A step changes while samples fall in it, and a registry reads the samples of
	// the others sharing its store at its own, once a minute: an answer built at t may lack
	// a sample taken up to a minute before t. The second minute leaves room for the
	// daemons' clocks to differ a little.
	NetworkHistorySettle = 2 * time.Minute

	// NetworkStatsVariants bounds the shorter answers (changed_since) kept with one answer,
	// each with its gzip form once asked for. The pages polling ask for a few, those whose
	// series begin a few minutes back; a client spelling ever new times gets each built
	// for itself, holding none of the registry's memory.
	NetworkStatsVariants = 16
)
