package binding

import (
	"fmt"
	"slices"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
)

// CheckAuthorizationShape checks an AuthorizationCredential's fields before anything else
// (docs/protocol.md §5.0): binding_session_id 1–128 characters of [A-Za-z0-9._-]; node_did and
// operator_did free of control characters; task_types at most 64 items of 1–64 bytes, none
// empty or with ','; limits finite in 0..2^53−1; revocation_id 1–256 bytes; issued_at and
// expires_at in the 20-character form. Any failure is BAD_REQUEST naming the field.
func CheckAuthorizationShape(az AuthorizationCredential) error {
	_, _, err := authorizationShape(az.Authorization)
	return err
}

func authorizationShape(m canonical.Authorization) (issued, expires time.Time, err error) {
	if err = checkSessionID("binding_session_id", m.BindingSessionID); err != nil {
		return
	}
	if err = checkStrings("node_did", m.NodeDID, "operator_did", m.OperatorDID); err != nil {
		return
	}
	if err = checkTerms("", m.TaskTypes, m.SingleLimit, m.DailyLimit); err != nil {
		return
	}
	if err = checkText("revocation_id", m.RevocationID, true); err != nil {
		return
	}
	if issued, err = parseTime("issued_at", m.IssuedAt); err != nil {
		return
	}
	expires, err = parseTime("expires_at", m.ExpiresAt)
	return
}

// VerifyAuthorization applies the authorize checks of docs/protocol.md §5.4 that follow the bearer,
// in order, and returns the first failure:
//
//  1. the authorization's shape ([CheckAuthorizationShape], BAD_REQUEST);
//  2. the session, expired if due, is PENDING_OPERATOR (BAD_STATE);
//  3. the credential is for the operator that resolved the session, s.OperatorDID
//     (PERMISSION_DENIED; the registry has checked that the caller is that operator);
//  4. the credential: id-binding, root signature, its operator DID not pinned to another
//     root key on pins, validity window (DC_ID_BINDING → DC_BAD_SIGNATURE → DID_COLLISION →
//     DC_EXPIRED, see [authn.VerifyCredential]; docs/protocol.md §10.8 puts the pin after the
//     root signature);
//  5. the credential grants nodes.bind (PERMISSION_DENIED);
//  6. the authorization names this session, a node DID (any spelling) of the session's node
//     key, and the credential's operator (BAD_REQUEST);
//  7. the authorization is signed over message 7 by the credential's device key
//     (BAD_SIGNATURE);
//  8. issued_at − 5 s ≤ now ≤ expires_at + 5 s (AUTHZ_EXPIRED);
//  9. neither credential is on rl ([CheckRevoked]: DC_REVOKED, then AUTHZ_REVOKED;
//     docs/protocol.md §10.5 puts them after the chain's signature checks and before scope;
//     like login, which checks revocation after the credential's window, they come after the
//     authorization's);
//  10. the grant stays within the request ([CheckScope], SCOPE_EXCEEDED).
//
// Success means Apply(s, Authorize, now) may follow, with dc and az stored on the session.
// pins is asked once, rl once per credential; a nil pins pins nothing, a nil rl revokes
// nothing.
func VerifyAuthorization(s BindingSession, dc authn.DeviceCredential, az AuthorizationCredential, prefix string, now time.Time, pins authn.Pins, rl authn.Revocations) error {
	now = clock(now)
	issued, expires, err := authorizationShape(az.Authorization)
	if err != nil {
		return err
	}
	if _, err := Apply(s, Authorize, now); err != nil {
		return err
	}
	if dc.OperatorDID != s.OperatorDID {
		return ErrPermissionDenied.With("the device credential is not for the operator that resolved the session")
	}
	dev, err := authn.VerifyCredential(dc, prefix, now, pins)
	if err != nil {
		return err
	}
	if !dev.HasPermission(PermissionBind) {
		return ErrPermissionDenied.With("the device credential does not grant " + PermissionBind)
	}
	if err := authorizationNames(s, dc, az.Authorization); err != nil {
		return ErrBadRequest.With("authorization_credential: %w", err)
	}
	device, err := dev.DeviceKey()
	if err != nil {
		return err
	}
	if err := canonical.Verify(device, prefix, az.Authorization, az.Signature); err != nil {
		if proto.CodeOf(err) != proto.BadSignature {
			return err
		}
		return ErrBadSignature.With("the authorization is not signed by the credential's device key")
	}
	if now.Before(issued.Add(-AuthorizationSkew)) {
		return ErrAuthzExpired.With("the authorization is not valid before %s", az.IssuedAt)
	}
	if now.After(expires.Add(AuthorizationSkew)) {
		return ErrAuthzExpired.With("the authorization expired at %s", az.ExpiresAt)
	}
	if err := CheckRevoked(dc, az, rl); err != nil {
		return err
	}
	return CheckScope(s.Request, az.Authorization)
}

// CheckRevoked refuses a credential pair of which either is revoked (docs/protocol.md §10.5): the
// device credential's (operator_did, revocation_id) on rl is DC_REVOKED, else the
// authorization's (operator_did, revocation_id) on rl is AUTHZ_REVOKED. Authorize runs it
// inside [VerifyAuthorization]; accept runs it on the stored pair after [VerifyChain], so a
// revocation that lands while a session waits for the node still stops the binding. A nil
// rl revokes nothing.
func CheckRevoked(dc authn.DeviceCredential, az AuthorizationCredential, rl authn.Revocations) error {
	if err := authn.CheckCredentialRevoked(dc, rl); err != nil {
		return err
	}
	revoked, err := authn.IsRevoked(rl, az.OperatorDID, az.RevocationID)
	if err != nil || !revoked {
		return err
	}
	return ErrAuthzRevoked.With("this authorization has been revoked by its operator")
}

// BindingRevoked reports whether an active binding must end because a credential that made
// it is revoked (docs/protocol.md §10.5): its authorization's or its device credential's
// (operator_did, revocation_id) is on rl. s is the session that created b.
func BindingRevoked(b Binding, s BindingSession, rl authn.Revocations) (bool, error) {
	if revoked, err := authn.IsRevoked(rl, b.OperatorDID, b.RevocationID); err != nil || revoked {
		return revoked, err
	}
	if s.DeviceCredential == nil {
		return false, nil
	}
	return authn.IsRevoked(rl, s.DeviceCredential.OperatorDID, s.DeviceCredential.RevocationID)
}

// authorizationNames checks that an authorization is about this session, its node and the
// credential's operator. The returned error is only a reason; callers give it their code.
func authorizationNames(s BindingSession, dc authn.DeviceCredential, az canonical.Authorization) error {
	return namesSession(s, az.BindingSessionID, az.NodeDID, az.OperatorDID, dc.OperatorDID, "the device credential's operator")
}

// namesSession checks that a message names this session, its node and the operator it must
// come from (whose says which that is). The returned error is only a reason; callers give it
// their code.
func namesSession(s BindingSession, sessionID, nodeDID, operatorDID, operator, whose string) error {
	switch {
	case sessionID != s.ID:
		return fmt.Errorf("binding_session_id does not name this session")
	case !nodeDIDBinds(nodeDID, s.NodeKey):
		return fmt.Errorf("node_did does not name the session's node key")
	case operatorDID != operator:
		return fmt.Errorf("operator_did is not %s", whose)
	}
	return nil
}

// CheckScope reports whether an authorization grants no more than the node requested
// (docs/protocol.md §5.4), else SCOPE_EXCEEDED: every granted task type is one the node requested;
// a requested limit that is not null caps the grant, which must then be non-null and not above
// it; a null requested limit means the node asked for no cap, so any value or null may be
// granted. A limit that is not a number (NaN) never fits a cap.
func CheckScope(requested canonical.BindingSession, granted canonical.Authorization) error {
	for _, t := range granted.TaskTypes {
		if !slices.Contains(requested.RequestedTaskTypes, t) {
			return ErrScopeExceeded.With("task type %q was not requested by the node", clip(t))
		}
	}
	if !withinCap(requested.RequestedSingleLimit, granted.SingleLimit) {
		return ErrScopeExceeded.With("single_limit exceeds the node's requested_single_limit")
	}
	if !withinCap(requested.RequestedDailyLimit, granted.DailyLimit) {
		return ErrScopeExceeded.With("daily_limit exceeds the node's requested_daily_limit")
	}
	return nil
}

func withinCap(requested, granted *float64) bool {
	if requested == nil {
		return true
	}
	return granted != nil && *granted <= *requested
}

// clip shortens untrusted text for an error message.
func clip(s string) string {
	if len(s) > MaxListItemLen {
		return s[:MaxListItemLen]
	}
	return s
}
