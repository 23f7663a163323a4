package registry

import (
	"context"
	"errors"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/store"
)

// The rate limits a request can be refused by, as a refusal names them (Exchange.Limit).
const (
	LimitResolvePerCode           = "resolve_per_code"            // failed resolves of one code
	LimitResolvePerAddress        = "resolve_per_address"         // failed resolves from one client address
	LimitResolvePerOperator       = "resolve_per_operator"        // failed resolves by one operator
	LimitResolveGlobal            = "resolve_global"              // failed resolves of all clients
	LimitResolvePerNode           = "resolve_per_node"            // failed resolves naming one node key, from an address that failed on it
	LimitRegisterPerAddress       = "register_per_address"        // new node keys from one client address
	LimitInitiatePerAddress       = "initiate_per_address"        // binding initiates from one client address
	LimitInitiatePerKey           = "initiate_per_key"            // binding initiates of one node key
	LimitOpenSessionsPerNode      = "open_sessions_per_node"      // open binding sessions of one node key
	LimitOpenSessions             = "open_sessions"               // open binding sessions in all
	LimitLoginsPerAddress         = "logins_per_address"          // logins from one client address
	LimitLoginFailuresPerAddress  = "login_failures_per_address"  // failed logins from one client address
	LimitLoginFailuresPerOperator = "login_failures_per_operator" // failed logins for one operator from one client address
	LimitBearerSessions           = "bearer_sessions"             // bearer sessions in all
	LimitRevokePerAddress         = "revoke_per_address"          // new revocations from one client address
	LimitRevocationList           = "revocation_list"             // revocations the registry keeps in all
	LimitRevocationsPerRoot       = "revocations_per_root"        // revocations one root key holds
	LimitRevocationsPerBlock      = "revocations_held_per_block"  // revocations one address block holds
	LimitNodes                    = "nodes"                       // node records the registry keeps in all
	LimitMalformedPerAddress      = "malformed_per_address"       // malformed requests from one client address

	// The aggregates of the per-address limits over one address block (IPv4 /24, IPv6 /48).
	LimitResolvePerBlock       = "resolve_per_block"
	LimitRegisterPerBlock      = "register_per_block"
	LimitInitiatePerBlock      = "initiate_per_block"
	LimitLoginsPerBlock        = "logins_per_block"
	LimitLoginFailuresPerBlock = "login_failures_per_block"
	LimitRevokePerBlock        = "revoke_per_block"
	LimitMalformedPerBlock     = "malformed_per_block"

	LimitBearerSessionsPerBlock = "bearer_sessions_per_block" // live bearer sessions held by one address block
	LimitOpenSessionsPerBlock   = "open_sessions_per_block"   // open binding sessions held by one address block
	LimitNodesPerBlock          = "nodes_per_block"           // node records held by one address block
)

// RateLimits lists every limit name a refusal can carry, so a counter can start each at 0.
var RateLimits = []string{
	LimitResolvePerCode, LimitResolvePerAddress, LimitResolvePerOperator, LimitResolveGlobal, LimitResolvePerNode,
	LimitRegisterPerAddress, LimitInitiatePerAddress, LimitInitiatePerKey, LimitOpenSessionsPerNode, LimitOpenSessions,
	LimitLoginsPerAddress, LimitLoginFailuresPerAddress, LimitLoginFailuresPerOperator,
	LimitBearerSessions, LimitRevokePerAddress, LimitRevocationList, LimitNodes,
	LimitMalformedPerAddress, LimitRevocationsPerRoot, LimitRevocationsPerBlock,
	LimitResolvePerBlock, LimitRegisterPerBlock, LimitInitiatePerBlock, LimitLoginsPerBlock,
	LimitLoginFailuresPerBlock, LimitRevokePerBlock, LimitMalformedPerBlock,
	LimitBearerSessionsPerBlock, LimitOpenSessionsPerBlock, LimitNodesPerBlock,
}

// limitError is a RATE_LIMITED refusal that names the limit which made it, so that the
// observer of the HTTP layer can count refusals by limit without the use cases counting.
type limitError struct {
	limit string
	err   *proto.Error
}

func (e limitError) Error() string { return e.err.Error() }
func (e limitError) Code() string  { return e.err.Code() }
func (e limitError) Unwrap() error { return e.err }
func (e limitError) Limit() string { return e.limit }

// rateLimited returns a RATE_LIMITED error from limit.
func rateLimited(limit, msg string) error {
	return limitError{limit: limit, err: proto.New(proto.RateLimited, msg)}
}

// LimitOf returns the name of the rate limit that refused with err, or "".
func LimitOf(err error) string {
	var le limitError
	if errors.As(err, &le) {
		return le.limit
	}
	return ""
}

// Census is a count of the registry's state at one moment, for a daemon's gauges.
type Census struct {
	// Nodes is the number of node records; Online those seen within DefaultOnlineWindow.
	Nodes, Online int
	// OpenSessions counts the binding sessions not in a terminal state, by state, with
	// expiry applied as on every read. Every non-terminal state is present.
	OpenSessions map[string]int
	// BearerSessions counts the operator sessions that have not expired.
	BearerSessions int
	// ChallengesUsed is the size of the login challenges' used-set, and ChallengeCapacity
	// its bound; both are -1 when the Challenges implementation does not tell.
	ChallengesUsed, ChallengeCapacity int
}

// Census counts the registry's state. It reads every node record and every session, so it
// is for a scrape every few seconds, not for each request.
func (s *Service) Census(ctx context.Context) (Census, error) {
	now := s.now()
	c := Census{OpenSessions: map[string]int{}, ChallengesUsed: -1, ChallengeCapacity: -1}
	for _, st := range []binding.State{binding.Initiated, binding.PendingOperator, binding.PendingNodeAcceptance} {
		c.OpenSessions[st.String()] = 0
	}
	count := func(n *store.Node) error {
		c.Nodes++
		if now.Sub(n.LastSeen) <= DefaultOnlineWindow {
			c.Online++
		}
		return nil
	}
	err := s.store.ScanNodes(ctx, count)
	if err != nil {
		return Census{}, err
	}
	err = s.store.View(ctx, func(tx store.Tx) error {
		err := tx.EachBindingSession(func(sess binding.BindingSession) error {
			if st := binding.ExpireIfDue(sess, now).State; !st.Terminal() {
				c.OpenSessions[st.String()]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.EachBearerSession(func(_ [32]byte, sess authn.BearerSession) error {
			if sess.Check(now) == nil {
				c.BearerSessions++
			}
			return nil
		})
	})
	if err != nil {
		return Census{}, err
	}
	if ch, ok := s.challenges.(interface {
		Used() int
		Capacity() int
	}); ok {
		c.ChallengesUsed, c.ChallengeCapacity = ch.Used(), ch.Capacity()
	}
	return c, nil
}

// pick returns ifBlock when byBlock is set, else ifAddr: the name of the per-block or the
// per-address limit that refused.
func pick(byBlock bool, ifBlock, ifAddr string) string {
	if byBlock {
		return ifBlock
	}
	return ifAddr
}
