package sigverify

import (
	"crypto/rand"
	"crypto/sha512"

	"filippo.io/edwards25519"
)

// keyCacheSize bounds the decoded keys one checker keeps: about 200 bytes each, so a few
// MiB, enough for the keys that send heartbeats to a registry of tens of thousands of nodes.
const keyCacheSize = 1 << 14

// checker judges admissible signatures by the cofactored equation, alone or in batches,
// keeping the points of the keys it decoded, as ed25519consensus does each time. It is
// used by one goroutine at a time.
type checker struct {
	keys map[[32]byte]*edwards25519.Point

	// Reused from batch to batch.
	scalars []edwards25519.Scalar
	points  []*edwards25519.Point
	coeffs  []*edwards25519.Scalar
	rs      []edwards25519.Point
	random  []byte
	idx     []int
	hashed  []byte
}

// key returns the point pub (32 bytes) encodes, decoded once.
func (c *checker) key(pub []byte) (*edwards25519.Point, bool) {
	k := [32]byte(pub)
	if p, ok := c.keys[k]; ok {
		return p, true
	}
	p, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return nil, false
	}
	if c.keys == nil {
		c.keys = make(map[[32]byte]*edwards25519.Point)
	}
	if len(c.keys) >= keyCacheSize {
		for old := range c.keys {
			delete(c.keys, old)
			break
		}
	}
	c.keys[k] = p
	return p, true
}

// challenge sets k to SHA-512(R ‖ A ‖ M) mod L, hashing from a buffer the checker reuses.
func (c *checker) challenge(k *edwards25519.Scalar, e Entry) *edwards25519.Scalar {
	c.hashed = append(append(append(c.hashed[:0], e.Sig[:32]...), e.Key...), e.Msg...)
	d := sha512.Sum512(c.hashed)
	k.SetUniformBytes(d[:])
	return k
}

// single checks one admissible entry: [8]([S]B − [k]A − R) = 0, ed25519consensus.Verify's
// equation with the key's point remembered.
func (c *checker) single(e Entry) bool {
	A, ok := c.key(e.Key)
	if !ok {
		return false
	}
	R, err := new(edwards25519.Point).SetBytes(e.Sig[:32])
	if err != nil {
		return false
	}
	s, err := new(edwards25519.Scalar).SetCanonicalBytes(e.Sig[32:])
	if err != nil {
		return false
	}
	var k edwards25519.Scalar
	minusA := new(edwards25519.Point).Negate(A)
	p := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(c.challenge(&k, e), minusA, s)
	p.Subtract(p, R)
	return p.MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// batch checks the admissible entries idx names with one equation, ed25519consensus's batch
// equation with random 128-bit z_i:
//
//	[8]([−Σ z_i·s_i]B + Σ [z_i]R_i + Σ [z_i·k_i]A_i) = 0
//
// It holds whenever every entry's own equation does, and fails, but with probability
// 2^-128, when any does not.
func (c *checker) batch(entries []Entry, idx []int) bool {
	n := len(idx)
	c.scalars = grow(c.scalars, 1+2*n)
	c.coeffs = grow(c.coeffs, 1+2*n)
	c.points = grow(c.points, 1+2*n)
	c.rs = grow(c.rs, n)
	c.random = grow(c.random, 16*n)
	if _, err := rand.Read(c.random); err != nil {
		return false
	}
	for i := range c.coeffs {
		c.coeffs[i] = &c.scalars[i]
	}
	bCoeff := c.coeffs[0]
	bCoeff.Set(edwards25519.NewScalar())
	c.points[0] = basepoint
	var zBytes [32]byte
	var s, k edwards25519.Scalar
	for j, i := range idx {
		e := entries[i]
		A, ok := c.key(e.Key)
		if !ok {
			return false
		}
		if _, err := c.rs[j].SetBytes(e.Sig[:32]); err != nil {
			return false
		}
		if _, err := s.SetCanonicalBytes(e.Sig[32:]); err != nil {
			return false
		}
		copy(zBytes[:16], c.random[16*j:])
		z := c.coeffs[1+j]
		if _, err := z.SetCanonicalBytes(zBytes[:]); err != nil {
			return false
		}
		bCoeff.MultiplyAdd(z, &s, bCoeff)
		c.coeffs[1+n+j].Multiply(z, c.challenge(&k, e))
		c.points[1+j] = &c.rs[j]
		c.points[1+n+j] = A
	}
	bCoeff.Negate(bCoeff)
	check := new(edwards25519.Point).VarTimeMultiScalarMult(c.coeffs, c.points)
	return check.MultByCofactor(check).Equal(edwards25519.NewIdentityPoint()) == 1
}

// basepoint is B; the multi-scalar multiplication only reads it.
var basepoint = edwards25519.NewGeneratorPoint()

// grow returns s resized to n, reallocated only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// verify sets ok[i] to whether entries[i] verifies under the rule.
func (c *checker) verify(entries []Entry, ok []bool) {
	c.idx = c.idx[:0]
	for i, e := range entries {
		ok[i] = false
		if Admissible(e.Key, e.Sig) {
			c.idx = append(c.idx, i)
		}
	}
	c.settle(entries, c.idx, ok, false)
}

// settle decides the entries idx names. knownBad says that a batch of exactly these entries
// already failed, so it is split without being checked again. It reports whether all of
// them verify.
func (c *checker) settle(entries []Entry, idx []int, ok []bool, knownBad bool) bool {
	switch {
	case len(idx) == 0:
		return true
	case len(idx) == 1:
		// Alone, a signature gets the single equation, whatever its batch said.
		ok[idx[0]] = c.single(entries[idx[0]])
		return ok[idx[0]]
	}
	if !knownBad && c.batch(entries, idx) {
		for _, i := range idx {
			ok[i] = true
		}
		return true
	}
	half := len(idx) / 2
	// When the first half verifies, the failure is in the second, which is split at once.
	left := c.settle(entries, idx[:half], ok, false)
	c.settle(entries, idx[half:], ok, left)
	return false
}
