package translog

import (
	"slices"
	"strings"

	"github.com/svrp/svrp/didkey"
)

// The field names of the kinds, in the order each kind writes them.
var kindFields = map[Kind][]string{
	KindNode:     {"key"},
	KindPin:      {"root_key"},
	KindBind:     {"key", "operator", "session"},
	KindUnbind:   {"key", "operator", "session", "by", "at"},
	KindRevoke:   {"root_key", "revocation_id"},
	KindUnrevoke: {"root_key", "revocation_id"},
}

// KindFields returns the field names of kind k in their order, nil for an unknown kind.
func KindFields(k Kind) []string { return slices.Clone(kindFields[k]) }

// signedCount is how many signed messages each kind carries: at least min, at most max.
var signedCount = map[Kind][2]int{
	KindNode:     {0, 1}, // none when a registry that is not strict accepted it unsigned
	KindPin:      {1, 1},
	KindBind:     {4, 4},
	KindUnbind:   {0, 1}, // the node's unbind message, when the node ended it
	KindRevoke:   {1, 1},
	KindUnrevoke: {0, 0},
}

// Node is the entry of a node key registered under did, with the registration message and
// its signature ("" when it was accepted unsigned).
func Node(did string, key didkey.PublicKey, msg []byte, sig string) Entry {
	e := Entry{Kind: KindNode, DID: did, Fields: []Field{{"key", key.Base58()}}}
	if sig != "" {
		e.Signed = []Signed{{key, sig, msg}}
	}
	return e
}

// Pin is the entry of an operator DID pinned to root, with the message the root key signed
// under that DID: a DeviceCredential or a revocation.
func Pin(operatorDID string, root didkey.PublicKey, msg []byte, sig string) Entry {
	return Entry{Kind: KindPin, DID: operatorDID, Fields: []Field{{"root_key", root.Base58()}}, Signed: []Signed{{root, sig, msg}}}
}

// Bind is the entry of a binding accepted: the node's binding session, the operator's
// DeviceCredential, the device's authorization and the node's acceptance, in that order.
func Bind(nodeDID string, node didkey.PublicKey, operatorDID, sessionID string, signed [4]Signed) Entry {
	return Entry{Kind: KindBind, DID: nodeDID, Fields: []Field{
		{"key", node.Base58()}, {"operator", operatorDID}, {"session", sessionID},
	}, Signed: signed[:]}
}

// Unbind is the entry of a binding's end: by is operator, node, revocation, node_unseen or
// superseded, at the time in the protocol's 20-character form, and signed the node's unbind
// message when the node ended it.
func Unbind(nodeDID string, node didkey.PublicKey, operatorDID, sessionID, by, at string, signed *Signed) Entry {
	e := Entry{Kind: KindUnbind, DID: nodeDID, Fields: []Field{
		{"key", node.Base58()}, {"operator", operatorDID}, {"session", sessionID}, {"by", by}, {"at", at},
	}}
	if signed != nil {
		e.Signed = []Signed{*signed}
	}
	return e
}

// Revoke is the entry of a credential revocation, with its message and the root key's
// signature.
func Revoke(operatorDID string, root didkey.PublicKey, revocationID string, msg []byte, sig string) Entry {
	return Entry{Kind: KindRevoke, DID: operatorDID, Fields: []Field{
		{"root_key", root.Base58()}, {"revocation_id", revocationID},
	}, Signed: []Signed{{root, sig, msg}}}
}

// Unrevoke is the entry of a revocation's end. It carries no signed message: the registry
// ends a revocation by its own rule, which the log makes visible.
func Unrevoke(operatorDID string, root didkey.PublicKey, revocationID string) Entry {
	return Entry{Kind: KindUnrevoke, DID: operatorDID, Fields: []Field{
		{"root_key", root.Base58()}, {"revocation_id", revocationID},
	}}
}

// Check checks everything an entry says that needs no other entry: a known kind with its
// fields in order, a DID of the right sort that derives from the entry's key, signed
// messages that verify, signed by that key where the kind says so, and that name the DID.
func (e Entry) Check() error {
	names, ok := kindFields[e.Kind]
	if !ok {
		return badEntry("unknown kind %q", e.Kind)
	}
	got := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		got[i] = f.Name
	}
	if !slices.Equal(got, names) {
		return badEntry("%s fields %v, want %v", e.Kind, got, names)
	}
	if n := signedCount[e.Kind]; len(e.Signed) < n[0] || len(e.Signed) > n[1] {
		return badEntry("%s carries %d signed messages", e.Kind, len(e.Signed))
	}
	did, err := didkey.Parse(e.DID)
	if err != nil {
		return badEntry("DID %q: %v", e.DID, err)
	}
	keyField := "key"
	if e.Kind == KindPin || e.Kind == KindRevoke || e.Kind == KindUnrevoke {
		keyField = "root_key"
	}
	v, _ := e.Field(keyField)
	key, err := didkey.DecodeKey(v)
	if err != nil || key.Base58() != v {
		return badEntry("%s %q is not a base58 key", keyField, v)
	}
	if wantOperator := keyField == "root_key"; did.IsOperator() != wantOperator || !did.Matches(key) {
		return badEntry("DID %s does not derive from %s %s", e.DID, keyField, v)
	}
	if err := e.Verify(); err != nil {
		return err
	}
	// The message signed by the entry's own key, which must be of a sort the kind allows and
	// name the entry's DID on the line that sort puts it.
	var own *Signed
	switch {
	case e.Kind == KindBind:
		own = &e.Signed[3]
	case len(e.Signed) == 1:
		own = &e.Signed[0]
	default:
		return nil
	}
	if own.Signer != key {
		return badEntry("the %s message is not signed by %s", e.Kind, v)
	}
	lines := own.Lines()
	line, ok := didLine(e.Kind, lines[0])
	if !ok {
		return badEntry("a %s entry cannot come from a %q message", e.Kind, lines[0])
	}
	if len(lines) <= line || lines[line] != e.DID {
		return badEntry("the %s message does not name %s", e.Kind, e.DID)
	}
	return nil
}

// ownMessages is, for each kind, the domain literals (without their prefix) of the messages
// its entry's own key signs, and the line of each that names the entry's DID
// (docs/protocol.md §3.4).
var ownMessages = map[Kind]map[string]int{
	KindNode:   {"-node-register:v1": 1, "-node-register:v2": 1},
	KindPin:    {"-operator-device-credential:v1": 2, "-credential-revocation:v1": 1},
	KindBind:   {"-binding-acceptance:v1": 2},
	KindUnbind: {"-binding-unbind:v1": 2},
	KindRevoke: {"-credential-revocation:v1": 1},
}

// didLine returns the line of a message with this domain literal that names the DID of an
// entry of kind k, and whether k's own key signs such messages.
func didLine(k Kind, literal string) (int, bool) {
	for suffix, line := range ownMessages[k] {
		if strings.HasSuffix(literal, suffix) && len(literal) > len(suffix) {
			return line, true
		}
	}
	return 0, false
}
