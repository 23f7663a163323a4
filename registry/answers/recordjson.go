package answers

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The bytes of one node record in a listing: its JSON as NodeView renders it and its /peers
// line, written straight into the answer, and their lengths computed without writing them.

// appendPeerLine appends n's /peers line.
func appendPeerLine(b []byte, n *store.NodeRow) []byte {
	b = n.AppendDID(b)
	b = append(b, ' ')
	b = append(b, n.Key.Base58()...)
	b = append(b, ' ')
	b = append(b, n.Endpoint...)
	return append(b, '\n')
}

// The node listings are the registry's largest answers, a few hundred bytes of JSON per node.
// Encoding them with encoding/json goes through a NodeView per record and a buffer that
// doubles as it grows, several times the answer's size in garbage. appendNodeJSON
// writes a record straight into one buffer instead, producing exactly the bytes that
// json.Marshal(NodeView(n)) produces (a property test holds it to that).

// NodeView is the view of the node record n that the listings and a registration's answer
// give.
func NodeView(n store.Node) api.NodeView {
	caps := n.Capabilities
	if caps == nil {
		caps = []string{}
	}
	v := api.NodeView{
		DID: n.DID, PublicKey: n.Key.Hex(), Endpoint: n.Endpoint,
		Capabilities: caps, Status: "active",
		LastSeen: canonical.FormatTime(n.LastSeen), FirstSeen: canonical.FormatTime(n.FirstSeen),
		Signature: n.Signature, SignaturePresent: n.Signature != nil,
		SignatureVerified: n.SignatureVerified, Reachability: api.Reachability(n.Endpoint),
		RegistrationTS: n.RegistrationTS,
	}
	if n.Region != "" {
		v.Region = &n.Region
	}
	return v
}

// appendNodeJSON appends the JSON of n as NodeView renders it.
func appendNodeJSON(b []byte, n store.Node) []byte {
	row := store.RowOf(&n)
	return appendRecordJSON(b, &row, api.Reachability(n.Endpoint), nil)
}

// timeMemo keeps the last times a listing wrote, as text: the records of a table share a
// few seconds of last_seen and first_seen, and formatting a time costs more than the rest of
// a record's fields.
type timeMemo struct {
	at   [2]int64
	text [2][]byte
}

// appendTime appends canonical.AppendTime of t, from slot of the memo when it holds t.
func (m *timeMemo) appendTime(b []byte, slot int, t time.Time) []byte {
	if m == nil || t.Nanosecond() != 0 {
		return canonical.AppendTime(b, t)
	}
	if sec := t.Unix(); m.text[slot] == nil || m.at[slot] != sec {
		m.at[slot], m.text[slot] = sec, canonical.AppendTime(m.text[slot][:0], t)
	}
	return append(b, m.text[slot]...)
}

// appendRecordJSON appends the JSON of *n as NodeView renders it, given its reachability,
// formatting its times through memo when it is not nil.
func appendRecordJSON(b []byte, n *store.NodeRow, reach string, memo *timeMemo) []byte {
	b = append(b, `{"did":`...)
	if n.DIDDerived() {
		b = append(n.AppendDID(append(b, '"')), '"')
	} else {
		b = appendText(b, n.DID, n.Plain)
	}
	b = append(b, `,"public_key":"`...)
	b = hex.AppendEncode(b, n.Key[:])
	b = append(b, `","endpoint":`...)
	b = appendText(b, n.Endpoint, n.Plain)
	b = append(b, `,"capabilities":[`...)
	for i, c := range n.Capabilities {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendText(b, c, n.Plain)
	}
	b = append(b, `],"region":`...)
	if n.Region == "" {
		b = append(b, "null"...)
	} else {
		b = appendText(b, n.Region, n.Plain)
	}
	b = append(b, `,"status":"active","last_seen":"`...)
	b = memo.appendTime(b, 0, n.LastSeen)
	b = append(b, `","first_seen":"`...)
	b = memo.appendTime(b, 1, n.FirstSeen)
	b = append(b, `","signature":`...)
	if !n.HasSignature {
		b = append(b, "null"...)
	} else {
		b = appendText(b, n.Signature, n.Plain)
	}
	b = append(b, `,"signature_present":`...)
	b = strconv.AppendBool(b, n.HasSignature)
	b = append(b, `,"signature_verified":`...)
	b = strconv.AppendBool(b, n.SignatureVerified)
	b = append(b, `,"reachability":"`...)
	b = append(b, reach...)
	b = append(b, `","registration_ts":`...)
	if !n.HasRegistrationTS {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, n.RegistrationTS, 10)
	}
	return append(b, '}')
}

// appendText appends s as a JSON string: as it is when plain (store.NodeRow.Plain), else
// through appendJSONString.
func appendText(b []byte, s string, plain bool) []byte {
	if !plain {
		return appendJSONString(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// textLen is the length of appendText's output.
func textLen(s string, plain bool) int {
	if plain {
		return len(s) + 2
	}
	return jsonStringLen(s)
}

// nodeJSONLen is the length of appendRecordJSON's output for *n of reachability reach,
// computed without writing it.
func nodeJSONLen(n *store.NodeRow, reach string) int {
	didLen := n.DIDLen() + 2
	if !n.DIDDerived() {
		didLen = textLen(n.DID, n.Plain)
	}
	size := len(`{"did":`) + didLen + len(`,"public_key":"`) + 2*len(n.Key) +
		len(`","endpoint":`) + textLen(n.Endpoint, n.Plain) + len(`,"capabilities":[`) + len(`],"region":`) +
		len(`,"status":"active","last_seen":"`) + len(canonical.TimeLayout) +
		len(`","first_seen":"`) + len(canonical.TimeLayout) + len(`","signature":`) +
		len(`,"signature_present":`) + len(`,"signature_verified":`) + len(`,"reachability":"`) +
		len(reach) + len(`","registration_ts":`) + len(`}`)
	for i, c := range n.Capabilities {
		if i > 0 {
			size++
		}
		size += textLen(c, n.Plain)
	}
	if n.Region == "" {
		size += len("null")
	} else {
		size += textLen(n.Region, n.Plain)
	}
	if !n.HasSignature {
		size += len("null") + len("false")
	} else {
		size += textLen(n.Signature, n.Plain) + len("true")
	}
	if n.SignatureVerified {
		size += len("true")
	} else {
		size += len("false")
	}
	if !n.HasRegistrationTS {
		size += len("null")
	} else {
		size += intLen(n.RegistrationTS)
	}
	return size
}

// intLen is the length of v in decimal.
func intLen(v int64) int {
	size := 1
	if v < 0 {
		size++
	}
	for ; v >= 10 || v <= -10; v /= 10 {
		size++
	}
	return size
}

// peerLineLen is the length of appendPeerLine's output for n, computed without writing it.
func peerLineLen(n *store.NodeRow) int {
	return n.DIDLen() + 1 + base58Len(n.Key[:]) + 1 + len(n.Endpoint) + 1
}

// base58Pow holds 58^d for d = 0…44 as 33 big-endian bytes: the smallest numbers of
// d+1 base58 digits, against which a key's length is read without encoding it.
var base58Pow = func() (pow [45][33]byte) {
	p := big.NewInt(1)
	for d := range pow {
		p.FillBytes(pow[d][:])
		p.Mul(p, big.NewInt(58))
	}
	return pow
}()

// base58Len is the length of the base58 text of b (Bitcoin alphabet, one '1' per leading
// zero byte), for b of at most 32 bytes.
func base58Len(b []byte) int {
	if len(b) == 32 && b[0] != 0 {
		// The common case, a key of 32 bytes whose first is not zero: at least 58^42 and
		// less than 58^44, so one comparison decides.
		if bytes.Compare(b, base58Pow[43][1:]) >= 0 {
			return 44
		}
		return 43
	}
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	var v [33]byte
	copy(v[33-len(b):], b)
	digits := 0
	for digits < len(base58Pow) && bytes.Compare(v[:], base58Pow[digits][:]) >= 0 {
		digits++
	}
	return zeros + digits
}

// jsonStringLen is the length of appendJSONString's output for s, computed without writing it.
func jsonStringLen(s string) int {
	size := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
				size++
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				size += 2
			default:
				size += 6
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1, r == '\u2028' || r == '\u2029':
			size += 6
		default:
			size += n
		}
		i += n
	}
	return size
}

// appendJSONString appends s as a JSON string exactly as encoding/json writes it: '"' and
// '\\' escaped, control characters as \n, \r, \t, \b, \f or \u00XX, the HTML characters <, > and &
// as \u003c, \u003e and \u0026, U+2028 and U+2029 as escapes, and invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const digits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', digits[c>>4], digits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', digits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
