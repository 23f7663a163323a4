package binding

import (
	"slices"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// InitiateRequest is the body of POST /v1/bindings/initiate: the node's signed description
// (message 6) and its signature. NodePublicKey may be hex or base58; the signed bytes always
// carry it in base58.
type InitiateRequest struct {
	canonical.BindingSession
	NodeSignature string `json:"node_signature"`
}

// ValidateInitiate checks an initiate request in the order of docs/protocol.md §5.4 and returns the
// node's key. The first failing check decides the code:
//
//  1. well-formed (BAD_REQUEST): binding_session_id 1–128 characters of [A-Za-z0-9._-];
//     node_did and node_public_key free of control characters; device_summary, os and region
//     at most 256 bytes when present; nonce present and 1–256 bytes; requested_task_types at
//     most 64 items of 1–64 bytes, none empty or with ','; limits finite in 0..2^53−1;
//     created_at and expires_at in the 20-character form;
//  2. node_did is a node DID that derives from node_public_key (ID_BINDING_REQUIRED or
//     ID_BINDING_FAILED, see package didkey);
//  3. 0 < expires_at − created_at ≤ 600 s (TTL_TOO_LONG);
//  4. expires_at > now (ALREADY_EXPIRED);
//  5. created_at ≤ now + 300 s (BAD_REQUEST: a session may not be post-dated);
//  6. node_signature verifies over message 6 with the key in base58 (BAD_SIGNATURE).
//
// The registry then checks that the id was never used (SESSION_EXISTS) and the node's open
// sessions ([MaxOpenSessionsPerNode]), which need the store.
func ValidateInitiate(req InitiateRequest, prefix string, now time.Time) (didkey.PublicKey, error) {
	key, err := CheckInitiate(req, now)
	if err != nil {
		return didkey.PublicKey{}, err
	}
	if err := VerifyInitiateSignature(req, key, prefix); err != nil {
		return didkey.PublicKey{}, err
	}
	return key, nil
}

// CheckInitiate makes steps 1–5 of [ValidateInitiate], everything but the signature, and
// returns the node's key: a registry can then refuse an initiate over a budget of that key
// before it spends a verification on it.
func CheckInitiate(req InitiateRequest, now time.Time) (didkey.PublicKey, error) {
	var none didkey.PublicKey
	now = clock(now)
	created, expires, err := checkInitiateShape(req)
	if err != nil {
		return none, err
	}
	_, key, err := didkey.CheckNode(req.NodeDID, req.NodePublicKey)
	if err != nil {
		return none, err
	}
	if ttl := expires.Sub(created); ttl <= 0 || ttl > MaxSessionTTL {
		return none, ErrTTLTooLong.With("expires_at - created_at must be more than 0 and at most 600 seconds")
	}
	if !expires.After(now) {
		return none, ErrAlreadyExpired.With("expires_at is already past")
	}
	if created.After(now.Add(MaxPostDating)) {
		return none, badRequest("created_at is more than 300 seconds ahead of the registry's clock")
	}
	return key, nil
}

// VerifyInitiateSignature makes step 6 of [ValidateInitiate]: node_signature verifies over
// message 6 with key (which [CheckInitiate] returned) in base58.
func VerifyInitiateSignature(req InitiateRequest, key didkey.PublicKey, prefix string) error {
	signed := req.BindingSession
	signed.NodePublicKey = key.Base58()
	if err := canonical.Verify(key, prefix, signed, req.NodeSignature); err != nil {
		if proto.CodeOf(err) != proto.BadSignature {
			return err
		}
		return ErrBadSignature.With("node_signature does not verify over the session description")
	}
	return nil
}

// checkInitiateShape is step 1 of ValidateInitiate, in the order of the message's fields.
func checkInitiateShape(req InitiateRequest) (created, expires time.Time, err error) {
	m := req.BindingSession
	if err = checkSessionID("binding_session_id", m.BindingSessionID); err != nil {
		return
	}
	if err = checkStrings("node_did", m.NodeDID, "node_public_key", m.NodePublicKey); err != nil {
		return
	}
	for _, f := range [...]struct{ name, value string }{
		{"device_summary", m.DeviceSummary}, {"os", m.OS}, {"region", m.Region},
	} {
		if err = checkText(f.name, f.value, false); err != nil {
			return
		}
	}
	if err = checkTerms("requested_", m.RequestedTaskTypes, m.RequestedSingleLimit, m.RequestedDailyLimit); err != nil {
		return
	}
	if err = checkText("nonce", m.Nonce, true); err != nil {
		return
	}
	if created, err = parseTime("created_at", m.CreatedAt); err != nil {
		return
	}
	expires, err = parseTime("expires_at", m.ExpiresAt)
	return
}

// NewBindingSession returns the INITIATED session for a request that passed [ValidateInitiate] with
// key, storing only the hashes of its short code and binding token. The stored request carries
// the key in base58, the form it was signed in, so the session re-verifies on its own; it
// shares no memory with req.
func NewBindingSession(req InitiateRequest, key didkey.PublicKey, codeHash, tokenHash [32]byte, now time.Time) BindingSession {
	r := req.BindingSession
	r.NodePublicKey = key.Base58()
	r.RequestedTaskTypes = slices.Clone(r.RequestedTaskTypes)
	r.RequestedSingleLimit = cloneLimit(r.RequestedSingleLimit)
	r.RequestedDailyLimit = cloneLimit(r.RequestedDailyLimit)
	created, _ := canonical.ParseTime(r.CreatedAt)
	expires, _ := canonical.ParseTime(r.ExpiresAt)
	return BindingSession{
		ID:            r.BindingSessionID,
		State:         Initiated,
		NodeKey:       key,
		Request:       r,
		NodeSignature: req.NodeSignature,
		CreatedAt:     created,
		ExpiresAt:     expires,
		CodeHash:      codeHash,
		TokenHash:     tokenHash,
		UpdatedAt:     clock(now),
	}
}

func cloneLimit(v *float64) *float64 {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}
