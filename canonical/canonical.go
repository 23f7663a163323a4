// Package canonical builds the exact bytes that svrp signs (docs/protocol.md §3),
// and signs and verifies them with Ed25519.
//
// # Which bytes are signed
//
// Every signed message is UTF-8 text: a domain literal "<prefix>-<name>:v1", then the
// message's fields in the protocol's order, all joined by one LF, with no trailing LF. Each
// message is a struct that declares its fields in that order under their protocol names (the
// JSON tags), and its bytes are rendered from that declaration alone. Fields render by their
// Go type as follows:
//
//	string              as is ("" stands for null or absent)
//	[]string            sorted ascending by bytes, joined with ","; empty list → ""
//	bool                True / False
//	*float64 (limits)   shortest round-trip decimal, no exponent, no ".0"; nil → ""
//	string (timestamp)  as given (callers check the 20-char form with [ParseTime])
//	int64 (unix ts)     base-10 integer
//
// The prefix is "service" by default ([DefaultPrefix]); the live network uses "libertynet".
// Each message type ([Login], [DeviceCredential], [Register], [Heartbeat], [Poll],
// [BindingSession], [Authorization], [Acceptance], [Cancel], and those of docs/protocol.md §10:
// [RegisterV2], [Revocation], [Unbind]) has one Bytes method, which both
// [Sign] and [Verify] use, so signer and verifier cannot disagree.
//
// # Injectivity
//
// Bytes refuses input that would let two different messages share the same bytes: a string
// with a control character (U+0000–U+001F, U+007F) or invalid UTF-8, a list item that is
// empty or contains ",", and a number that is not finite or lies outside 0..2^53−1. Such
// errors carry the protocol code BAD_REQUEST and name the field.
//
// The package checks no field limits, DIDs or clocks: those belong to the callers (didkey,
// authn, binding, registry).
package canonical

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/sigverify"
)

// DefaultPrefix is the domain prefix of the service description: its login literal is
// "service-auth-challenge:v1".
const DefaultPrefix = "service"

// MaxLimit is the largest number a limit may carry, 2^53 − 1.
const MaxLimit = 1<<53 - 1

// Sentinels for errors.Is.
var (
	// ErrBadRequest: a field breaks the rendering or injectivity rules (BAD_REQUEST).
	ErrBadRequest = proto.New(proto.BadRequest, "malformed field")
	// ErrBadSignature: a signature is malformed or does not verify (BAD_SIGNATURE).
	ErrBadSignature = proto.New(proto.BadSignature, "signature does not verify")
)

// Message is one of the nine signed messages of the protocol.
type Message interface {
	// Bytes returns the exact signed bytes under the given domain prefix.
	Bytes(prefix string) ([]byte, error)
}

// Domain suffixes of the nine messages; the literal is prefix + suffix.
const (
	LoginDomain            = "-auth-challenge:v1"
	DeviceCredentialDomain = "-operator-device-credential:v1"
	RegisterDomain         = "-node-register:v1"
	HeartbeatDomain        = "-node-heartbeat:v1"
	PollDomain             = "-node-poll:v1"
	BindingSessionDomain   = "-binding-session:v1"
	AuthorizationDomain    = "-binding-authorization:v1"
	AcceptanceDomain       = "-binding-acceptance:v1"
	CancelDomain           = "-binding-cancel:v1"
)

// Login is message 1, signed by the device key to log in.
type Login struct {
	OperatorDID     string `json:"operator_did"`
	DevicePublicKey string `json:"device_public_key"` // exactly as the DeviceCredential carries it
	Challenge       string `json:"challenge"`
	IssuedAt        string `json:"issued_at"`
}

// Bytes implements [Message].
func (m Login) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, LoginDomain, &m)
}

// DeviceCredential is message 2, signed once by the operator's root key: this device key may
// act for this operator.
type DeviceCredential struct {
	CredentialID          string   `json:"credential_id"`
	OperatorDID           string   `json:"operator_did"`
	OperatorRootPublicKey string   `json:"operator_root_public_key"`
	DeviceID              string   `json:"device_id"`
	DevicePublicKey       string   `json:"device_public_key"`
	Permissions           []string `json:"permissions,omitempty"`
	IssuedAt              string   `json:"issued_at"`
	ExpiresAt             string   `json:"expires_at"`
	RevocationID          string   `json:"revocation_id"`
}

// Bytes implements [Message].
func (m DeviceCredential) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, DeviceCredentialDomain, &m)
}

// Register is message 3, signed by the node key when it registers.
type Register struct {
	DID          string   `json:"did"`
	PublicKey    string   `json:"public_key"` // base58, whatever encoding the request used
	Endpoint     string   `json:"endpoint"`
	Capabilities []string `json:"capabilities"`
	Region       string   `json:"region,omitempty"`
}

// Bytes implements [Message].
func (m Register) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, RegisterDomain, &m)
}

// RegisterV2Domain is the domain suffix of message 10 (docs/protocol.md §10.1).
const RegisterV2Domain = "-node-register:v2"

// RegisterV2 is message 10: a registration that also signs when it was made, so that the
// registry can refuse a replay of it and an older registration (docs/protocol.md §10.1).
type RegisterV2 struct {
	DID          string   `json:"did"`
	PublicKey    string   `json:"public_key"` // base58, whatever encoding the request used
	Endpoint     string   `json:"endpoint"`
	Capabilities []string `json:"capabilities"`
	Region       string   `json:"region,omitempty"`
	TS           int64    `json:"ts"`
}

// Bytes implements [Message].
func (m RegisterV2) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, RegisterV2Domain, &m)
}

// Heartbeat is message 4, signed by the node key to refresh last_seen.
type Heartbeat struct {
	DID string `json:"did"`
	TS  int64  `json:"ts"`
}

// Signer returns the DID of the node that signs the message, and its ts.
func (m Heartbeat) Signer() (did string, ts int64) { return m.DID, m.TS }

// Bytes implements [Message].
func (m Heartbeat) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, HeartbeatDomain, &m)
}

// Poll is message 5, signed by the node key to ask for authorizations awaiting it.
type Poll struct {
	NodeDID string `json:"node_did"`
	TS      int64  `json:"ts"`
}

// Signer returns the DID of the node that signs the message, and its ts.
func (m Poll) Signer() (did string, ts int64) { return m.NodeDID, m.TS }

// Bytes implements [Message].
func (m Poll) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, PollDomain, &m)
}

// BindingSession is message 6: the node's signed description of itself at initiate.
type BindingSession struct {
	BindingSessionID     string   `json:"binding_session_id"`
	NodeDID              string   `json:"node_did"`
	NodePublicKey        string   `json:"node_public_key"` // base58, whatever encoding the request used
	DeviceSummary        string   `json:"device_summary,omitempty"`
	OS                   string   `json:"os,omitempty"`
	Region               string   `json:"region,omitempty"`
	RequestedTaskTypes   []string `json:"requested_task_types"`
	RequestedSingleLimit *float64 `json:"requested_single_limit"`
	RequestedDailyLimit  *float64 `json:"requested_daily_limit"`
	Nonce                string   `json:"nonce"`
	CreatedAt            string   `json:"created_at"`
	ExpiresAt            string   `json:"expires_at"`
}

// Bytes implements [Message].
func (m BindingSession) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, BindingSessionDomain, &m)
}

// Authorization is message 7, the AuthorizationCredential signed by the device key: this
// node, with these limits.
type Authorization struct {
	BindingSessionID string   `json:"binding_session_id"`
	NodeDID          string   `json:"node_did"`
	OperatorDID      string   `json:"operator_did"`
	TaskTypes        []string `json:"task_types"`
	SingleLimit      *float64 `json:"single_limit"`
	DailyLimit       *float64 `json:"daily_limit"`
	RevocationID     string   `json:"revocation_id"`
	IssuedAt         string   `json:"issued_at"`
	ExpiresAt        string   `json:"expires_at"`
}

// Bytes implements [Message].
func (m Authorization) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, AuthorizationDomain, &m)
}

// Digest returns authorization_digest: the lowercase hex SHA-256 of the message's bytes,
// which ties an [Acceptance] to this one authorization.
func (m Authorization) Digest(prefix string) (string, error) {
	msg, err := m.Bytes(prefix)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(msg)
	return hex.EncodeToString(sum[:]), nil
}

// Acceptance is message 8, signed by the node key to accept (or refuse) one authorization.
type Acceptance struct {
	BindingSessionID    string `json:"binding_session_id"`
	NodeDID             string `json:"node_did"`
	OperatorDID         string `json:"operator_did"`
	AuthorizationDigest string `json:"authorization_digest"`
	Accepted            bool   `json:"accepted"`
	IssuedAt            string `json:"issued_at"`
}

// Bytes implements [Message].
func (m Acceptance) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, AcceptanceDomain, &m)
}

// Cancel is message 9, signed by the node key to cancel one of its binding sessions.
type Cancel struct {
	BindingSessionID string `json:"binding_session_id"`
	NodeDID          string `json:"node_did"`
	TS               int64  `json:"ts"`
}

// Signer returns the DID of the node that signs the message, and its ts.
func (m Cancel) Signer() (did string, ts int64) { return m.NodeDID, m.TS }

// Bytes implements [Message].
func (m Cancel) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, CancelDomain, &m)
}

// Sign signs the message's bytes under prefix and returns the base58 signature.
func Sign(priv ed25519.PrivateKey, prefix string, m Message) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", ErrBadRequest.With("private key is not an Ed25519 key")
	}
	msg, err := m.Bytes(prefix)
	if err != nil {
		return "", err
	}
	return base58.Encode(ed25519.Sign(priv, msg)), nil
}

// Verify checks a base58 signature by pub over the message's bytes under prefix, by the
// verification rule of docs/protocol.md §1.1 (sigverify.Verify). A message that breaks the
// rendering rules gives a BAD_REQUEST error; a signature that is not base58 of 64 bytes, or
// does not verify, gives a BAD_SIGNATURE error.
func Verify(pub didkey.PublicKey, prefix string, m Message, sig string) error {
	return VerifyWith(sigverify.Single{}, pub, prefix, m, sig)
}

// VerifyWith is [Verify] with the signature checked by v, a [sigverify.Batcher] for instance,
// which judges by the same rule.
func VerifyWith(v sigverify.Verifier, pub didkey.PublicKey, prefix string, m Message, sig string) error {
	msg, err := m.Bytes(prefix)
	if err != nil {
		return err
	}
	s, err := DecodeSignature(sig)
	if err != nil {
		return err
	}
	if !v.Verify(pub[:], msg, s[:]) {
		return ErrBadSignature.With("signature does not verify")
	}
	return nil
}

// maxBase58Signature is the longest base58 text of 64 bytes.
const maxBase58Signature = 88

// DecodeSignature decodes a base58 Ed25519 signature, which must be exactly 64 bytes.
func DecodeSignature(sig string) ([ed25519.SignatureSize]byte, error) {
	var s [ed25519.SignatureSize]byte
	if sig == "" || len(sig) > maxBase58Signature {
		return s, ErrBadSignature.With("signature is not base58 of 64 bytes")
	}
	raw, err := base58.Decode(sig)
	if err != nil || len(raw) != len(s) {
		return s, ErrBadSignature.With("signature is not base58 of 64 bytes")
	}
	copy(s[:], raw)
	return s, nil
}

// CheckPrefix reports whether prefix can stand in a domain literal: 1–64 ASCII letters,
// digits, '.', '_' or '-'.
func CheckPrefix(prefix string) error {
	if prefix == "" || len(prefix) > 64 {
		return ErrBadRequest.With("domain prefix must be 1-64 characters")
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ErrBadRequest.With("domain prefix %q has a character outside [A-Za-z0-9._-]", prefix)
		}
	}
	return nil
}

// CheckString applies the injectivity rule for a signed string: valid UTF-8 with no control
// character. field names the field in the error.
func CheckString(field, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return ErrBadRequest.With("field %s contains a control character", field)
		}
	}
	if !utf8.ValidString(s) {
		return ErrBadRequest.With("field %s is not valid UTF-8", field)
	}
	return nil
}

// CheckList applies the injectivity rule for a signed list: every item a valid string that is
// not empty and contains no ",".
func CheckList(field string, items []string) error {
	for _, it := range items {
		if it == "" {
			return ErrBadRequest.With("field %s has an empty item", field)
		}
		for i := 0; i < len(it); i++ {
			if it[i] == ',' {
				return ErrBadRequest.With("field %s has an item containing ','", field)
			}
		}
		if err := CheckString(field, it); err != nil {
			return err
		}
	}
	return nil
}

// CheckNumber applies the rule for a signed number: finite, at least 0, at most 2^53 − 1.
func CheckNumber(field string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > MaxLimit {
		return ErrBadRequest.With("field %s must be a number from 0 to 9007199254740991", field)
	}
	return nil
}

// FormatNumber renders a limit: the shortest decimal that round-trips to v, with no exponent
// and no trailing ".0"; -0 renders as "0". It does not check the range (see [CheckNumber]).
func FormatNumber(v float64) string { return string(appendNumber(nil, v)) }

func appendNumber(dst []byte, v float64) []byte {
	if v == 0 {
		return append(dst, '0')
	}
	return strconv.AppendFloat(dst, v, 'f', -1, 64)
}

// encode renders the message m points to under prefix and the domain suffix: the domain
// line, then every field of the struct in the order the struct declares them, each named in
// errors by its JSON name. The struct declaration is therefore the message's field list of
// docs/protocol.md, and a field cannot be signed under one name and decoded under another.
func encode(prefix, suffix string, m any) ([]byte, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	v := reflect.ValueOf(m).Elem()
	names := fieldNames(v.Type())
	buf := make([]byte, 0, len(prefix)+len(suffix)+40*len(names))
	buf = append(append(buf, prefix...), suffix...)
	for i, name := range names {
		var err error
		if buf, err = appendField(append(buf, '\n'), name, v.Field(i)); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// appendField renders one field by its Go type: string, []string, *float64 (a limit, nil
// for null), bool or int64 (a unix ts).
func appendField(dst []byte, name string, v reflect.Value) ([]byte, error) {
	switch v.Kind() {
	case reflect.String:
		if err := CheckString(name, v.String()); err != nil {
			return nil, err
		}
		return append(dst, v.String()...), nil
	case reflect.Slice:
		items := v.Interface().([]string)
		if err := CheckList(name, items); err != nil {
			return nil, err
		}
		if !slices.IsSorted(items) {
			items = slices.Sorted(slices.Values(items))
		}
		for i, it := range items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, it...)
		}
		return dst, nil
	case reflect.Pointer:
		if v.IsNil() {
			return dst, nil
		}
		if err := CheckNumber(name, v.Elem().Float()); err != nil {
			return nil, err
		}
		return appendNumber(dst, v.Elem().Float()), nil
	case reflect.Bool:
		if v.Bool() {
			return append(dst, "True"...), nil
		}
		return append(dst, "False"...), nil
	case reflect.Int64:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	}
	return nil, proto.New(proto.Internal, fmt.Sprintf("field %s has no signed form", name))
}

// fieldNamesOf caches, per message type, the JSON names of its fields in their order.
var fieldNamesOf sync.Map

func fieldNames(t reflect.Type) []string {
	if names, ok := fieldNamesOf.Load(t); ok {
		return names.([]string)
	}
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	fieldNamesOf.Store(t, names)
	return names
}
