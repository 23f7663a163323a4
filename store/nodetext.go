package store

import (
	"encoding/binary"
	"math"
	"time"
)

// A lean record's text: where it lies in the table's arena, its flags, and how it is written
// and read there.

// textRef is a record's flags (top byte), the chunk of its text (next 24 bits) and the
// offset in the chunk (low 32 bits).
type textRef uint64

func makeRef(flags uint8, chunk, off int) textRef {
	return textRef(flags)<<56 | textRef(chunk)<<32 | textRef(uint32(off))
}
func (r textRef) flags() uint8         { return uint8(r >> 56) }
func (r textRef) has(f uint8) bool     { return r.flags()&f != 0 }
func (r textRef) chunk() int           { return int(r >> 32 & 0xffffff) }
func (r textRef) offset() int          { return int(uint32(r)) }
func (r textRef) with(f uint8) textRef { return r | textRef(f)<<56 }

const (
	flagDead     = 1 << iota // deleted: the slot waits for a rebuild
	flagSig                  // Signature is not nil
	flagVerified             // SignatureVerified
	flagTS                   // RegistrationTS is not nil
	flagFarFirst             // FirstSeen is outside Unix nanoseconds' range, and kept in the text
	flagPlain                // see NodeRow.Plain
	flagDIDShort             // DID is did:svrp:n: and the short body: derived, not in the text
	flagDIDFull              // DID is did:svrp: and the key's hex: derived, not in the text
)

// A record's text: uvarints seq, then the lengths of the DID (unless derived), endpoint,
// signature (with flagSig) and origin; the registration ts (8 bytes, with flagTS); FirstSeen
// as Unix seconds and nanoseconds (varint, uvarint; with flagFarFirst); the region and the
// capability list when inText (a length, or count+1 with 0 for nil, then length and bytes
// of each); then the bytes of the DID, endpoint, signature and origin.

// nodeText is a record's text, read: its strings are the arena's.
type nodeText struct {
	seq                        uint64
	did, endpoint, sig, origin string
	ts                         int64
	first                      time.Time // with flagFarFirst
	region                     string    // when the record's region is inText
	caps                       []string  // when the record's caps are inText
	size                       int       // the text's length in the arena
}

// readText reads the text of rec from chunks.
func readText(chunks []string, rec *leanNode) nodeText {
	r := rec.text
	s := chunks[r.chunk()][r.offset():]
	var t nodeText
	i := 0
	next := func() uint64 {
		v, n := uvarint(s[i:])
		i += n
		return v
	}
	str := func(n uint64) string {
		v := s[i : i+int(n)]
		i += int(n)
		return v
	}
	t.seq = next()
	var didLen, sigLen uint64
	if !r.has(flagDIDShort | flagDIDFull) {
		didLen = next()
	}
	endLen := next()
	if r.has(flagSig) {
		sigLen = next()
	}
	originLen := next()
	if r.has(flagTS) {
		t.ts = int64(binary.BigEndian.Uint64([]byte(s[i : i+8])))
		i += 8
	}
	if r.has(flagFarFirst) {
		sec := zigzag(next())
		t.first = time.Unix(sec, int64(next())).UTC()
	}
	if rec.region == inText {
		t.region = str(next())
	}
	if rec.caps == inText {
		if n := next(); n > 0 {
			t.caps = make([]string, n-1)
			for j := range t.caps {
				t.caps[j] = str(next())
			}
		}
	}
	t.did, t.endpoint, t.sig, t.origin = str(didLen), str(endLen), str(sigLen), str(originLen)
	t.size = i
	return t
}

// uvarint reads a uvarint written by binary.AppendUvarint from the start of s.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		c := s[i]
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, i + 1
		}
		shift += 7
	}
	return x, len(s)
}

func zigzag(u uint64) int64 {
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// farTime is the seen column's mark of a last_seen outside Unix nanoseconds' range, kept in
// the table's farSeen instead.
const farTime = math.MinInt64

// nanosOf returns t in Unix nanoseconds, or false when that range cannot hold it.
func nanosOf(t time.Time) (int64, bool) {
	if y := t.Year(); y < 1678 || y > 2261 {
		return 0, false
	}
	return t.UnixNano(), true
}

// plainText reports whether s is printable ASCII other than '"', '\\', '<', '>' and '&'.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// isHexOf reports whether s is the lowercase hex of b.
func isHexOf(s string, b []byte) bool {
	const digits = "0123456789abcdef"
	if len(s) != 2*len(b) {
		return false
	}
	for i, c := range b {
		if s[2*i] != digits[c>>4] || s[2*i+1] != digits[c&0xf] {
			return false
		}
	}
	return true
}

const (
	shortDIDPrefix = "did:svrp:n:"
	fullDIDPrefix  = "did:svrp:"
)
