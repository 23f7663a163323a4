package binding

import (
	"crypto/sha256"
	"io"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/proto"
)

// Short codes and binding tokens are the two secrets that let an operator find a session. The
// registry returns them once, at initiate, and keeps only their SHA-256 ([HashSecret]); a
// resolve looks the hash up, so a failure takes the same path whether or not the secret ever
// existed. They appear in no error text.
//
// A short code is typed by a person, so on input it is forgiving in two narrow ways (ASCII
// case, and the spaces and dashes people add to group it); nothing else is mapped, since
// Unicode case mapping would turn look-alikes such as U+017F or U+212A into alphabet symbols.
// A binding token is base58, which is case-sensitive, and is pasted: it is taken exactly as
// presented.

// NewShortCode draws a short code: [ShortCodeLength] symbols of [ShortCodeAlphabet], uniform,
// from rand (crypto/rand.Reader in the registry). Each symbol is a random byte b < 248 mapped
// to b % 31; bytes from 248 up are thrown away, as keeping them would make the first eight
// symbols more likely than the rest.
func NewShortCode(rand io.Reader) (string, error) {
	var code [ShortCodeLength]byte
	var buf [codeReadSize]byte
	n := 0
	for range maxCodeReads {
		if _, err := io.ReadFull(rand, buf[:]); err != nil {
			return "", proto.New(proto.Internal, "the random source failed while drawing a short code")
		}
		for _, b := range buf {
			if int(b) >= codeRejectFrom {
				continue
			}
			code[n] = ShortCodeAlphabet[int(b)%len(ShortCodeAlphabet)]
			if n++; n == len(code) {
				return string(code[:]), nil
			}
		}
	}
	return "", proto.New(proto.Internal, "the random source keeps giving bytes a short code cannot use")
}

// NewBindingToken draws a binding token: base58 of [BindingTokenBytes] bytes from rand.
func NewBindingToken(rand io.Reader) (string, error) {
	var b [BindingTokenBytes]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", proto.New(proto.Internal, "the random source failed while drawing a binding token")
	}
	return base58.Encode(b[:]), nil
}

// NormalizeCode maps a presented short code to the form that was hashed at initiate
// (docs/protocol.md §1): ASCII a–z become A–Z, ASCII spaces (U+0020) and '-' are dropped, and every
// other byte is kept as it is. The result may still not be a code ([ValidShortCode]); it then
// matches no session. It is idempotent. Tokens are not normalised: see [NormalizePresented].
func NormalizeCode(in string) string {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case c == ' ' || c == '-':
		case c >= 'a' && c <= 'z':
			out = append(out, c-'a'+'A')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// ValidShortCode reports whether s is a short code in its canonical form: exactly
// [ShortCodeLength] symbols of [ShortCodeAlphabet].
func ValidShortCode(s string) bool {
	if len(s) != ShortCodeLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !inAlphabet(s[i]) {
			return false
		}
	}
	return true
}

func inAlphabet(c byte) bool {
	for i := 0; i < len(ShortCodeAlphabet); i++ {
		if ShortCodeAlphabet[i] == c {
			return true
		}
	}
	return false
}

// NormalizePresented returns the form of a presented secret under which it is hashed and its
// failures are counted, and whether it is a short code. A string that normalises to
// [ShortCodeLength] bytes is a short code, in its normalised form; anything else is a binding
// token, unchanged. The two cannot be confused: a token is base58 of 16 bytes, at least 16
// characters with no space or '-'.
//
// When the request says which one it carries (a short_code or a binding_token field), the
// registry may use [NormalizeCode] or the token as is directly; this is for callers that only
// have the string.
func NormalizePresented(in string) (norm string, isCode bool) {
	if n := NormalizeCode(in); len(n) == ShortCodeLength {
		return n, true
	}
	return in, false
}

// HashSecret returns the SHA-256 of a secret's bytes, the only form in which short codes and
// binding tokens are stored. Pass a short code through [NormalizeCode] first; pass a token as
// presented.
func HashSecret(s string) [32]byte { return sha256.Sum256([]byte(s)) }
