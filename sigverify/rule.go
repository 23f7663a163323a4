// Package sigverify is svrp's one Ed25519 verification rule (docs/protocol.md §11), and a
// [Batcher] that checks many signatures at once under that same rule.
//
// The rule is ZIP-215's cofactored equation, [8][S]B = [8]R + [8][k]A, applied after
// refusals that are made on the bytes alone: the key and R must be canonical encodings, the
// key must not be a point of small order, and S must be below the group order L. A
// signature is accepted by [Verify], by [VerifyBatch] and by a [Batcher] on exactly the same
// inputs, so a request's answer never depends on whether it was checked alone or with
// others. Verify is ed25519consensus.Verify (ZIP-215) behind those refusals; the batch path
// evaluates the same equations with filippo.io/edwards25519's group operations, ZIP-215's
// batch equation among them, so that it can keep each key's decoded point from one
// signature to the next. The fuzz target FuzzBatchVerify holds the two paths equal.
//
// It is not a signing package (crypto/ed25519 signs), and it knows nothing of svrp's
// messages: package canonical builds the bytes that are signed.
package sigverify

import (
	"crypto/ed25519"
	"encoding/hex"

	"github.com/hdevalence/ed25519consensus"
)

// A Verifier checks Ed25519 signatures under the rule. [Single] and *[Batcher] are
// Verifiers, and give the same answer for every input.
type Verifier interface {
	Verify(pub, msg, sig []byte) bool
}

// Single is the Verifier that checks each signature on its own, with [Verify].
type Single struct{}

// Verify implements [Verifier].
func (Single) Verify(pub, msg, sig []byte) bool { return Verify(pub, msg, sig) }

// Verify reports whether sig is pub's signature over msg under the rule.
func Verify(pub, msg, sig []byte) bool {
	return Admissible(pub, sig) && ed25519consensus.Verify(pub, msg, sig)
}

// Admissible makes the rule's refusals that need no curve arithmetic: pub is a canonical
// encoding of a point that is not of small order, R (the signature's first half) is a
// canonical encoding, and S (its second half) is below L. A signature that passes them is
// then judged by the cofactored equation alone.
func Admissible(pub, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && KeyAllowed(pub) &&
		canonicalPoint(sig[:32]) && scalarBelowL(sig[32:])
}

// KeyAllowed reports whether pub may be a signing key: 32 bytes, the canonical encoding of
// its point, and not one of the eight points of small order, under which anyone could make
// a signature that the cofactored equation accepts for any message.
func KeyAllowed(pub []byte) bool {
	if len(pub) != ed25519.PublicKeySize || !canonicalPoint(pub) {
		return false
	}
	for i := range smallOrder {
		if string(pub) == string(smallOrder[i][:]) {
			return false
		}
	}
	return true
}

// canonicalPoint reports whether b (32 bytes) is not one of the non-canonical encodings: a y
// coordinate of p = 2^255-19 or more, or the sign bit set on a point whose x is 0 (y = 1 or
// y = p-1). It does not decide whether b is a point at all; decoding does that.
func canonicalPoint(b []byte) bool {
	y := [32]byte(b)
	sign := y[31] >> 7
	y[31] &= 0x7f
	if sign == 1 && (y == one || y == pMinusOne) {
		return false
	}
	return !atLeastP(y)
}

// atLeastP reports whether the little-endian y is p = 2^255-19 or more: its top byte 0x7f,
// the bytes between all 0xff, and its low byte 0xed or more.
func atLeastP(y [32]byte) bool {
	if y[31] != 0x7f || y[0] < 0xed {
		return false
	}
	for _, c := range y[1:31] {
		if c != 0xff {
			return false
		}
	}
	return true
}

// order is L = 2^252 + 27742317777372353535851937790883648493, little-endian.
var order = [32]byte{
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
}

// scalarBelowL reports whether the little-endian s (32 bytes) is below L.
func scalarBelowL(s []byte) bool {
	for i := 31; i >= 0; i-- {
		switch {
		case s[i] < order[i]:
			return true
		case s[i] > order[i]:
			return false
		}
	}
	return false
}

var (
	one       = [32]byte{1}
	pMinusOne = [32]byte{
		0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
	}
)

// smallOrder are the canonical encodings of the eight points of order 1, 2, 4 and 8 (the
// test derives them from the curve).
var smallOrder = [8][32]byte{
	{0x01}, // the identity
	pMinusOne,
	{},         // order 4, x > 0 even
	{31: 0x80}, // order 4, the other x
	hex32("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"),
	hex32("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85"),
	hex32("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),
	hex32("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa"),
}

func hex32(s string) [32]byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		panic("sigverify: bad constant " + s)
	}
	return [32]byte(b)
}
