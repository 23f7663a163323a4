package testkit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"
)

// SeedKey is the key of a seed written in hex, as the vectors write them. A seed that is not
// 32 bytes of hex is a mistake in the test or its vectors, not an input, so it panics rather
// than asking every fixture for a testing.TB.
func SeedKey(seedHex string) ed25519.PrivateKey {
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) != ed25519.SeedSize {
		panic(fmt.Sprintf("testkit: bad seed %q", seedHex))
	}
	return ed25519.NewKeyFromSeed(seed)
}

// TextKey is a key derived from a text: the same text gives the same key in every run.
func TextKey(text string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(text))
	return ed25519.NewKeyFromSeed(seed[:])
}

// LabelKey is a key of this test, named by label, so that every test has its own keys and a
// failure reproduces exactly.
func LabelKey(t testing.TB, label string) ed25519.PrivateKey {
	return TextKey(t.Name() + "/" + label)
}

// IndexKey is the i-th of a numbered series of keys, for benchmarks that need many.
func IndexKey(i int) ed25519.PrivateKey {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i))
	seed = sha256.Sum256(seed[:])
	return ed25519.NewKeyFromSeed(seed[:])
}

// RandomKey is a key no other run will have, for tests against a store that outlives the
// test. It cannot fail: crypto/rand ends the program rather than return an error.
func RandomKey() ed25519.PrivateKey {
	_, k, _ := ed25519.GenerateKey(nil)
	return k
}
