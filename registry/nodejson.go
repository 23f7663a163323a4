package registry

import (
	"encoding/hex"
	"strconv"
	"unicode/utf8"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/store"
)

// The node listings are the registry's largest answers: 100,000 nodes make about 45 MB of
// JSON. Encoding them with encoding/json goes through a NodeView per record and a buffer
// that doubles as it grows, several times the answer's size in garbage. appendNodeJSON
// writes a record straight into one buffer instead, producing exactly the bytes that
// json.Marshal(nodeView(n)) produces (a property test holds it to that).

// appendNodeJSON appends the JSON of n as NodeView renders it.
func appendNodeJSON(b []byte, n store.Node) []byte {
	b = append(b, `{"did":`...)
	b = appendJSONString(b, n.DID)
	b = append(b, `,"public_key":"`...)
	b = hex.AppendEncode(b, n.Key[:])
	b = append(b, `","endpoint":`...)
	b = appendJSONString(b, n.Endpoint)
	b = append(b, `,"capabilities":[`...)
	for i, c := range n.Capabilities {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c)
	}
	b = append(b, `],"region":`...)
	if n.Region == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, n.Region)
	}
	b = append(b, `,"status":"active","last_seen":"`...)
	b = canonical.AppendTime(b, n.LastSeen)
	b = append(b, `","first_seen":"`...)
	b = canonical.AppendTime(b, n.FirstSeen)
	b = append(b, `","signature":`...)
	if n.Signature == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *n.Signature)
	}
	b = append(b, `,"signature_present":`...)
	b = strconv.AppendBool(b, n.Signature != nil)
	b = append(b, `,"signature_verified":`...)
	b = strconv.AppendBool(b, n.SignatureVerified)
	b = append(b, `,"reachability":"`...)
	b = append(b, Reachability(n.Endpoint)...)
	b = append(b, `","registration_ts":`...)
	if n.RegistrationTS == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *n.RegistrationTS, 10)
	}
	return append(b, '}')
}

// nodeJSONSize estimates the length of appendNodeJSON's output, so that a listing's buffer
// is allocated once.
func nodeJSONSize(n store.Node) int {
	size := 370 + len(n.DID) + len(n.Endpoint) + len(n.Region)
	for _, c := range n.Capabilities {
		size += len(c) + 3
	}
	if n.Signature != nil {
		size += len(*n.Signature)
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
