package fuzz

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"testing"

	"filippo.io/edwards25519"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/sigverify"
)

// FuzzBatchVerify feeds the same keys, messages and signatures to the batch path
// (sigverify.VerifyBatch and a running sigverify.Batcher), to sigverify.Verify and to
// crypto/ed25519 one by one. The three paths of the rule must agree exactly. crypto/ed25519
// may differ from them only where docs/protocol.md §1.1 says it can: it accepts what the
// rule refuses only under a non-canonical or small-order key, and it refuses what the rule
// accepts only when [S]B − R − [k]A is a small-order point other than the identity.
//
// seed derives three keys, msg is the message, and each byte of ops makes one entry: its low
// nibble picks how the signature is made (honest, a flipped bit, a small-order R, R or the
// key with a torsion part, a small-order or non-canonical key with its forgery, a
// non-canonical R, S + L, raw bytes), its high nibble a parameter.
func FuzzBatchVerify(f *testing.F) {
	n := 0
	for _, file := range []testkit.SignedFile{testkit.Canonical(f), testkit.Extensions(f)} {
		for _, c := range file.Cases {
			seed, err1 := hex.DecodeString(c.SeedHex)
			msg, err2 := hex.DecodeString(c.ExpectedHex)
			if err1 != nil || err2 != nil || len(seed) != ed25519.SeedSize {
				continue
			}
			f.Add(seed, msg, []byte{byte(n % 16), byte(n%16)<<4 | 1, 0x23, 0x34})
			n++
		}
	}
	requireVectorSeeds(f, n)
	batcher := sigverify.NewBatcher()
	f.Cleanup(batcher.Close)
	f.Fuzz(func(t *testing.T, seed, msg, ops []byte) {
		if len(ops) == 0 || len(ops) > 24 || len(msg) > 4096 {
			return
		}
		entries := make([]sigverify.Entry, len(ops))
		for i, op := range ops {
			entries[i] = makeEntry(seed, msg, i, op)
		}
		batch := make([]bool, len(entries))
		sigverify.VerifyBatch(entries, batch)
		batched := make([]bool, len(entries))
		testkit.Together(len(entries), func(i int) {
			e := entries[i]
			batched[i] = batcher.Verify(e.Key, e.Msg, e.Sig)
		})
		for i, e := range entries {
			single := sigverify.Verify(e.Key, e.Msg, e.Sig)
			if batch[i] != single || batched[i] != single {
				t.Fatalf("entry %d (op %#x): Verify %v, VerifyBatch %v, Batcher %v", i, ops[i], single, batch[i], batched[i])
			}
			plain := ed25519.Verify(e.Key, e.Msg, e.Sig)
			switch {
			case single == plain:
			case plain && sigverify.KeyAllowed(e.Key):
				t.Fatalf("entry %d (op %#x): crypto/ed25519 accepts under an allowed key what the rule refuses", i, ops[i])
			case single && !smallOrderResidual(e):
				t.Fatalf("entry %d (op %#x): the rule accepts what crypto/ed25519 refuses, and not by a small-order residue", i, ops[i])
			}
		}
	})
}

// fuzzKey is key j of seed: the private key and its secret scalar a.
func fuzzKey(seed []byte, j int) (ed25519.PrivateKey, *edwards25519.Scalar) {
	s := sha256.Sum256(append(append([]byte(nil), seed...), byte(j)))
	priv := ed25519.NewKeyFromSeed(s[:])
	h := sha512.Sum512(s[:])
	a, _ := new(edwards25519.Scalar).SetBytesWithClamping(h[:32])
	return priv, a
}

// torsionPoint returns the small-order point i (mod 8) as a multiple of one of order 8.
func torsionPoint(i int) *edwards25519.Point {
	g, _ := new(edwards25519.Point).SetBytes(mustHex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"))
	p := edwards25519.NewIdentityPoint()
	for range i % 8 {
		p.Add(p, g)
	}
	return p
}

// Non-canonical encodings of the identity: y = p + 1, and y = 1 with the sign bit set.
var nonCanonicalIdentity = [][]byte{
	mustHex("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
	mustHex("0100000000000000000000000000000000000000000000000000000000000080"),
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// holderSignature is the signature only the holder of a can make over msg under the key
// encoded as pub with the nonce commitment encoded as rEnc: S = r + k·a, k over those bytes.
func holderSignature(a, r *edwards25519.Scalar, pub, rEnc, msg []byte) []byte {
	h := sha512.New()
	h.Write(rEnc)
	h.Write(pub)
	h.Write(msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
	s := new(edwards25519.Scalar).MultiplyAdd(k, a, r)
	return append(append([]byte(nil), rEnc...), s.Bytes()...)
}

func makeEntry(seed, msg []byte, i int, op byte) sigverify.Entry {
	priv, a := fuzzKey(seed, i%3)
	pub := priv.Public().(ed25519.PublicKey)
	m := append(append([]byte(nil), msg...), byte(i))
	param := int(op >> 4)
	var rb [64]byte
	rb[0], rb[1] = byte(i), op
	r, _ := new(edwards25519.Scalar).SetUniformBytes(rb[:])
	R := new(edwards25519.Point).ScalarBaseMult(r)
	sig := ed25519.Sign(priv, m)
	switch op & 0x0f {
	case 1: // one flipped bit anywhere in the signature
		sig[(param*37+i*11)%64] ^= 1 << (param % 8)
	case 2: // a small-order R, S kept
		copy(sig, torsionPoint(param).Bytes())
	case 3: // R with a torsion part, by the key's holder
		R.Add(R, torsionPoint(param))
		sig = holderSignature(a, r, pub, R.Bytes(), m)
	case 4: // the key with a torsion part, by the holder of its prime-order part
		A := new(edwards25519.Point).ScalarBaseMult(a)
		pub = A.Add(A, torsionPoint(param)).Bytes()
		sig = holderSignature(a, r, pub, R.Bytes(), m)
	case 5: // a small-order key, and the forgery anyone can make under it
		pub = torsionPoint(param).Bytes()
		sig = holderSignature(edwards25519.NewScalar(), r, pub, R.Bytes(), m)
	case 6: // a non-canonical encoding of the identity as the key, and its forgery
		pub = nonCanonicalIdentity[param%2]
		sig = holderSignature(edwards25519.NewScalar(), r, pub, R.Bytes(), m)
	case 7: // R the identity, encoded non-canonically, by the key's holder
		sig = holderSignature(a, edwards25519.NewScalar(), pub, nonCanonicalIdentity[param%2], m)
	case 8: // S + L
		sig = append(sig[:32], testkit.AddOrder(sig[32:])...)
	case 9: // another entry's message
		m = append(m, 0)
	case 10: // raw bytes: the seed as key, the message as signature
		pub = pad(seed, 32)
		sig = pad(msg, 64)
	}
	return sigverify.Entry{Key: pub, Msg: m, Sig: sig}
}

func pad(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

// smallOrderResidual reports whether e's key and R decode, its S is below L, and
// [S]B − R − [k]A is a small-order point other than the identity: the one case where the
// cofactored equation holds and crypto/ed25519's does not.
func smallOrderResidual(e sigverify.Entry) bool {
	A, errA := new(edwards25519.Point).SetBytes(e.Key)
	R, errR := new(edwards25519.Point).SetBytes(e.Sig[:32])
	S, errS := new(edwards25519.Scalar).SetCanonicalBytes(e.Sig[32:])
	if errA != nil || errR != nil || errS != nil {
		return false
	}
	h := sha512.New()
	h.Write(e.Sig[:32])
	h.Write(e.Key)
	h.Write(e.Msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
	res := new(edwards25519.Point).ScalarBaseMult(S)
	res.Subtract(res, R)
	res.Subtract(res, new(edwards25519.Point).ScalarMult(k, A))
	id := edwards25519.NewIdentityPoint()
	return res.Equal(id) != 1 && new(edwards25519.Point).MultByCofactor(res).Equal(id) == 1
}

// TestBatchEntriesReachEveryDifference checks that the entries FuzzBatchVerify makes reach
// each case where the rule and crypto/ed25519 part, so the fuzzer starts at the boundaries.
func TestBatchEntriesReachEveryDifference(t *testing.T) {
	seed := []byte("svrp")
	for _, c := range []struct {
		name        string
		op          byte
		rule, plain bool
	}{
		{"honest", 0x00, true, true},
		{"flipped bit", 0x31, false, false},
		{"small-order R", 0x22, false, false},
		{"R with a torsion part", 0x13, true, false},
		{"R plus the identity", 0x03, true, true},
		{"key with a torsion part", 0x14, true, false},
		{"the identity as key", 0x05, false, true},
		{"non-canonical identity key", 0x06, false, true},
		{"non-canonical identity key, sign bit", 0x16, false, true},
		{"non-canonical R", 0x07, false, false},
		{"S + L", 0x08, false, false},
		{"other message", 0x09, false, false},
	} {
		e := makeEntry(seed, []byte("m"), 1, c.op)
		if got := sigverify.Verify(e.Key, e.Msg, e.Sig); got != c.rule {
			t.Errorf("%s: rule %v, want %v", c.name, got, c.rule)
		}
		if got := ed25519.Verify(e.Key, e.Msg, e.Sig); got != c.plain {
			t.Errorf("%s: crypto/ed25519 %v, want %v", c.name, got, c.plain)
		}
	}
}
