package authn

import (
	"fmt"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// VerifyNodeRequest checks a request that a node signed with its own key (heartbeat, poll,
// cancel and the like), in the order of description 5.4 — identity binding, then freshness,
// then signature — stopping at the first failure:
//
//  1. did parses as a did:svrp DID (ID_BINDING_REQUIRED when it is not one at all,
//     ID_BINDING_FAILED when it breaks the grammar), does not carry the operator tag and
//     derives from key (ID_BINDING_FAILED);
//  2. |now − ts| ≤ NodeTSTolerance, with now truncated to the second (STALE_TS);
//  3. sig is key's signature over m under prefix (BAD_SIGNATURE). A message that breaks the
//     injectivity rules gives canonical's BAD_REQUEST error instead.
//
// The caller builds m from the same did and ts it passes here, and finds key (the registered
// key, or one sent with the request) by its own rules.
func VerifyNodeRequest(did string, key didkey.PublicKey, ts int64, now time.Time, prefix string, m canonical.Message, sig string) error {
	d, err := didkey.Parse(did)
	if err != nil {
		return err
	}
	if d.IsOperator() {
		return proto.New(proto.IDBindingFailed, "an operator DID cannot sign as a node")
	}
	if !d.Matches(key) {
		return proto.New(proto.IDBindingFailed, "the node DID does not derive from the node key")
	}
	if !withinTolerance(ts, now.Unix(), int64(NodeTSTolerance/time.Second)) {
		return proto.New(proto.StaleTS, fmt.Sprintf("ts %d is more than %d s from registry time", ts, int64(NodeTSTolerance/time.Second)))
	}
	if m == nil {
		return proto.New(proto.Internal, "no message to verify")
	}
	if err := canonical.Verify(key, prefix, m, sig); err != nil {
		if proto.CodeOf(err) == proto.BadRequest {
			return err
		}
		return proto.New(proto.BadSignature, "node signature does not verify")
	}
	return nil
}

// withinTolerance reports |a − b| ≤ tol for any int64 a and b. The difference is taken in
// uint64, where it cannot overflow.
func withinTolerance(a, b, tol int64) bool {
	if a >= b {
		return uint64(a)-uint64(b) <= uint64(tol)
	}
	return uint64(b)-uint64(a) <= uint64(tol)
}
