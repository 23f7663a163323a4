package authn

import (
	"crypto/sha256"
	"io"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/proto"
)

// tokenLen is the number of random bytes in a session token (docs/protocol.md §1).
const tokenLen = 32

// maxBearerToken bounds the token ParseBearer accepts; ours are at most 44 characters, and
// anything much longer cannot name a session.
const maxBearerToken = 256

// NewToken draws a session token: base58 of 32 bytes from rand (normally crypto/rand.Reader).
// It returns the token, which goes to the client once and is kept nowhere, and its
// [HashToken], under which the caller stores the [BearerSession].
func NewToken(rand io.Reader) (string, [32]byte, error) {
	if rand == nil {
		return "", [32]byte{}, proto.New(proto.Internal, "no random source for session tokens")
	}
	var b [tokenLen]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", [32]byte{}, proto.New(proto.Internal, "reading random bytes for a session token failed")
	}
	tok := base58.Encode(b[:])
	return tok, HashToken(tok), nil
}

// HashToken returns the SHA-256 of the token's text, the only form in which a registry keeps
// it. Looking a session up by this hash needs no constant-time comparison: finding the entry
// reveals nothing about the token beyond the hash, which is preimage-resistant.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// NewBearerSession starts a session for operatorDID at now, truncated to the second. It ends
// exactly SessionTTL later and cannot be extended.
func NewBearerSession(operatorDID string, now time.Time) BearerSession {
	iss := now.UTC().Truncate(time.Second)
	return BearerSession{OperatorDID: operatorDID, IssuedAt: iss, ExpiresAt: iss.Add(SessionTTL)}
}

// Check reports whether the session is still valid at now (truncated to the second): from
// ExpiresAt on — exactly SessionTTL after issue — it is SESSION_EXPIRED. A zero Session, the
// value of a lookup that found nothing, is NO_SESSION.
func (s BearerSession) Check(now time.Time) error {
	if s.ExpiresAt.IsZero() {
		return ErrNoSession
	}
	if !now.Truncate(time.Second).Before(s.ExpiresAt) {
		return ErrSessionExpired.With("session expired; log in again")
	}
	return nil
}

// Operator is the operator a live bearer session vouches for. The registry's operator actions
// take an Operator rather than a DID string, so that a DID read from a request body cannot stand
// where an authenticated one is due; [BearerSession.Operator] makes one. A program that
// authenticates operators its own way may build one from the DID it trusts.
type Operator struct {
	// DID is the operator's DID, did:svrp:o:….
	DID string
}

// Operator returns the operator of the session if it is still valid at now (see [BearerSession.Check]).
func (s BearerSession) Operator(now time.Time) (Operator, error) {
	if err := s.Check(now); err != nil {
		return Operator{}, err
	}
	return Operator{DID: s.OperatorDID}, nil
}

// ParseBearer extracts the token from an Authorization header of the form
// "Bearer <token>", the scheme in any case, separated from the token by spaces or tabs.
// A missing or empty header, another scheme, or a token that is empty, longer than 256
// bytes or outside the b64token characters of RFC 6750 is NO_SESSION: none of these can
// name a session. The error never contains the header.
func ParseBearer(header string) (string, error) {
	h := trimWS(header)
	const scheme = "bearer"
	if len(h) <= len(scheme) || !equalFoldASCII(h[:len(scheme)], scheme) || !isWS(h[len(scheme)]) {
		return "", ErrNoSession.With("no bearer token sent")
	}
	tok := trimWS(h[len(scheme):])
	if tok == "" || tok[0] == '=' || len(tok) > maxBearerToken {
		return "", ErrNoSession.With("no bearer token sent")
	}
	for i := 0; i < len(tok); i++ {
		if !isB64TokenChar(tok[i]) || (tok[i] == '=' && !allEquals(tok[i:])) {
			return "", ErrNoSession.With("malformed bearer token")
		}
	}
	return tok, nil
}

func trimWS(s string) string {
	for len(s) > 0 && isWS(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isWS(c byte) bool { return c == ' ' || c == '\t' }

func equalFoldASCII(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// isB64TokenChar reports whether c may appear in an RFC 6750 b64token; '=' only as padding
// at the end, which the caller checks.
func isB64TokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '='
}

func allEquals(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
