package budget

import (
	"errors"
	"slices"
	"time"

	"github.com/svrp/svrp/proto"
)

// The rate limits a request can be refused by, as a refusal names them (the Limit of the
// registry's Exchange, the label of its refusals' metric).
const (
	LimitResolvePerCode           = "resolve_per_code"             // failed resolves of one code
	LimitResolvePerAddress        = "resolve_per_address"          // failed resolves from one client address
	LimitResolvePerOperator       = "resolve_per_operator"         // failed resolves by one operator
	LimitResolveGlobal            = "resolve_global"               // failed resolves of all clients
	LimitResolvePerNode           = "resolve_per_node"             // failed resolves naming one node key, from an address that failed on it
	LimitRegisterPerAddress       = "register_per_address"         // new node keys from one client address
	LimitInitiatePerAddress       = "initiate_per_address"         // binding initiates from one client address
	LimitInitiatePerKey           = "initiate_per_key"             // binding initiates of one node key
	LimitOpenSessionsPerNode      = "open_sessions_per_node"       // open binding sessions of one node key
	LimitOpenSessions             = "open_sessions"                // open binding sessions in all
	LimitLoginsPerAddress         = "logins_per_address"           // logins from one client address
	LimitLoginFailuresPerAddress  = "login_failures_per_address"   // failed logins from one client address
	LimitLoginFailuresPerOperator = "login_failures_per_operator"  // failed logins for one operator from one client address
	LimitBearerSessions           = "bearer_sessions"              // bearer sessions in all
	LimitRevokePerAddress         = "revoke_per_address"           // new revocations from one client address
	LimitRevocationList           = "revocation_list"              // revocations the registry keeps in all
	LimitRevocationsPerRoot       = "revocations_per_root"         // revocations one root key holds
	LimitRevocationsPerBlock      = "revocations_held_per_block"   // revocations one address block holds
	LimitRevocationsPerNetwork    = "revocations_held_per_network" // revocations one network holds
	LimitNodes                    = "nodes"                        // node records the registry keeps in all
	LimitMalformedPerAddress      = "malformed_per_address"        // malformed requests from one client address

	// The aggregates of the per-address limits over one address block (IPv4 /24, IPv6 /48).
	LimitResolvePerBlock       = "resolve_per_block"
	LimitRegisterPerBlock      = "register_per_block"
	LimitInitiatePerBlock      = "initiate_per_block"
	LimitLoginsPerBlock        = "logins_per_block"
	LimitLoginFailuresPerBlock = "login_failures_per_block"
	LimitRevokePerBlock        = "revoke_per_block"
	LimitMalformedPerBlock     = "malformed_per_block"

	// What one group of the address hierarchy (registry/netblock) holds of a capped table:
	// one client (IPv4 address, IPv6 /64), one block (/24, /48), one network (/16, /32).
	LimitBearerSessionsPerClient  = "bearer_sessions_per_client"
	LimitBearerSessionsPerBlock   = "bearer_sessions_per_block"
	LimitBearerSessionsPerNetwork = "bearer_sessions_per_network"
	LimitOpenSessionsPerClient    = "open_sessions_per_client"
	LimitOpenSessionsPerBlock     = "open_sessions_per_block"
	LimitOpenSessionsPerNetwork   = "open_sessions_per_network"
	LimitNodesPerClient           = "nodes_per_client"
	LimitNodesPerBlock            = "nodes_per_block"
	LimitNodesPerNetwork          = "nodes_per_network"

	// Heartbeats the registry answers from a key's mark (a repeat of the last accepted one, or
	// an older ts) sent from another address than the accepted one: per client address, and
	// the aggregate over its address block.
	LimitHeartbeatReplaysPerAddress = "heartbeat_replays_per_address"
	LimitHeartbeatReplaysPerBlock   = "heartbeat_replays_per_block"
)

// Names returns every limit name a refusal can carry, so that a counter can start each at 0.
func Names() []string { return slices.Clone(names) }

// names are the limit names; a test holds them to the constants above.
var names = []string{
	LimitResolvePerCode, LimitResolvePerAddress, LimitResolvePerOperator, LimitResolveGlobal, LimitResolvePerNode,
	LimitRegisterPerAddress, LimitInitiatePerAddress, LimitInitiatePerKey, LimitOpenSessionsPerNode, LimitOpenSessions,
	LimitLoginsPerAddress, LimitLoginFailuresPerAddress, LimitLoginFailuresPerOperator,
	LimitBearerSessions, LimitRevokePerAddress, LimitRevocationList, LimitNodes,
	LimitMalformedPerAddress, LimitRevocationsPerRoot, LimitRevocationsPerBlock, LimitRevocationsPerNetwork,
	LimitResolvePerBlock, LimitRegisterPerBlock, LimitInitiatePerBlock, LimitLoginsPerBlock,
	LimitLoginFailuresPerBlock, LimitRevokePerBlock, LimitMalformedPerBlock,
	LimitBearerSessionsPerClient, LimitBearerSessionsPerBlock, LimitBearerSessionsPerNetwork,
	LimitOpenSessionsPerClient, LimitOpenSessionsPerBlock, LimitOpenSessionsPerNetwork,
	LimitNodesPerClient, LimitNodesPerBlock, LimitNodesPerNetwork,
	LimitHeartbeatReplaysPerAddress, LimitHeartbeatReplaysPerBlock,
}

// refusal is a RATE_LIMITED refusal that names the limit which made it, so that the
// observer of the HTTP layer can count refusals by limit without the use cases counting.
type refusal struct {
	limit string
	err   *proto.Error
	// retryAfter, when not zero, is when the refused request may succeed: sent as the
	// answer's Retry-After.
	retryAfter time.Duration
}

func (e refusal) Error() string { return e.err.Error() }
func (e refusal) Code() string  { return e.err.Code() }
func (e refusal) Unwrap() error { return e.err }
func (e refusal) Limit() string { return e.limit }

// RateLimited returns a RATE_LIMITED error from limit.
func RateLimited(limit, msg string) error {
	return refusal{limit: limit, err: proto.New(proto.RateLimited, msg)}
}

// RetryLater is RateLimited for a refusal that ends by itself: its answer asks the client to
// try again after wait (Retry-After).
func RetryLater(limit, msg string, wait time.Duration) error {
	return refusal{limit: limit, err: proto.New(proto.RateLimited, msg), retryAfter: wait}
}

// RetryAfter returns the wait a refusal asks for, or zero.
func RetryAfter(err error) time.Duration {
	var le refusal
	if errors.As(err, &le) {
		return le.retryAfter
	}
	return 0
}

// LimitOf returns the name of the rate limit that refused with err, or "".
func LimitOf(err error) string {
	var le refusal
	if errors.As(err, &le) {
		return le.limit
	}
	return ""
}

// Pick returns ifBlock when byBlock is set, else ifAddr: the name of the per-block or the
// per-address limit that refused.
func Pick(byBlock bool, ifBlock, ifAddr string) string {
	if byBlock {
		return ifBlock
	}
	return ifAddr
}
