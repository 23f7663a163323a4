package authn

import (
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/sigverify"
)

// CheckCredentialShape applies login step 1 (and the first check of every endpoint that
// carries a credential) to the credential's values: no string field holds a control
// character or invalid UTF-8, no permission is empty or contains ",", and the field limits
// of docs/protocol.md §8 hold (credential_id, device_id and revocation_id 1–256 bytes; at most
// 64 permissions of 1–64 bytes). Failures are BAD_REQUEST and name the field.
//
// It judges no content: DIDs, keys and timestamps are left to the steps that use them
// ([VerifyCredential], [VerifyLogin]), which give them their own codes. Whether each field
// was present with the right JSON type is the HTTP layer's check.
func CheckCredentialShape(dc DeviceCredential) error {
	// The names are whole literals so that the check allocates nothing on the success path.
	for _, f := range [...]struct{ name, v string }{
		{"device_credential.credential_id", dc.CredentialID},
		{"device_credential.operator_did", dc.OperatorDID},
		{"device_credential.operator_root_public_key", dc.OperatorRootPublicKey},
		{"device_credential.device_id", dc.DeviceID},
		{"device_credential.device_public_key", dc.DevicePublicKey},
		{"device_credential.issued_at", dc.IssuedAt},
		{"device_credential.expires_at", dc.ExpiresAt},
		{"device_credential.revocation_id", dc.RevocationID},
	} {
		if err := canonical.CheckString(f.name, f.v); err != nil {
			return err
		}
	}
	if err := canonical.CheckList("device_credential.permissions", dc.Permissions); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, v string }{
		{"device_credential.credential_id", dc.CredentialID},
		{"device_credential.device_id", dc.DeviceID},
		{"device_credential.revocation_id", dc.RevocationID},
	} {
		if len(f.v) < 1 || len(f.v) > MaxIDLen {
			return badRequestf("field %s must be 1-%d bytes, not %d", f.name, MaxIDLen, len(f.v))
		}
	}
	if len(dc.Permissions) > MaxPermissions {
		return badRequestf("field device_credential.permissions has %d items, at most %d allowed", len(dc.Permissions), MaxPermissions)
	}
	for _, p := range dc.Permissions {
		if len(p) > MaxPermissionLen { // CheckList has refused empty items
			return badRequestf("field device_credential.permissions has an item of %d bytes, at most %d allowed", len(p), MaxPermissionLen)
		}
	}
	return nil
}

// VerifyCredential applies login steps 2–4 (docs/protocol.md §5.2) to a DeviceCredential, with
// the operator's pin between steps 3 and 4 (§10.8), in order, stopping at the first failure:
//
//  2. operator_root_public_key decodes to a 32-byte key that derives operator_did, which is
//     an o-tagged DID, and neither it nor device_public_key is a key the verification rule
//     refuses (sigverify.KeyAllowed); anything wrong with either string is DC_ID_BINDING;
//  3. signature is the root key's signature over message 2, built from the fields exactly as
//     given (key strings in whatever encoding the credential carries); a malformed or
//     failing signature is DC_BAD_SIGNATURE;
//     then pins: the DID's body must not be pinned to another root key (DID_COLLISION, see
//     [Pins]); a nil pins pins nothing;
//  4. issued_at − 5 s ≤ now ≤ expires_at + 5 s, with now truncated to the second; a
//     timestamp that is not in the 20-character form is DC_EXPIRED.
//
// Callers run [CheckCredentialShape] first, at the point their endpoint orders it. A
// credential that breaks the injectivity rules and gets here anyway fails at step 3 with the
// BAD_REQUEST error of package canonical rather than with a signature code: its bytes are
// undefined, so no signature can be said to fail over them. The device key is not judged
// here; see [Device.DeviceKey].
func VerifyCredential(dc DeviceCredential, prefix string, now time.Time, pins Pins) (Device, error) {
	return verifyCredential(sigverify.Single{}, dc, prefix, now, pins)
}

func verifyCredential(v sigverify.Verifier, dc DeviceCredential, prefix string, now time.Time, pins Pins) (Device, error) {
	did, root, err := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
	if err != nil {
		return Device{}, ErrDCIDBinding.With("device credential: %w", err)
	}
	// docs/protocol.md §5.2: an unparsable credential key is DC_ID_BINDING, the device key
	// included, although only step 6 (or authorize's signature check) verifies under it.
	device, err := didkey.DecodeKey(dc.DevicePublicKey)
	if err != nil {
		return Device{}, ErrDCIDBinding.With("device credential device_public_key: %w", err)
	}
	// A key no signature can be accepted under (docs/protocol.md §1.1) is refused as a key.
	if !sigverify.KeyAllowed(root[:]) || !sigverify.KeyAllowed(device[:]) {
		return Device{}, ErrDCIDBinding.With("device credential key is a small-order point or a non-canonical encoding")
	}
	if err := canonical.VerifyWith(v, root, prefix, dc.DeviceCredential, dc.Signature); err != nil {
		if proto.CodeOf(err) == proto.BadRequest {
			return Device{}, err
		}
		return Device{}, ErrDCBadSignature.With("device credential is not signed by its root key")
	}
	if err := checkPin(pins, did, root); err != nil {
		return Device{}, err
	}
	if err := checkWindow(dc.IssuedAt, dc.ExpiresAt, now); err != nil {
		return Device{}, err
	}
	return Device{OperatorDID: did, RootKey: root, Credential: dc}, nil
}

// checkWindow is step 4. The skew is applied to the bounds rather than to now, so the test
// reads as the protocol writes it.
func checkWindow(issuedAt, expiresAt string, now time.Time) error {
	iss, err := canonical.ParseTime(issuedAt)
	if err != nil {
		return ErrDCExpired.With("device credential issued_at: %w", err)
	}
	exp, err := canonical.ParseTime(expiresAt)
	if err != nil {
		return ErrDCExpired.With("device credential expires_at: %w", err)
	}
	now = now.Truncate(time.Second)
	if now.Before(iss.Add(-CredentialSkew)) {
		return ErrDCExpired.With("device credential is not valid before %s", issuedAt)
	}
	if now.After(exp.Add(CredentialSkew)) {
		return ErrDCExpired.With("device credential expired at %s", expiresAt)
	}
	return nil
}

func badRequestf(format string, args ...any) error {
	return ErrBadRequest.With(format, args...)
}
