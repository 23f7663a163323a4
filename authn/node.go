package authn

import (
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/sigverify"
)

// NodeMessage is a message a node signs with its own key about itself. It names the node's
// DID and carries the node's ts, so a check reads both from the message that is signed rather
// than from arguments that could disagree with it. canonical's Heartbeat, Poll, Cancel and
// Unbind are NodeMessages.
type NodeMessage interface {
	canonical.Message
	Signer() (did string, ts int64)
}

// NodeChecker checks requests that a node signed with its own key (heartbeat, poll, cancel,
// unbind). Like x/crypto/ssh's CertChecker it holds what every check shares — the signing
// domain and the clock — so that a check takes only the request's own parts.
type NodeChecker struct {
	// Prefix is the domain prefix the messages are signed under.
	Prefix string
	// Clock returns the registry's time. It must be set: this package reads no clock of its
	// own, and a checker without one refuses every request (INTERNAL).
	Clock func() time.Time
	// Verifier checks the signatures; nil checks each alone (sigverify.Single).
	Verifier sigverify.Verifier
}

// Check verifies a node-signed message m and its signature sig under key, in the order of
// description 5.4 — identity binding, then freshness, then signature — stopping at the first
// failure:
//
//  1. the DID m names parses as a did:svrp DID (ID_BINDING_REQUIRED when it is not one at
//     all, ID_BINDING_FAILED when it breaks the grammar), does not carry the operator tag and
//     derives from key (ID_BINDING_FAILED);
//  2. |now − ts| ≤ NodeTSTolerance for the ts m carries, with now from Clock truncated to the
//     second (STALE_TS);
//  3. sig is key's signature over m under Prefix (BAD_SIGNATURE). A message that breaks the
//     injectivity rules gives canonical's BAD_REQUEST error instead.
//
// The caller finds key (the registered key, or one sent with the request) by its own rules.
func (c *NodeChecker) Check(key didkey.PublicKey, m NodeMessage, sig string) error {
	if m == nil {
		return proto.New(proto.Internal, "no message to verify")
	}
	did, _ := m.Signer()
	d, err := didkey.Parse(did)
	if err != nil {
		return err
	}
	if d.IsOperator() {
		return didkey.ErrBindingFailed.With("an operator DID cannot sign as a node")
	}
	if !d.Matches(key) {
		return didkey.ErrBindingFailed.With("the node DID does not derive from the node key")
	}
	return c.CheckBound(key, m, sig)
}

// CheckBound makes steps 2 and 3 of [NodeChecker.Check] — freshness, then signature — for a
// caller that has made step 1 itself: it parsed the node DID that m names and reached key
// through it (looked up the key registered under that DID, or bound a key sent with the
// request). A registry that must parse the DID anyway to find the key so checks the
// binding once, not twice.
func (c *NodeChecker) CheckBound(key didkey.PublicKey, m NodeMessage, sig string) error {
	if m == nil {
		return proto.New(proto.Internal, "no message to verify")
	}
	if c.Clock == nil {
		return proto.New(proto.Internal, "the node checker has no clock")
	}
	_, ts := m.Signer()
	if !c.Fresh(ts) {
		return ErrStaleTS.With("ts %d is more than %d s from registry time", ts, int64(NodeTSTolerance/time.Second))
	}
	v := c.Verifier
	if v == nil {
		v = sigverify.Single{}
	}
	if err := canonical.VerifyWith(v, key, c.Prefix, m, sig); err != nil {
		if proto.CodeOf(err) == proto.BadRequest {
			return err
		}
		return ErrBadSignature.With("node signature does not verify")
	}
	return nil
}

// Fresh reports whether ts is within NodeTSTolerance of the checker's clock, step 2 of
// [NodeChecker.Check]; without a clock, nothing is.
func (c *NodeChecker) Fresh(ts int64) bool {
	return c.Clock != nil && withinTolerance(ts, c.Clock().Unix(), int64(NodeTSTolerance/time.Second))
}

// withinTolerance reports |a − b| ≤ tol for any int64 a and b. The difference is taken in
// uint64, where it cannot overflow.
func withinTolerance(a, b, tol int64) bool {
	if a >= b {
		return uint64(a)-uint64(b) <= uint64(tol)
	}
	return uint64(b)-uint64(a) <= uint64(tol)
}
