package binding

import (
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
)

// CheckAcceptanceShape checks an acceptance's fields before anything else (docs/protocol.md
// §5.0): binding_session_id 1–128 characters of [A-Za-z0-9._-]; node_did, operator_did and
// authorization_digest free of control characters; issued_at in the 20-character form. Any
// failure is BAD_REQUEST naming the field.
func CheckAcceptanceShape(acc Acceptance) error {
	m := acc.Acceptance
	if err := checkSessionID("binding_session_id", m.BindingSessionID); err != nil {
		return err
	}
	if err := checkStrings("node_did", m.NodeDID, "operator_did", m.OperatorDID, "authorization_digest", m.AuthorizationDigest); err != nil {
		return err
	}
	_, err := parseTime("issued_at", m.IssuedAt)
	return err
}

// CheckAcceptance checks that an acceptance answers this session's authorization (docs/protocol.md
// §5.4, accept and node reject), after its shape: binding_session_id is the session's id, node_did
// is a node DID (any spelling) of the session's node key, operator_did is the authorizing
// operator, authorization_digest is the digest of the stored authorization, and accepted is
// the answer the endpoint expects (true to accept, false to reject). Any mismatch is
// BAD_REQUEST and leaves the state as it is. A session without an authorization is BAD_STATE.
//
// The registry checks the session's state first (ALREADY_ACTIVE, BAD_STATE); the signature is
// checked after: by [VerifyChain] on accept, by [VerifyAcceptanceSignature] on reject.
func CheckAcceptance(s BindingSession, acc Acceptance, prefix string, accepted bool) error {
	if err := CheckAcceptanceShape(acc); err != nil {
		return err
	}
	if s.Authorization == nil {
		return ErrBadState.With("the session has no authorization to answer")
	}
	m := acc.Acceptance
	if err := acceptanceNames(s, m); err != nil {
		return badRequest("acceptance: " + err.Error())
	}
	digest, err := s.Authorization.Digest(prefix)
	if err != nil {
		return proto.New(proto.Internal, "the stored authorization cannot be rendered")
	}
	if m.AuthorizationDigest != digest {
		return badRequest("acceptance: authorization_digest is not the digest of the session's authorization")
	}
	if m.Accepted != accepted {
		if accepted {
			return badRequest("acceptance: accepted must be true to accept")
		}
		return badRequest("acceptance: accepted must be false to reject")
	}
	return nil
}

// VerifyAcceptanceSignature checks the node's signature over an acceptance (message 8) with the
// session's node key, else BAD_SIGNATURE. A node reject needs only this; an accept re-verifies
// the whole chain with [VerifyChain].
func VerifyAcceptanceSignature(s BindingSession, acc Acceptance, prefix string) error {
	if err := canonical.Verify(s.NodeKey, prefix, acc.Acceptance, acc.Signature); err != nil {
		if proto.CodeOf(err) != proto.BadSignature {
			return err
		}
		return ErrBadSignature.With("the acceptance is not signed by the session's node key")
	}
	return nil
}

// Activate returns the binding an accepted session creates once [VerifyChain] has passed: the
// node key, the DID the node bound under, the authorizing operator and the limits it granted,
// activated at now. The binding shares no memory with s.
func Activate(s BindingSession, now time.Time) Binding {
	b := Binding{
		NodeKey:     s.NodeKey,
		NodeDID:     s.Request.NodeDID,
		OperatorDID: s.OperatorDID,
		SessionID:   s.ID,
		TaskTypes:   []string{},
		ActivatedAt: clock(now),
	}
	if az := s.Authorization; az != nil {
		b.OperatorDID = az.OperatorDID
		b.TaskTypes = append(b.TaskTypes, az.TaskTypes...)
		b.SingleLimit = cloneLimit(az.SingleLimit)
		b.DailyLimit = cloneLimit(az.DailyLimit)
		b.RevocationID = az.RevocationID
	}
	return b
}

// acceptanceNames checks that an acceptance is about this session, its node and the operator
// that authorized it; the session must hold an authorization. The returned error is only a
// reason; callers give it their code.
func acceptanceNames(s BindingSession, m canonical.Acceptance) error {
	return namesSession(s, m.BindingSessionID, m.NodeDID, m.OperatorDID, s.Authorization.OperatorDID, "the authorizing operator")
}
