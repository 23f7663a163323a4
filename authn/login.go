package authn

import (
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/sigverify"
)

// VerifyLogin applies the checks of POST /v1/auth/device-login (docs/protocol.md §5.2, with
// §10.8 and §10.5) in order and stops at the first failure, so the error carries the code of
// the earliest failing check:
//
//  1. [CheckCredentialShape] (BAD_REQUEST);
//  2. the credential's id-binding (DC_ID_BINDING);
//  3. the credential's root signature over message 2 (DC_BAD_SIGNATURE);
//     then pins: the operator DID must not be pinned to another root key (DID_COLLISION,
//     §10.8);
//  4. the credential's window (DC_EXPIRED) — steps 2 to 4 and the pin are [VerifyCredential];
//     then rl: the credential's (operator_did, revocation_id) must not be revoked
//     (DC_REVOKED, §10.5);
//  5. ch.Consume(challenge): the challenge is consumed here, before step 6, so an attempt that
//     fails at step 6 burns it (BAD_CHALLENGE); a failure before step 5 leaves it usable;
//  6. the login signature by device_public_key over message 1 {operator_did,
//     device_public_key exactly as the credential carries it, challenge, issued_at}
//     (BAD_SIGNATURE). An issued_at that is not exactly the 20-character form fails here
//     too, with BAD_SIGNATURE; a device_public_key that does not decode never gets here
//     (step 2, DC_ID_BINDING).
//
// pins and rl are the registry's state, asked only of a credential its root key signed; nil
// pins or rl passes. §10.8 pins the operator DID of every login that passed step 3, whatever
// comes after: a caller that pins learns that a login got that far from pins being asked
// and answering nil — every failure after that (DC_EXPIRED, DC_REVOKED, BAD_CHALLENGE,
// BAD_SIGNATURE) comes from a login that passed step 3, and every failure before it from
// one that did not. An error of pins, rl or ch that is not a refusal reaches the caller
// unchanged.
//
// The login's challenge and issued_at are not judged at step 1: the challenge can only pass
// step 5 if this registry issued it, and issued_at belongs to step 6 (description 5.2:
// "Milliseconds or an offset fail verification").
//
// The login's issued_at is only signed, never compared with the clock: the protocol sets no
// window for it, and freshness is already the single-use challenge's job, which expires
// ChallengeTTL after issue.
//
// On success it returns the verified Device; on failure the zero Device.
func VerifyLogin(l Login, prefix string, now time.Time, ch Challenges, pins Pins, rl Revocations) (Device, error) {
	return VerifyLoginWith(sigverify.Single{}, l, prefix, now, ch, pins, rl)
}

// VerifyLoginWith is [VerifyLogin] with both signatures checked by v, a sigverify.Batcher
// for instance, which judges by the same rule.
func VerifyLoginWith(v sigverify.Verifier, l Login, prefix string, now time.Time, ch Challenges, pins Pins, rl Revocations) (Device, error) {
	if err := CheckCredentialShape(l.DeviceCredential); err != nil {
		return Device{}, err
	}
	dev, err := verifyCredential(v, l.DeviceCredential, prefix, now, pins)
	if err != nil {
		return Device{}, err
	}
	if err := CheckCredentialRevoked(l.DeviceCredential, rl); err != nil {
		return Device{}, err
	}
	if ch == nil {
		return Device{}, proto.New(proto.Internal, "no challenge store configured")
	}
	if err := ch.Consume(l.Challenge, now); err != nil {
		return Device{}, err
	}
	if err := verifyLoginSignature(v, l, prefix); err != nil {
		return Device{}, err
	}
	return dev, nil
}

// verifyLoginSignature is step 6. Every failure in it is BAD_SIGNATURE, whatever part of the
// signed message was to blame: a signature over a malformed issued_at or under a key that
// does not decode cannot be valid.
func verifyLoginSignature(v sigverify.Verifier, l Login, prefix string) error {
	if _, err := canonical.ParseTime(l.IssuedAt); err != nil {
		return ErrBadSignature.With("login issued_at: %w", err)
	}
	dc := l.DeviceCredential
	key, err := didkey.DecodeKey(dc.DevicePublicKey)
	if err != nil {
		return ErrBadSignature.With("device_public_key: %w", err)
	}
	m := canonical.Login{
		OperatorDID:     dc.OperatorDID,
		DevicePublicKey: dc.DevicePublicKey,
		Challenge:       l.Challenge,
		IssuedAt:        l.IssuedAt,
	}
	if err := canonical.VerifyWith(v, key, prefix, m, l.Signature); err != nil {
		return ErrBadSignature.With("login signature does not verify under the device key")
	}
	return nil
}
