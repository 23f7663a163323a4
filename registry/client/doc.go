// Package client is the reference Go client of an svrp registry: every endpoint of the wire
// protocol (docs/protocol.md §5), the client-side behaviour of §9, and the signing steps of both
// sides of the binding handshake, so that no caller rebuilds canonical bytes by hand.
//
// It imports the wire types (registry/api) and the protocol codes (proto), never the server
// or a store: a program that only talks to a registry builds without Badger.
//
// # Three kinds of caller
//
// A [Client] talks to one registry. It reads the public node table ([Client.Nodes],
// [Client.OnlineNodes], [Client.Peers]) and sends already-signed requests, one method per
// endpoint, with the request and response types of registry/api.
//
// A [Node] holds a node's private key and signs what a node sends: [Node.Register],
// [Node.Heartbeat], [Node.Initiate], [Node.Pending], [Node.Accept], [Node.Reject] and
// [Node.Cancel].
//
// An [Operator] is a logged-in operator. [IssueDeviceCredential] runs once, offline, with the
// root key; [Client.Login] turns the device key and that credential into an Operator, whose
// [Operator.ResolveNode] shows what a short code of a named node asks for and
// [Operator.Authorize] grants it.
//
// A whole binding, with the node on one machine and the operator on another:
//
//	node:      res, _ := node.Initiate(ctx, client.InitiateOptions{TaskTypes: []string{"inference"}})
//	           show res.ShortCode, node.DID and node.PublicKey().Fingerprint() on the node's screen
//	operator:  view, _ := op.ResolveNode(ctx, did, code) // compare view.NodePublicKeyFingerprint
//	           op.Authorize(ctx, view, client.Requested(view))
//	node:      p, _ := node.WaitForAuthorization(ctx, res.BindingSessionID, 2*time.Second)
//	           node.Accept(ctx, p)                     // the session is ACTIVE
//
// # Errors
//
// Every error a caller may branch on has a Code method returning a protocol code, read with
// [CodeOf] and compared with the constants of package proto (proto.NoSession, ...):
//
//   - [*Error]: the registry answered with an error body; Code is its code (NO_SESSION,
//     BAD_STATE, ...), Status its HTTP status.
//   - [*TransportError]: no answer at all (DNS, TLS, time-out, refused connection); code
//     TRANSPORT_ERROR, errors.Is(err, [ErrTransport]).
//   - [*NotYetWiredError]: [Operator.Balance] refuses to read a credits view whose source is
//     not "ledger"; code NOT_YET_WIRED, with the level and the raw envelope.
//   - Checks the client makes before sending (a key that does not match its DID or
//     credential, an authorization that does not verify) carry the code the registry would
//     have answered.
//
// Branch on the code, which is the same whether the registry refused or the client did. A
// check the client makes with the pure packages returns their errors, which errors.Is also
// matches against their sentinels (binding.ErrBadSignature, ...); an answer of the registry
// is an [*Error], which matches no sentinel, since the wire carries a code and not the
// identity of the error behind it.
//
// # Retries
//
// HTTP 429, 5xx and network errors are retried with exponential backoff and full jitter:
// base 250 ms, cap 5 s, 2 retries by default ([WithRetry] changes it). No other 4xx is ever
// retried. Requests that cannot be repeated as they are (a device login, whose challenge the
// registry consumed; an initiate, whose session id is spent) are retried as a whole, with a
// fresh challenge or session id.
//
// # What the client checks
//
// Discovery keeps only records whose DID derives from their key (id-binding) and drops the
// rest; [Client.AuditNodes] reports what it dropped. A registry records what nodes claim and
// vouches for none of it: an endpoint or a capability is a claim, not proof. A node verifies
// an authorization's whole chain before it accepts ([Node.VerifyPending]), and an operator's
// client checks that the fingerprint shown belongs to the key it authorizes ([CheckView]).
//
// # Secrets
//
// Private keys, session tokens, binding tokens and short codes appear in no error text, and
// [Node] and [Operator] print without them. The short code is a secret until the operator has
// used it; showing it on the node's own screen is its purpose.
package client
