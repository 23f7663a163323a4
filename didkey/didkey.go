// Package didkey turns Ed25519 public keys into svrp DIDs and checks that a DID belongs to a
// key (id-binding), following section 2 of the svrp wire protocol (docs/protocol.md).
//
// # Identities
//
// A node or operator is its 32-byte Ed25519 public key. A DID is a spelling of that key:
//
//	did:svrp:<64 hex>            full form, hex(k), never tagged
//	did:svrp:n:<8 hex>           short form, hex(SHA-256(k))[0:8]
//	did:svrp:n:<10 hex>          collision-fallback form, hex(SHA-256(k))[0:10]
//	did:svrp:o:<8 or 10 hex>     operator DID, derived from the operator's root key
//
// The tag of a short or fallback DID is optional and is one character of [a-z0-9]; node DIDs
// may use any tag but o. Two DIDs name the same identity when both bind to the same key, so
// callers key their records by [PublicKey], never by the DID string.
//
// # Errors
//
// Every function is total: any input gives a result or an error, never a panic. Errors carry
// the protocol code they map to, readable with errors.Is against [ErrBindingRequired] and
// [ErrBindingFailed] or through their Code method:
// a string that does not begin with did:svrp: is ID_BINDING_REQUIRED; anything else that is
// wrong — grammar, tag, a key that is not 32 bytes, a DID derived from another key — is
// ID_BINDING_FAILED.
//
// The package does not verify signatures (see package canonical) and keeps no state.
package didkey

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/proto"
)

// Sentinels for errors.Is. Errors returned by this package carry more detail but match one
// of these.
var (
	// ErrBindingRequired: the identity is not a did:svrp identity (ID_BINDING_REQUIRED).
	ErrBindingRequired = proto.New(proto.IDBindingRequired, "not a did:svrp identity")
	// ErrBindingFailed: the DID is malformed, has the wrong role, or does not derive from the
	// key; or the key is not a 32-byte key (ID_BINDING_FAILED).
	ErrBindingFailed = proto.New(proto.IDBindingFailed, "id-binding failed")
)

const (
	methodPrefix = "did:svrp:"
	// OperatorTag is the tag of operator DIDs; node DIDs must not carry it.
	OperatorTag = "o"
	// NodeTag is the tag this package writes on the node DIDs it derives.
	NodeTag = "n"

	// maxBase58Key is the longest base58 text of 32 bytes (44 characters); longer input is
	// refused before decoding, which is quadratic in the input length.
	maxBase58Key = 44
)

// PublicKey is a 32-byte Ed25519 public key. The zero value is a valid (if useless) key.
type PublicKey [32]byte

// DecodeKey decodes a public key from its wire form. A string of exactly 64 lowercase hex
// characters is hex; anything else is base58 (Bitcoin alphabet, one 0x00 byte restored per
// leading '1'). Either way the result must be exactly 32 bytes.
func DecodeKey(s string) (PublicKey, error) {
	var k PublicKey
	if isLowerHex(s, 64) {
		hex.Decode(k[:], []byte(s))
		return k, nil
	}
	if s == "" || len(s) > maxBase58Key {
		return k, failf("public key is neither 64 lowercase hex characters nor base58 of 32 bytes (%d characters)", len(s))
	}
	b, err := base58.Decode(s)
	if err != nil {
		return k, failf("public key is neither 64 lowercase hex characters nor valid base58")
	}
	if len(b) != len(k) {
		return k, failf("public key decodes to %d bytes, want 32", len(b))
	}
	copy(k[:], b)
	return k, nil
}

// KeyFromEd25519 converts a crypto/ed25519 public key.
func KeyFromEd25519(pub ed25519.PublicKey) (PublicKey, error) {
	var k PublicKey
	if len(pub) != len(k) {
		return k, failf("public key is %d bytes, want 32", len(pub))
	}
	copy(k[:], pub)
	return k, nil
}

// Ed25519 returns the key as a crypto/ed25519 public key (a fresh slice).
func (k PublicKey) Ed25519() ed25519.PublicKey { return append(ed25519.PublicKey(nil), k[:]...) }

// Hex returns the 64-character lowercase hex form used by GET /nodes.
func (k PublicKey) Hex() string { return hex.EncodeToString(k[:]) }

// Base58 returns the base58 form used by GET /peers, binding payloads and signed messages.
func (k PublicKey) Base58() string { return base58.Encode(k[:]) }

// String returns the hex form; [DecodeKey] is its inverse.
func (k PublicKey) String() string { return k.Hex() }

// Fingerprint returns hex(SHA-256(k))[0:16] in four groups of four joined by ':', the string an
// operator compares with the node's screen before authorizing it.
func (k PublicKey) Fingerprint() string {
	sum := sha256.Sum256(k[:])
	var h [16]byte
	hex.Encode(h[:], sum[:8])
	return string(h[0:4]) + ":" + string(h[4:8]) + ":" + string(h[8:12]) + ":" + string(h[12:16])
}

// ShortBody returns hex(SHA-256(k))[0:8], the body of the key's short DID. Registries index
// it to detect two keys that share a short DID.
func (k PublicKey) ShortBody() string {
	sum := sha256.Sum256(k[:])
	return hex.EncodeToString(sum[:4])
}

// Form is the spelling of a DID's body.
type Form uint8

// Forms. Do not reorder: the values are stable.
const (
	FormInvalid  Form = iota
	FormShort         // 8 hex characters of SHA-256(k)
	FormFallback      // 10 hex characters of SHA-256(k), for short-body collisions
	FormFull          // the 64 hex characters of k itself
)

func (f Form) String() string {
	switch f {
	case FormShort:
		return "short"
	case FormFallback:
		return "fallback"
	case FormFull:
		return "full"
	}
	return fmt.Sprintf("Form?%d", uint8(f))
}

func (f Form) bodyLen() int {
	switch f {
	case FormShort:
		return 8
	case FormFallback:
		return 10
	case FormFull:
		return 64
	}
	return 0
}

// DID is a grammatical did:svrp identifier. The zero value is no DID; values come from
// [Parse], [NodeDID] and [OperatorDID]. A DID says nothing about a key until [DID.Matches]
// has checked it.
type DID struct {
	s    string
	tag  byte // 0 when untagged
	form Form
}

// Parse checks the grammar of a did:svrp identifier: "did:svrp:" then either a 64-hex body
// with no tag, or an optional one-character tag [a-z0-9] and ':' followed by an 8- or 10-hex
// body, hex in lower case. It does not check the role (node or operator) or any key.
func Parse(s string) (DID, error) {
	if len(s) < len(methodPrefix) || s[:len(methodPrefix)] != methodPrefix {
		return DID{}, ErrBindingRequired.With("%s is not a did:svrp identity", quote(s))
	}
	rest := s[len(methodPrefix):]
	d := DID{s: s}
	switch {
	case isLowerHex(rest, 64):
		d.form = FormFull
	case len(rest) >= 2 && rest[1] == ':' && isTagChar(rest[0]):
		d.tag = rest[0]
		d.form = shortForm(rest[2:])
	default:
		d.form = shortForm(rest)
	}
	if d.form == FormInvalid {
		return DID{}, ErrBindingFailed.With("%s breaks the did:svrp grammar", quote(s))
	}
	return d, nil
}

func shortForm(body string) Form {
	switch {
	case isLowerHex(body, 8):
		return FormShort
	case isLowerHex(body, 10):
		return FormFallback
	}
	return FormInvalid
}

// String returns the DID as parsed or derived; [Parse] is its inverse.
func (d DID) String() string { return d.s }

// IsZero reports whether d is the zero DID.
func (d DID) IsZero() bool { return d.form == FormInvalid }

// Form returns the spelling of the body.
func (d DID) Form() Form { return d.form }

// Tag returns the one-character tag, or "" when the DID has none.
func (d DID) Tag() string {
	if d.tag == 0 {
		return ""
	}
	return d.s[len(methodPrefix) : len(methodPrefix)+1]
}

// Body returns the hex body: 8, 10 or 64 characters.
func (d DID) Body() string { return d.s[len(d.s)-d.form.bodyLen():] }

// IsOperator reports whether the DID carries the operator tag o.
func (d DID) IsOperator() bool { return d.tag == OperatorTag[0] }

// Matches reports whether d derives from k (id-binding): the body equals hex(k) for the full
// form, or the first 8 or 10 hex characters of SHA-256(k) for the short and fallback forms.
// It does not allocate.
func (d DID) Matches(k PublicKey) bool {
	var src []byte
	var sum [32]byte
	switch d.form {
	case FormFull:
		src = k[:]
	case FormShort, FormFallback:
		sum = sha256.Sum256(k[:])
		src = sum[:]
	default:
		return false
	}
	body := d.Body()
	const digits = "0123456789abcdef"
	for i := 0; i < len(body); i++ {
		b := src[i/2]
		if i%2 == 0 {
			b >>= 4
		}
		if body[i] != digits[b&0x0f] {
			return false
		}
	}
	return true
}

// Key returns the key spelled by a full-form DID; the other forms are one-way.
func (d DID) Key() (PublicKey, bool) {
	var k PublicKey
	if d.form != FormFull {
		return k, false
	}
	hex.Decode(k[:], []byte(d.Body()))
	return k, true
}

// MarshalText implements encoding.TextMarshaler.
func (d DID) MarshalText() ([]byte, error) { return []byte(d.s), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [Parse].
func (d *DID) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// NodeDID derives the node DID of k in the given form: did:svrp:n:<body> for the short and
// fallback forms, did:svrp:<hex(k)> for the full form.
func NodeDID(k PublicKey, f Form) (DID, error) {
	if f == FormFull {
		return DID{s: methodPrefix + k.Hex(), form: FormFull}, nil
	}
	return derive(k, f, NodeTag[0])
}

// OperatorDID derives the operator DID did:svrp:o:<body> of a root key, in the short or
// fallback form.
func OperatorDID(k PublicKey, f Form) (DID, error) { return derive(k, f, OperatorTag[0]) }

func derive(k PublicKey, f Form, tag byte) (DID, error) {
	if f != FormShort && f != FormFallback {
		return DID{}, failf("%s is not a tagged DID form", f)
	}
	sum := sha256.Sum256(k[:])
	body := hex.EncodeToString(sum[:f.bodyLen()/2])
	return DID{s: methodPrefix + string(tag) + ":" + body, tag: tag, form: f}, nil
}

// CheckNode checks a node identity as the registry receives it: did must be a grammatical
// did:svrp DID without the operator tag, key must decode (hex or base58) to 32 bytes, and did
// must derive from key. The checks run in that order, so the code of the first failure wins.
func CheckNode(did, key string) (DID, PublicKey, error) {
	d, err := Parse(did)
	if err != nil {
		return DID{}, PublicKey{}, err
	}
	if d.IsOperator() {
		return DID{}, PublicKey{}, ErrBindingFailed.With("%s is an operator DID, not a node DID", quote(did))
	}
	return bind(d, key)
}

// CheckOperator checks an operator identity: did must be did:svrp:o:<8 or 10 hex>, rootKey
// must decode to 32 bytes, and did must derive from rootKey.
func CheckOperator(did, rootKey string) (DID, PublicKey, error) {
	d, err := Parse(did)
	if err != nil {
		return DID{}, PublicKey{}, err
	}
	if !d.IsOperator() {
		return DID{}, PublicKey{}, ErrBindingFailed.With("%s is not an operator DID (did:svrp:o:…)", quote(did))
	}
	return bind(d, rootKey)
}

func bind(d DID, key string) (DID, PublicKey, error) {
	k, err := d.Bind(key)
	if err != nil {
		return DID{}, PublicKey{}, err
	}
	return d, k, nil
}

// Bind decodes key (hex or base58, 32 bytes) and checks that d derives from it: the
// id-binding check for a DID already parsed, so that a caller never parses it twice.
func (d DID) Bind(key string) (PublicKey, error) {
	k, err := DecodeKey(key)
	if err != nil {
		return PublicKey{}, err
	}
	if !d.Matches(k) {
		return PublicKey{}, ErrBindingFailed.With("%s does not derive from the key presented", quote(d.s))
	}
	return k, nil
}

// SameIdentity reports whether a and b are two spellings of the identity k, that is whether
// both bind to k.
func SameIdentity(a, b DID, k PublicKey) bool { return a.Matches(k) && b.Matches(k) }

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isTagChar(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }

func failf(format string, args ...any) error {
	return ErrBindingFailed.With(format, args...)
}

// quote renders untrusted input for an error text, cut to a readable length.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
