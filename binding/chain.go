package binding

import (
	"errors"
	"fmt"
	"slices"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/sigverify"
)

// Link names one link of the four-signature chain (description 5.3), in the order
// [VerifyChain] checks them.
type Link uint8

// Links. Do not reorder: the numbers appear in error texts.
const (
	LinkInvalid          Link = iota
	LinkSession               // message 6, the node's description of itself, signed by the node key
	LinkDeviceCredential      // message 2, the device credential, signed by the operator's root key
	LinkAuthorization         // message 7, the authorization, signed by the device key
	LinkAcceptance            // message 8, the node's acceptance, signed by the node key
	numLinks
)

var linkNames = [...]string{
	LinkSession:          "node session",
	LinkDeviceCredential: "device credential",
	LinkAuthorization:    "authorization",
	LinkAcceptance:       "acceptance",
}

func (l Link) String() string { return enumName(linkNames[:], l, "Link") }

// ChainError is a chain that does not verify: the first failing link and why. It carries the
// code BAD_SIGNATURE (docs/protocol.md §5.4: any failure of the re-verification answers 401
// BAD_SIGNATURE) and matches [ErrBadSignature] under errors.Is.
type ChainError struct {
	Link   Link
	Reason string
	// Err is the failure behind Reason; it may wrap the error of the shape or scope check
	// that refused the link.
	Err error
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("chain link %d (%s) does not verify: %s", uint8(e.Link), e.Link, e.Reason)
}

// Unwrap returns the failure behind the reason.
func (e *ChainError) Unwrap() error { return e.Err }

// Code returns BAD_SIGNATURE.
func (e *ChainError) Code() string { return string(proto.BadSignature) }

// Is reports whether target is a protocol error with the code BAD_SIGNATURE.
func (e *ChainError) Is(target error) bool {
	t, ok := target.(interface{ Code() string })
	return ok && t.Code() == string(proto.BadSignature)
}

// VerifyChain re-verifies, together, everything that makes a session's binding legitimate, as
// an accept must before the session may become ACTIVE (description 5.3, docs/protocol.md §5.4).
// Each of the binding messages (6, 7, 8) must also be well-formed, as its own shape check says, so
// a chain that verifies is one the endpoints would have accepted:
//
//  1. node session: the request's node_did derives from the node key, and node_signature
//     verifies over message 6 (the key in base58);
//  2. device credential: it is for the operator that resolved the session, its operator_did
//     derives from its root key (operator id-binding), the root key's signature verifies over
//     message 2, and it grants nodes.bind. Its validity window is not checked again: it was
//     checked at authorize, and a credential that expires later does not undo a consent given
//     while it was valid;
//  3. authorization: it names the session, the node key and the credential's operator, the
//     device key's signature verifies over message 7, and the grant stays within the request
//     ([CheckScope]);
//  4. acceptance: it names the session, the node key and the authorizing operator, accepts,
//     carries the digest of this authorization, and the node's signature verifies over
//     message 8.
//
// The first failure is returned as a [*ChainError] naming its link. VerifyChain reads only
// its arguments: no clock, no state. The four signatures are checked together, with one
// batch equation (sigverify.VerifyBatch), once everything else holds; only a chain that
// fails is checked again one signature at a time, so that the error names the link a
// one-by-one check would.
func VerifyChain(s BindingSession, acc Acceptance, prefix string) error {
	var later deferred
	if checkChain(s, acc, prefix, &later) == nil {
		ok := make([]bool, len(later.entries))
		sigverify.VerifyBatch(later.entries, ok)
		if !slices.Contains(ok, false) {
			return nil
		}
	}
	return checkChain(s, acc, prefix, sigverify.Single{})
}

// checkChain checks the links in order with v and returns the first failure.
func checkChain(s BindingSession, acc Acceptance, prefix string, v sigverify.Verifier) error {
	if err := verifySessionLink(s, prefix, v); err != nil {
		return &ChainError{Link: LinkSession, Reason: err.Error(), Err: err}
	}
	if err := verifyCredentialLink(s, prefix, v); err != nil {
		return &ChainError{Link: LinkDeviceCredential, Reason: err.Error(), Err: err}
	}
	if err := verifyAuthorizationLink(s, prefix, v); err != nil {
		return &ChainError{Link: LinkAuthorization, Reason: err.Error(), Err: err}
	}
	if err := verifyAcceptanceLink(s, acc, prefix, v); err != nil {
		return &ChainError{Link: LinkAcceptance, Reason: err.Error(), Err: err}
	}
	return nil
}

// deferred is a Verifier that passes every signature and keeps it, to be checked later.
type deferred struct{ entries []sigverify.Entry }

func (d *deferred) Verify(pub, msg, sig []byte) bool {
	d.entries = append(d.entries, sigverify.Entry{Key: pub, Msg: msg, Sig: sig})
	return true
}

// Each link check returns why it fails, or nil when it holds.

func verifySessionLink(s BindingSession, prefix string, v sigverify.Verifier) error {
	m := s.Request
	if _, _, err := checkInitiateShape(InitiateRequest{BindingSession: m}); err != nil {
		return fmt.Errorf("the description is malformed: %w", err)
	}
	if m.BindingSessionID != s.ID {
		return errors.New("the signed description names another session")
	}
	if !nodeDIDBinds(m.NodeDID, s.NodeKey) {
		return errors.New("node_did does not derive from the node key")
	}
	if b58 := s.NodeKey.Base58(); m.NodePublicKey != b58 {
		if k, err := didkey.DecodeKey(m.NodePublicKey); err != nil || k != s.NodeKey {
			return errors.New("node_public_key is not the session's node key")
		}
		m.NodePublicKey = b58
	}
	if canonical.VerifyWith(v, s.NodeKey, prefix, m, s.NodeSignature) != nil {
		return errors.New("node_signature does not verify over the session description")
	}
	return nil
}

func verifyCredentialLink(s BindingSession, prefix string, v sigverify.Verifier) error {
	dc := s.DeviceCredential
	if dc == nil {
		return errors.New("the session holds no device credential")
	}
	if dc.OperatorDID != s.OperatorDID {
		return errors.New("the credential is not for the operator that resolved the session")
	}
	_, root, err := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
	if err != nil {
		return errors.New("operator_did does not derive from operator_root_public_key")
	}
	if canonical.VerifyWith(v, root, prefix, dc.DeviceCredential, dc.Signature) != nil {
		return errors.New("the credential is not signed by the operator's root key")
	}
	if !slices.Contains(dc.Permissions, PermissionBind) {
		return errors.New("the credential does not grant " + PermissionBind)
	}
	return nil
}

func verifyAuthorizationLink(s BindingSession, prefix string, v sigverify.Verifier) error {
	az := s.Authorization
	if az == nil {
		return errors.New("the session holds no authorization")
	}
	if _, _, err := authorizationShape(az.Authorization); err != nil {
		return fmt.Errorf("the authorization is malformed: %w", err)
	}
	if err := authorizationNames(s, *s.DeviceCredential, az.Authorization); err != nil {
		return err
	}
	device, err := didkey.DecodeKey(s.DeviceCredential.DevicePublicKey)
	if err != nil {
		return errors.New("the credential's device_public_key is not a key")
	}
	if canonical.VerifyWith(v, device, prefix, az.Authorization, az.Signature) != nil {
		return errors.New("the authorization is not signed by the credential's device key")
	}
	if err := CheckScope(s.Request, az.Authorization); err != nil {
		return errors.New("the grant exceeds what the node requested")
	}
	return nil
}

func verifyAcceptanceLink(s BindingSession, acc Acceptance, prefix string, v sigverify.Verifier) error {
	if err := CheckAcceptanceShape(acc); err != nil {
		return fmt.Errorf("the acceptance is malformed: %w", err)
	}
	az, m := s.Authorization, acc.Acceptance
	if err := acceptanceNames(s, m); err != nil {
		return err
	}
	if !m.Accepted {
		return errors.New("the acceptance does not accept")
	}
	digest, err := az.Digest(prefix)
	if err != nil || m.AuthorizationDigest != digest {
		return errors.New("authorization_digest is not the digest of the session's authorization")
	}
	if canonical.VerifyWith(v, s.NodeKey, prefix, m, acc.Signature) != nil {
		return errors.New("the acceptance is not signed by the node key")
	}
	return nil
}
