package limits

import (
	"reflect"
	"slices"
	"time"

	"github.com/svrp/svrp/registry/budget"
)

// A Bound declares one field of [Limits]: the flag of svrpd serve that sets it, its default,
// the limits its refusals name and where it is applied. Its reason is the field's own
// comment. [Bounds] lists one per field; the defaults, the flags and their validation are
// made from that list, and tests hold the README's flag table, docs/protocol.md §8 and the
// refusals' names (package registry/budget) to it.
type Bound struct {
	Field string // the field of Limits
	Flag  string // the flag of svrpd serve, and with SVRPD_ its environment variable
	Usage string // the flag's line of help
	// Refuses names the limits its refusals carry, the per-address one first; none when it
	// refuses no one (an expiry, a table's size, a factor of other bounds).
	Refuses []string
	// Enforced is where it is applied.
	Enforced string
	// Share marks a table's quota per group: zero, its flag's default, is a share of the
	// table's cap, so that a cap lowered by its flag lowers its quotas with it.
	Share bool
	// ZeroTakesDefault: zero takes the default, so that a configuration written before the
	// bound existed still validates. A count without it must be at least 1.
	ZeroTakesDefault bool
	// Unit, when set, is what one of the flag's whole numbers counts: the flag predates the
	// field's being a duration and keeps taking a number (--node-expiry-hours).
	Unit time.Duration

	def int64 // the default, in the field's own units; none for a Share
}

// Int returns the field of l that b declares, or nil when it is a duration.
func (b Bound) Int(l *Limits) *int {
	p, _ := b.field(l).(*int)
	return p
}

// Duration returns the field of l that b declares, or nil when it is a count.
func (b Bound) Duration(l *Limits) *time.Duration {
	p, _ := b.field(l).(*time.Duration)
	return p
}

func (b Bound) field(l *Limits) any {
	return reflect.ValueOf(l).Elem().FieldByName(b.Field).Addr().Interface()
}

// setDefault sets b's field of l to its default when l leaves it zero or less.
func (b Bound) setDefault(l *Limits) {
	if p := b.Int(l); p != nil && *p <= 0 {
		*p = int(b.def)
	}
	if p := b.Duration(l); p != nil && *p <= 0 {
		*p = time.Duration(b.def)
	}
}

// boundOf returns the bound of Limits' field named field.
func boundOf(field string) Bound {
	i := slices.IndexFunc(bounds, func(b Bound) bool { return b.Field == field })
	return bounds[i]
}

// Bounds returns the declaration of every field of [Limits], in the order svrpd lists
// their flags.
func Bounds() []Bound { return slices.Clone(bounds) }

var bounds = []Bound{
	{Field: "ResolveAddressLimit", Flag: "resolve-address-limit", def: 30,
		Refuses:  []string{budget.LimitResolvePerAddress, budget.LimitResolvePerBlock},
		Enforced: "Resolve, before its checks: store counters of failed resolves",
		Usage:    "failed binding resolves per client address per 10 minutes before 429"},
	{Field: "RegisterAddressLimit", Flag: "register-address-limit", def: 600,
		Refuses:  []string{budget.LimitRegisterPerAddress, budget.LimitRegisterPerBlock},
		Enforced: "Register, for keys the registry does not hold: store counters",
		Usage:    "new node keys one client address may register per hour before 429"},
	{Field: "MaxNodes", Flag: "max-nodes", def: 1_000_000, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitNodes},
		Enforced: "Register: the node table (registry/tables.go, package registry/admission)",
		Usage:    "most node records the registry holds; when full, a new key takes the place of the least recently seen record unseen for 10 minutes and not bound, or gets 429 with Retry-After (a node in use is never displaced)"},
	{Field: "MaxNodesPerClient", Flag: "max-nodes-per-client", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitNodesPerClient},
		Enforced: "Register: the node table",
		Usage:    "node records the keys first registered from one IPv4 address or IPv6 /64 may hold (0: 0.5% of --max-nodes); a newcomer beyond it takes its own group's stalest record or gets 429"},
	{Field: "MaxNodesPerBlock", Flag: "max-nodes-per-block", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitNodesPerBlock},
		Enforced: "Register: the node table",
		Usage:    "node records the keys first registered from one IPv4 /24 or IPv6 /48 may hold (0: 1% of --max-nodes)"},
	{Field: "MaxNodesPerNetwork", Flag: "max-nodes-per-network", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitNodesPerNetwork},
		Enforced: "Register: the node table",
		Usage:    "node records the keys first registered from one IPv4 /16 or IPv6 /32 may hold (0: 5% of --max-nodes)"},
	{Field: "NodeExpiry", Flag: "node-expiry-hours", Unit: time.Hour, def: int64(7 * 24 * time.Hour), ZeroTakesDefault: true,
		Enforced: "the sweep (registry/nodeexpiry.go)",
		Usage:    "`hours` a node that is not bound may go unseen before the sweep removes it"},
	{Field: "MaxRevocations", Flag: "max-revocations", def: 1_000_000, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitRevocationList},
		Enforced: "Revoke (registry/revocations.go)",
		Usage:    "credential revocations kept in all; when full, a new one takes the place of the oldest revocation by a root key that never logged in, over the whole list, or gets 429 — unless it revokes a credential a live session logged in with, which always gets in"},
	{Field: "RevokeAddressLimit", Flag: "revoke-address-limit", def: 60, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitRevokePerAddress, budget.LimitRevokePerBlock},
		Enforced: "Revoke: store counters",
		Usage:    "new credential revocations one client address may record per hour before 429"},
	{Field: "RevocationsPerRoot", Flag: "revocations-per-root", def: 1_000, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitRevocationsPerRoot},
		Enforced: "Revoke: the count on the operator's pin",
		Usage:    "credential revocations one root key may hold under one operator DID before its next gets 429"},
	{Field: "RevocationsPerBlock", Flag: "revocations-per-block", def: 10_000, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitRevocationsPerBlock},
		Enforced: "Revoke: store counters of what a block holds",
		Usage:    "credential revocations one IPv4 /24 or IPv6 /48 may hold before its next gets 429"},
	{Field: "RevocationsPerNetwork", Flag: "revocations-per-network", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitRevocationsPerNetwork},
		Enforced: "Revoke: store counters of what a network holds",
		Usage:    "credential revocations one IPv4 /16 or IPv6 /32 may hold before its next gets 429 (0: 5% of --max-revocations); a revocation needs no bearer, so an operator sends it from another network"},
	{Field: "RevocationTTL", Flag: "revocation-ttl-hours", Unit: time.Hour, def: int64(30 * 24 * time.Hour), ZeroTakesDefault: true,
		Enforced: "the sweep (registry/revocations.go)",
		Usage:    "`hours` a revocation by a root key that never logged in is kept; a root key that logs in keeps its revocations for good"},
	{Field: "InitiateAddressLimit", Flag: "initiate-address-limit", def: 120,
		Refuses:  []string{budget.LimitInitiatePerAddress, budget.LimitInitiatePerBlock},
		Enforced: "Initiate, before the signature: store counters",
		Usage:    "binding initiates per client address per 10 minutes before 429"},
	{Field: "MaxOpenBindingSessions", Flag: "max-binding-sessions", def: 50_000,
		Refuses:  []string{budget.LimitOpenSessions},
		Enforced: "Initiate: the open-session table",
		Usage:    "open binding sessions over all nodes; every open session is in use, so when full an initiate gets 429 with Retry-After until one ends"},
	{Field: "MaxOpenBindingSessionsPerClient", Flag: "max-binding-sessions-per-client", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitOpenSessionsPerClient},
		Enforced: "Initiate: the open-session table",
		Usage:    "open binding sessions the initiates of one IPv4 address or IPv6 /64 may hold (0: 0.5% of --max-binding-sessions)"},
	{Field: "MaxOpenBindingSessionsPerBlock", Flag: "max-binding-sessions-per-block", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitOpenSessionsPerBlock},
		Enforced: "Initiate: the open-session table",
		Usage:    "open binding sessions the initiates of one IPv4 /24 or IPv6 /48 may hold (0: 1% of --max-binding-sessions)"},
	{Field: "MaxOpenBindingSessionsPerNetwork", Flag: "max-binding-sessions-per-network", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitOpenSessionsPerNetwork},
		Enforced: "Initiate: the open-session table",
		Usage:    "open binding sessions the initiates of one IPv4 /16 or IPv6 /32 may hold (0: 5% of --max-binding-sessions)"},
	{Field: "MaxBearerSessions", Flag: "max-bearer-sessions", def: 100_000,
		Refuses:  []string{budget.LimitBearerSessions},
		Enforced: "Login: the bearer table",
		Usage:    "live operator sessions over all operators; when full, a login takes the place of the session least recently presented among those idle for 15 minutes, or gets 429 with Retry-After (a session in use is never ended for it)"},
	{Field: "MaxBearerSessionsPerClient", Flag: "max-bearer-sessions-per-client", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitBearerSessionsPerClient},
		Enforced: "Login: the bearer table",
		Usage:    "live operator sessions the logins of one IPv4 address or IPv6 /64 may hold (0: 0.5% of --max-bearer-sessions)"},
	{Field: "MaxBearerSessionsPerBlock", Flag: "max-bearer-sessions-per-block", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitBearerSessionsPerBlock},
		Enforced: "Login: the bearer table",
		Usage:    "live operator sessions the logins of one IPv4 /24 or IPv6 /48 may hold (0: 1% of --max-bearer-sessions)"},
	{Field: "MaxBearerSessionsPerNetwork", Flag: "max-bearer-sessions-per-network", Share: true, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitBearerSessionsPerNetwork},
		Enforced: "Login: the bearer table",
		Usage:    "live operator sessions the logins of one IPv4 /16 or IPv6 /32 may hold (0: 5% of --max-bearer-sessions)"},
	{Field: "MaxBearerSessionsPerOperator", Flag: "max-bearer-sessions-per-operator", def: 64, ZeroTakesDefault: true,
		Enforced: "Login: the operator's oldest session ends",
		Usage:    "live sessions one operator may hold; a login beyond it ends the operator's oldest session"},
	{Field: "LoginAddressLimit", Flag: "login-address-limit", def: 256,
		Refuses:  []string{budget.LimitLoginsPerAddress, budget.LimitLoginsPerBlock},
		Enforced: "Login, before the checks: memory, or store counters when challenges are kept in the store",
		Usage:    "login attempts per client address per 5 minutes before 429"},
	{Field: "LoginFailureAddressLimit", Flag: "login-failure-address-limit", def: 30,
		Refuses:  []string{budget.LimitLoginFailuresPerAddress, budget.LimitLoginFailuresPerBlock},
		Enforced: "Login, before the checks: memory or store counters",
		Usage:    "failed logins per client address per 10 minutes before 429"},
	{Field: "LoginFailureOperatorLimit", Flag: "login-failure-operator-limit", def: 10,
		Refuses:  []string{budget.LimitLoginFailuresPerOperator},
		Enforced: "Login, before the checks: memory or store counters",
		Usage:    "failed logins of one client address naming one operator DID per 10 minutes before that address gets 429 for that DID"},
	{Field: "ResolveOperatorLimit", Flag: "resolve-operator-limit", def: 30,
		Refuses:  []string{budget.LimitResolvePerOperator},
		Enforced: "Resolve: store counters",
		Usage:    "failed binding resolves per operator per 10 minutes before 429"},
	{Field: "ResolveGlobalLimit", Flag: "resolve-global-limit", def: 5_000,
		Refuses:  []string{budget.LimitResolveGlobal},
		Enforced: "Resolve, without node_did: a store counter",
		Usage:    "failed binding resolves over all clients per 10 minutes before 429"},
	{Field: "InitiateKeyLimit", Flag: "initiate-key-limit", def: 60,
		Refuses:  []string{budget.LimitInitiatePerKey},
		Enforced: "Initiate, before the signature: store counters",
		Usage:    "binding initiates per node key per 10 minutes before 429"},
	{Field: "MalformedAddressLimit", Flag: "malformed-address-limit", def: 60,
		Refuses:  []string{budget.LimitMalformedPerAddress, budget.LimitMalformedPerBlock},
		Enforced: "every request, before its body is read: memory of each daemon",
		Usage:    "malformed requests (400, 413) per client address per minute; beyond it the address gets 429 before its body is read"},
	{Field: "HeartbeatReplayAddressLimit", Flag: "heartbeat-replay-address-limit", def: 10, ZeroTakesDefault: true,
		Refuses:  []string{budget.LimitHeartbeatReplaysPerAddress, budget.LimitHeartbeatReplaysPerBlock},
		Enforced: "Heartbeat, for the heartbeats a mark answers: memory of each daemon",
		Usage:    "replayed heartbeats (a repeat of a node's accepted heartbeat, or an older ts, from another address than it came from) per client address per minute; beyond it the address's replays get 429, its new heartbeats are still accepted"},
	{Field: "AddressBlockFactor", Flag: "address-block-factor", def: 16, ZeroTakesDefault: true,
		Enforced: "every per-address budget's aggregate per block, and the daemon's connections",
		Usage:    "addresses' worth of every per-address budget (connections included) one IPv4 /24 or IPv6 /48 may spend together"},
	{Field: "MaxTrackedClients", Flag: "max-tracked-clients", def: 1 << 16, ZeroTakesDefault: true,
		Enforced: "the in-memory budget tables (package registry/budget)",
		Usage:    "keys each in-memory budget table (logins, login failures, malformed requests, heartbeat replays) remembers; when full it forgets the least useful"},
	{Field: "BoundNodeExpiry", Flag: "bound-node-expiry", def: int64(30 * 24 * time.Hour), ZeroTakesDefault: true,
		Enforced: "the sweep (registry/unseen.go)",
		Usage:    "how long a bound node may go unseen before the sweep ends its binding (unbound_by node_unseen); its record then expires as an unbound node's"},
}

// fixedRefusals are the limits a refusal can name whose bound the protocol fixes, so no
// flag changes it (package binding gives each).
var fixedRefusals = []string{
	budget.LimitResolvePerCode,      // binding.ResolveFailureLimit failed resolves of one code
	budget.LimitResolvePerNode,      // binding.ResolveNodeFailureLimit failed resolves naming one node key
	budget.LimitOpenSessionsPerNode, // binding.MaxOpenSessionsPerNode open sessions of one node key
}
