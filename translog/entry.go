package translog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/didkey"
)

// Header is the first line of every entry: the format and its version.
const Header = "svrp-log-entry:v1"

// MaxEntryBytes is the largest entry: an entry bundle prefixes each entry with its length
// as a big-endian uint16 (C2SP tlog-tiles).
const MaxEntryBytes = 1<<16 - 1

// Kind is what an entry records.
type Kind string

// The kinds of entry. docs/protocol.md §12.2 lists the fields and messages of each.
const (
	// KindNode is a node key registered under a DID: the key's first registration, or one
	// under a DID spelling its record did not have.
	KindNode Kind = "node"
	// KindPin is an operator DID body pinned to its root key.
	KindPin Kind = "pin"
	// KindBind is a binding accepted: the four signed messages that made it.
	KindBind Kind = "bind"
	// KindUnbind is a binding's end, and who or what ended it.
	KindUnbind Kind = "unbind"
	// KindRevoke is a credential revocation.
	KindRevoke Kind = "revoke"
	// KindUnrevoke is a revocation's end: one by a root key that never logged in, which
	// expired or gave way to a newer one (docs/protocol.md §10.5).
	KindUnrevoke Kind = "unrevoke"
)

// Field is one named value of an entry. Its value holds no control character.
type Field struct {
	Name, Value string
}

// Signed is a signed message an entry came from: the signer's public key, the base58
// signature and the message's exact bytes (docs/protocol.md §3).
type Signed struct {
	Signer    didkey.PublicKey
	Signature string
	Message   []byte
}

// Entry is one log entry: what it records (Kind), the DID it is about in its standard text
// form, the kind's fields in their order, and the signed messages it came from.
type Entry struct {
	Kind   Kind
	DID    string
	Fields []Field
	Signed []Signed
}

// ErrBadEntry is an entry that does not parse or does not verify.
var ErrBadEntry = errors.New("translog: bad entry")

func badEntry(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadEntry, fmt.Sprintf(format, args...))
}

// signedName is the field name of a signed message's line.
const signedName = "signed"

// Marshal returns the entry's bytes: LF-terminated lines, Header, the kind, the DID, then
// one "name value" line per field and one "signed <signer base58> <signature> <base64
// message>" line per signed message. The same Entry always gives the same bytes.
func (e Entry) Marshal() ([]byte, error) {
	var b bytes.Buffer
	line := func(s string) { b.WriteString(s); b.WriteByte('\n') }
	if !isName(string(e.Kind)) {
		return nil, badEntry("kind %q is not a name", e.Kind)
	}
	if !strings.HasPrefix(e.DID, "did:svrp:") || !isText(e.DID) || strings.Contains(e.DID, " ") {
		return nil, badEntry("DID %q is not a did:svrp DID", e.DID)
	}
	line(Header)
	line(string(e.Kind))
	line(e.DID)
	for _, f := range e.Fields {
		if !isName(f.Name) || f.Name == signedName {
			return nil, badEntry("field name %q", f.Name)
		}
		if !isText(f.Value) {
			return nil, badEntry("field %s holds a control character or invalid UTF-8", f.Name)
		}
		line(f.Name + " " + f.Value)
	}
	for _, s := range e.Signed {
		if s.Signature == "" || !isText(s.Signature) || strings.Contains(s.Signature, " ") {
			return nil, badEntry("signature %q", s.Signature)
		}
		line(signedName + " " + s.Signer.Base58() + " " + s.Signature + " " + base64.StdEncoding.EncodeToString(s.Message))
	}
	if b.Len() > MaxEntryBytes {
		return nil, badEntry("%d bytes, over %d", b.Len(), MaxEntryBytes)
	}
	return b.Bytes(), nil
}

// Parse reads an entry from its bytes. It accepts exactly what Marshal writes: Parse(b)
// marshals back to b.
func Parse(b []byte) (Entry, error) {
	var e Entry
	if len(b) > MaxEntryBytes {
		return e, badEntry("%d bytes, over %d", len(b), MaxEntryBytes)
	}
	text, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok {
		return e, badEntry("does not end with a newline")
	}
	lines := strings.Split(string(text), "\n")
	if len(lines) < 3 || lines[0] != Header {
		return e, badEntry("does not begin with %q, a kind and a DID", Header)
	}
	e.Kind, e.DID = Kind(lines[1]), lines[2]
	fieldsDone := false
	for _, l := range lines[3:] {
		name, value, ok := strings.Cut(l, " ")
		if !ok {
			return e, badEntry("line %q has no value", l)
		}
		if name != signedName {
			if fieldsDone {
				return e, badEntry("field %s after a signed message", name)
			}
			e.Fields = append(e.Fields, Field{name, value})
			continue
		}
		fieldsDone = true
		s, err := parseSigned(value)
		if err != nil {
			return e, err
		}
		e.Signed = append(e.Signed, s)
	}
	again, err := e.Marshal()
	if err != nil {
		return Entry{}, err
	}
	if !bytes.Equal(again, b) {
		return Entry{}, badEntry("not in its one written form")
	}
	return e, nil
}

func parseSigned(v string) (Signed, error) {
	parts := strings.Split(v, " ")
	if len(parts) != 3 {
		return Signed{}, badEntry("a signed line has %d parts, want 3", len(parts))
	}
	k, err := base58.Decode(parts[0])
	if err != nil || len(k) != ed25519.PublicKeySize {
		return Signed{}, badEntry("signer %q is not a base58 key", parts[0])
	}
	msg, err := base64.StdEncoding.Strict().DecodeString(parts[2])
	if err != nil {
		return Signed{}, badEntry("message is not base64")
	}
	return Signed{Signer: didkey.PublicKey(k), Signature: parts[1], Message: msg}, nil
}

// Field returns the value of the field name, and whether the entry has it.
func (e Entry) Field(name string) (string, bool) {
	for _, f := range e.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

// Verify checks the signature of each signed message over its bytes. It says nothing of
// what the messages say: [Check] compares them with the entry's fields.
func (e Entry) Verify() error {
	for i, s := range e.Signed {
		sig, err := base58.Decode(s.Signature)
		if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(s.Signer[:], s.Message, sig) {
			return badEntry("signed message %d does not verify under %s", i+1, s.Signer.Base58())
		}
	}
	return nil
}

// Lines returns a signed message's lines: the domain literal, then its fields in their
// order (docs/protocol.md §3.1).
func (s Signed) Lines() []string { return strings.Split(string(s.Message), "\n") }

// isName reports whether s is a lowercase name: [a-z_]+.
func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// isText reports whether s is valid UTF-8 with no control character, so that it fits one
// line.
func isText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range []byte(s) {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
