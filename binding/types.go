package binding

import (
	"fmt"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
)

// State is a binding session's state (description 3.1).
type State uint8

// States. Do not reorder: the values are stored.
const (
	StateInvalid State = iota
	Initiated
	PendingOperator
	PendingNodeAcceptance
	Verifying
	Active
	Expired
	RejectedByOperator
	RejectedByNode
	Cancelled
)

var stateNames = [...]string{
	Initiated:             "INITIATED",
	PendingOperator:       "PENDING_OPERATOR",
	PendingNodeAcceptance: "PENDING_NODE_ACCEPTANCE",
	Verifying:             "VERIFYING",
	Active:                "ACTIVE",
	Expired:               "EXPIRED",
	RejectedByOperator:    "REJECTED_BY_OPERATOR",
	RejectedByNode:        "REJECTED_BY_NODE",
	Cancelled:             "CANCELLED",
}

// String returns the wire name, for example "PENDING_OPERATOR".
func (s State) String() string { return enumName(stateNames[:], s, "State") }

// enumName is the name of v in names, where entry 0 is the invalid value: that value, or one
// past the table, prints as the type's name, "?" and the number.
func enumName[T ~uint8](names []string, v T, typ string) string {
	if v > 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s?%d", typ, uint8(v))
}

// ParseState is the inverse of [State.String].
func ParseState(name string) (State, error) {
	for s := Initiated; int(s) < len(stateNames); s++ {
		if stateNames[s] == name {
			return s, nil
		}
	}
	return StateInvalid, ErrBadRequest.With("unknown state %q", clip(name))
}

// Terminal reports whether s never moves again.
func (s State) Terminal() bool {
	switch s {
	case Active, Expired, RejectedByOperator, RejectedByNode, Cancelled:
		return true
	}
	return false
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *State) UnmarshalText(b []byte) error {
	p, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// AuthorizationCredential is the wire form of an AuthorizationCredential (docs/protocol.md §4.3):
// the fields of message 7 and the device key's base58 signature.
type AuthorizationCredential struct {
	canonical.Authorization
	Signature string `json:"signature"`
}

// Acceptance is the wire form of an acceptance (docs/protocol.md §4.4): the fields of message 8 and
// the node key's base58 signature.
type Acceptance struct {
	canonical.Acceptance
	Signature string `json:"signature"`
}

// BindingSession is a binding session as the registry keeps it. The short code and binding token are
// never kept, only their SHA-256.
type BindingSession struct {
	ID      string           `json:"id"`
	State   State            `json:"state"`
	NodeKey didkey.PublicKey `json:"node_key"`
	// Request is the node's signed description (message 6) as it was verified.
	Request       canonical.BindingSession `json:"request"`
	NodeSignature string                   `json:"node_signature"`
	CreatedAt     time.Time                `json:"created_at"`
	ExpiresAt     time.Time                `json:"expires_at"`
	CodeHash      [32]byte                 `json:"code_hash"`
	TokenHash     [32]byte                 `json:"token_hash"`
	// OperatorDID is the operator that resolved the session; empty before.
	OperatorDID string `json:"operator_did,omitempty"`
	// Set by authorize.
	DeviceCredential *authn.DeviceCredential  `json:"device_credential,omitempty"`
	Authorization    *AuthorizationCredential `json:"authorization,omitempty"`
	// Set by accept or node reject.
	Acceptance  *Acceptance `json:"acceptance,omitempty"`
	ActivatedAt time.Time   `json:"activated_at,omitzero"`
	UpdatedAt   time.Time   `json:"updated_at"`
	// Set when the binding this ACTIVE session created stopped being the node's current one
	// (docs/protocol.md §10.6): when, and why. The state stays ACTIVE.
	UnboundAt time.Time `json:"unbound_at,omitzero"`
	UnboundBy UnboundBy `json:"unbound_by,omitempty"`
	// Origin is the client group (an IPv4 address, an IPv6 /64) the initiate came from, which the
	// registry's quotas count it against at every level of the address hierarchy (package
	// registry/netblock). Records stored by earlier releases hold the IPv4 /24 or IPv6 /48
	// instead, which counts as the narrowest group known; empty for the oldest, which count
	// together. It is stored under its earlier name, address_block.
	Origin string `json:"address_block,omitempty"`
}

// UnboundBy says why a binding ended (docs/protocol.md §10.6).
type UnboundBy string

// Reasons a binding ends.
const (
	UnboundByOperator   UnboundBy = "operator"   // its operator unbound it
	UnboundByNode       UnboundBy = "node"       // its node unbound it
	UnboundByRevocation UnboundBy = "revocation" // a credential that made it was revoked
	UnboundBySuperseded UnboundBy = "superseded" // a newer binding of the node key replaced it
	// UnboundByNodeUnseen: its node sent no heartbeat or registration for as long as the
	// registry keeps a bound node it does not see (the registry's limits say how long).
	UnboundByNodeUnseen UnboundBy = "node_unseen"
)

// Binding is an active tie between a node key and an operator, with the limits both agreed
// to. A node key has at most one; a newer activation supersedes it.
type Binding struct {
	NodeKey      didkey.PublicKey `json:"node_key"`
	NodeDID      string           `json:"node_did"` // the DID the binding was made under
	OperatorDID  string           `json:"operator_did"`
	SessionID    string           `json:"session_id"`
	TaskTypes    []string         `json:"task_types"`
	SingleLimit  *float64         `json:"single_limit"`
	DailyLimit   *float64         `json:"daily_limit"`
	RevocationID string           `json:"revocation_id"`
	ActivatedAt  time.Time        `json:"activated_at"`
}
