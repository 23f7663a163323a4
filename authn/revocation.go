package authn

import (
	"crypto/ed25519"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// RevocationSkew is how far a revocation's revoked_at may lie ahead of the registry's clock
// (docs/protocol.md §10.5). A revocation may lie in the past without limit: an operator may prepare
// one the day the identity is made and send it years later.
const RevocationSkew = 5 * time.Second

// SignedRevocation is the body of POST /v1/auth/revoke (docs/protocol.md §10.5): message 11 and the
// root key's base58 signature over it.
type SignedRevocation struct {
	Revocation canonical.Revocation `json:"revocation"`
	Signature  string               `json:"signature"`
}

// Revoked is what a verified revocation proves: the operator's root key revoked every
// credential of that operator carrying RevocationID. Values come from [VerifyRevocation].
type Revoked struct {
	OperatorDID  string
	RootKey      didkey.PublicKey
	RevocationID string
	RevokedAt    time.Time
}

// Revocations answers whether the pair (operator_did, revocation_id) is revoked. The
// registry passes a lookup in its store, inside the transaction that acts on the answer; a
// nil Revocations revokes nothing. An error is the list's own failure, passed through.
type Revocations interface {
	Revoked(operatorDID, revocationID string) (bool, error)
}

// IsRevoked asks rl whether the pair (operatorDID, revocationID) is revoked; a nil rl revokes
// nothing.
func IsRevoked(rl Revocations, operatorDID, revocationID string) (bool, error) {
	if rl == nil {
		return false, nil
	}
	return rl.Revoked(operatorDID, revocationID)
}

// RevocationFunc adapts a function to [Revocations].
type RevocationFunc func(operatorDID, revocationID string) (bool, error)

// Revoked implements [Revocations].
func (f RevocationFunc) Revoked(operatorDID, revocationID string) (bool, error) {
	return f(operatorDID, revocationID)
}

// RevocationSet is a fixed list of revoked pairs, keyed by [RevocationKey]; for tests and
// for callers that hold the list in memory.
type RevocationSet map[RevocationKey]bool

// RevocationKey is one revoked pair.
type RevocationKey struct{ OperatorDID, RevocationID string }

// Revoked implements [Revocations].
func (s RevocationSet) Revoked(operatorDID, revocationID string) (bool, error) {
	return s[RevocationKey{operatorDID, revocationID}], nil
}

// CheckRevocationShape applies the first check of POST /v1/auth/revoke (docs/protocol.md §10.5):
// every field free of control characters and valid UTF-8, revocation_id 1–256 bytes, revoked_at in
// the 20-character form and not more than [RevocationSkew] ahead of now. Failures are
// BAD_REQUEST naming the field. Whether each field was present as a string is the HTTP
// layer's check.
func CheckRevocationShape(r SignedRevocation, now time.Time) error {
	m := r.Revocation
	for _, f := range [...]struct{ name, v string }{
		{"revocation.operator_did", m.OperatorDID},
		{"revocation.operator_root_public_key", m.OperatorRootPublicKey},
		{"revocation.revocation_id", m.RevocationID},
		{"revocation.revoked_at", m.RevokedAt},
	} {
		if err := canonical.CheckString(f.name, f.v); err != nil {
			return err
		}
	}
	if len(m.RevocationID) < 1 || len(m.RevocationID) > MaxIDLen {
		return badRequestf("field revocation.revocation_id must be 1-%d bytes, not %d", MaxIDLen, len(m.RevocationID))
	}
	at, err := canonical.ParseTime(m.RevokedAt)
	if err != nil {
		return badRequestf("field revocation.revoked_at: %v", err)
	}
	if at.After(now.UTC().Truncate(time.Second).Add(RevocationSkew)) {
		return badRequestf("field revocation.revoked_at lies more than %d s ahead of registry time", int(RevocationSkew/time.Second))
	}
	return nil
}

// VerifyRevocation applies the checks of POST /v1/auth/revoke (docs/protocol.md §10.5) in order,
// stopping at the first failure:
//
//  1. [CheckRevocationShape] (BAD_REQUEST);
//  2. operator_root_public_key decodes to a key that derives operator_did, an o-tagged DID
//     (DC_ID_BINDING);
//  3. the root key's signature over message 11, the key string exactly as given
//     (DC_BAD_SIGNATURE).
//
// No bearer is involved: the root key's signature is the authority, which is what lets a
// revocation be prepared offline and sent by anyone who holds it.
func VerifyRevocation(r SignedRevocation, prefix string, now time.Time) (Revoked, error) {
	if err := CheckRevocationShape(r, now); err != nil {
		return Revoked{}, err
	}
	m := r.Revocation
	did, root, err := didkey.CheckOperator(m.OperatorDID, m.OperatorRootPublicKey)
	if err != nil {
		return Revoked{}, ErrDCIDBinding.With("revocation: %w", err)
	}
	if err := canonical.Verify(root, prefix, m, r.Signature); err != nil {
		if proto.CodeOf(err) == proto.BadRequest {
			return Revoked{}, err
		}
		return Revoked{}, ErrDCBadSignature.With("the revocation is not signed by the operator's root key")
	}
	at, _ := canonical.ParseTime(m.RevokedAt) // CheckRevocationShape parsed it
	return Revoked{OperatorDID: did.String(), RootKey: root, RevocationID: m.RevocationID, RevokedAt: at}, nil
}

// SignRevocation builds and signs a revocation with the operator's root key, offline. The
// operator DID and the root key string should be those of the credentials it revokes (a
// revocation matches on operator_did); an empty operatorDID is derived from the root key in
// its short form, and the key is written in base58. revokedAt is truncated to the second.
func SignRevocation(root ed25519.PrivateKey, prefix, operatorDID, rootKey, revocationID string, revokedAt time.Time) (SignedRevocation, error) {
	if len(root) != ed25519.PrivateKeySize {
		return SignedRevocation{}, ErrBadRequest.With("the root key is not an Ed25519 private key")
	}
	pub, err := didkey.KeyFromEd25519(root.Public().(ed25519.PublicKey))
	if err != nil {
		return SignedRevocation{}, err
	}
	if rootKey == "" {
		rootKey = pub.Base58()
	}
	if operatorDID == "" {
		d, err := didkey.OperatorDID(pub, didkey.FormShort)
		if err != nil {
			return SignedRevocation{}, err
		}
		operatorDID = d.String()
	}
	if _, k, err := didkey.CheckOperator(operatorDID, rootKey); err != nil || k != pub {
		return SignedRevocation{}, ErrDCIDBinding.With("%s with key %s is not this root key's operator identity", operatorDID, rootKey)
	}
	m := canonical.Revocation{
		OperatorDID: operatorDID, OperatorRootPublicKey: rootKey,
		RevocationID: revocationID, RevokedAt: canonical.FormatTime(revokedAt),
	}
	sig, err := canonical.Sign(root, prefix, m)
	if err != nil {
		return SignedRevocation{}, err
	}
	return SignedRevocation{Revocation: m, Signature: sig}, nil
}

// CheckCredentialRevoked is the revocation check of login and authorize (docs/protocol.md §10.5):
// the credential's (operator_did, revocation_id) is on the list → DC_REVOKED. Callers run it
// after [VerifyCredential], so the pair is one the root key vouched for.
func CheckCredentialRevoked(dc DeviceCredential, rl Revocations) error {
	revoked, err := IsRevoked(rl, dc.OperatorDID, dc.RevocationID)
	if err != nil || !revoked {
		return err
	}
	return ErrDCRevoked.With("this device credential has been revoked by its operator")
}
