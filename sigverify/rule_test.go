package sigverify

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"

	"github.com/svrp/svrp/internal/testkit"
)

// torsion returns the eight points of small order, as multiples of one of order 8.
func torsion(t testing.TB) []*edwards25519.Point {
	t.Helper()
	g, err := new(edwards25519.Point).SetBytes(smallOrder[6][:])
	if err != nil {
		t.Fatal(err)
	}
	pts := []*edwards25519.Point{edwards25519.NewIdentityPoint()}
	for range 7 {
		pts = append(pts, new(edwards25519.Point).Add(pts[len(pts)-1], g))
	}
	return pts
}

func TestSmallOrderListIsTheTorsionSubgroup(t *testing.T) {
	want := map[[32]byte]bool{}
	for _, p := range torsion(t) {
		want[[32]byte(p.Bytes())] = true
		if q := new(edwards25519.Point).MultByCofactor(p); q.Equal(edwards25519.NewIdentityPoint()) != 1 {
			t.Fatalf("%x is not of small order", p.Bytes())
		}
	}
	if len(want) != 8 {
		t.Fatalf("found %d distinct small-order points, want 8", len(want))
	}
	for _, b := range smallOrder {
		if !want[b] {
			t.Errorf("%x is listed but is no small-order point", b)
		}
		delete(want, b)
	}
	if len(want) != 0 {
		t.Errorf("%d small-order points missing from the list", len(want))
	}
}

// libraryCanonical is the definition canonicalPoint must match: the bytes decode to a point
// whose encoding is those bytes. For bytes that decode to no point it answers as
// canonicalPoint would for a y below p.
func libraryCanonical(b []byte) (canonical, decodes bool) {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return false, false
	}
	return string(p.Bytes()) == string(b), true
}

func TestCanonicalPointMatchesTheLibrary(t *testing.T) {
	var cases [][]byte
	for low := 0; low < 256; low++ {
		for _, top := range []byte{0x7f, 0xff} {
			b := make([]byte, 32)
			for i := 1; i < 31; i++ {
				b[i] = 0xff
			}
			b[0], b[31] = byte(low), top
			cases = append(cases, b)
		}
	}
	for _, small := range []uint64{0, 1, 2, 3, 18, 19, 20} {
		for _, sign := range []byte{0, 0x80} {
			b := make([]byte, 32)
			binary.LittleEndian.PutUint64(b, small)
			b[31] |= sign
			cases = append(cases, b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		want, decodes := libraryCanonical(b)
		if !decodes {
			continue
		}
		if got := canonicalPoint(b); got != want {
			t.Errorf("canonicalPoint(%x) = %v, the library's round trip says %v", b, got, want)
		}
	}
}

func TestScalarBelowLMatchesTheLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := [][]byte{order[:], make([]byte, 32)}
	for d := range 3 {
		b := order
		b[0] += byte(d) - 1
		cases = append(cases, b[:])
	}
	for range 2000 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		b[31] &= 0x1f // near L, where the comparison is decided
		cases = append(cases, b)
	}
	for _, b := range cases {
		_, err := new(edwards25519.Scalar).SetCanonicalBytes(b)
		if got := scalarBelowL(b); got != (err == nil) {
			t.Errorf("scalarBelowL(%x) = %v, the library says canonical = %v", b, got, err == nil)
		}
	}
}

// holderSign makes the signature only seed's holder could make with R = [r]B + T, for the
// small-order point T: S = r + k·a with k over that R. crypto/ed25519 refuses it when T is
// not the identity; the rule accepts it.
func holderSign(seed []byte, r uint64, t *edwards25519.Point, msg []byte) (pub, sig []byte) {
	h := sha512.Sum512(seed)
	a, _ := new(edwards25519.Scalar).SetBytesWithClamping(h[:32])
	pub = new(edwards25519.Point).ScalarBaseMult(a).Bytes()
	var rb [64]byte
	binary.LittleEndian.PutUint64(rb[:], r+1)
	rs, _ := new(edwards25519.Scalar).SetUniformBytes(rb[:])
	R := new(edwards25519.Point).ScalarBaseMult(rs)
	R.Add(R, t)
	kh := sha512.New()
	kh.Write(R.Bytes())
	kh.Write(pub)
	kh.Write(msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(kh.Sum(nil))
	s := new(edwards25519.Scalar).MultiplyAdd(k, a, rs)
	return pub, append(R.Bytes(), s.Bytes()...)
}

func TestVerifyAgainstCryptoEd25519(t *testing.T) {
	seed := make([]byte, 32)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	msg := []byte("svrp")
	sig := ed25519.Sign(priv, msg)
	tor := torsion(t)
	mixedPub, mixedSig := holderSign(seed, 7, tor[3], msg)
	highS := append([]byte(nil), sig...)
	copy(highS[32:], testkit.AddOrder(sig[32:]))
	nonCanonR := append([]byte(nil), sig...)
	copy(nonCanonR[:32], []byte{0x01, 31: 0x80}) // the identity with its sign bit set
	forgedSmall, forgedSig := smallKeyForgery(t, msg)

	for _, c := range []struct {
		name          string
		pub, msg, sig []byte
		rule, crypto  bool
	}{
		{"honest", pub, msg, sig, true, true},
		{"other message", pub, []byte("svrq"), sig, false, false},
		{"flipped bit", pub, msg, flip(sig, 5), false, false},
		{"S + L", pub, msg, highS, false, false},
		{"non-canonical R", pub, msg, nonCanonR, false, false},
		{"R with a torsion part, by the key's holder", mixedPub, msg, mixedSig, true, false},
		{"small-order key, anyone's signature", forgedSmall, msg, forgedSig, false, true},
		{"short signature", pub, msg, sig[:63], false, false},
		{"short key", pub[:31], msg, sig, false, false},
	} {
		if got := Verify(c.pub, c.msg, c.sig); got != c.rule {
			t.Errorf("%s: Verify = %v, want %v", c.name, got, c.rule)
		}
		if len(c.pub) == 32 {
			if got := ed25519.Verify(c.pub, c.msg, c.sig); got != c.crypto {
				t.Errorf("%s: crypto/ed25519 = %v, the case says %v", c.name, got, c.crypto)
			}
		}
	}
}

// smallKeyForgery returns the identity as a key and a signature over msg that needs no secret:
// R = [S]B - [k]A with A the identity is R = [S]B.
func smallKeyForgery(t *testing.T, msg []byte) (pub, sig []byte) {
	t.Helper()
	pub = smallOrder[0][:]
	s, _ := new(edwards25519.Scalar).SetCanonicalBytes(append([]byte{9}, make([]byte, 31)...))
	R := new(edwards25519.Point).ScalarBaseMult(s)
	return pub, append(R.Bytes(), s.Bytes()...)
}

func flip(b []byte, bit int) []byte {
	c := append([]byte(nil), b...)
	c[bit/8] ^= 1 << (bit % 8)
	return c
}
