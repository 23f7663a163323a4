package didkey_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
)

// The collision pair of testdata/collision: its short operator DIDs are equal and its 10-hex
// ones differ, each public key is the one the file says, and each seed is one of the
// derivations the file's comment names.
func TestCollisionPair(t *testing.T) {
	f := testkit.Collision(t)
	a, b := testkit.CollisionRoots(t)
	var dids [2][2]string
	for i, k := range []struct {
		priv         []byte
		seed, public string
		prefix       string
	}{{a, f.SeedA, f.PublicA, f.SHA256PrefixA}, {b, f.SeedB, f.PublicB, f.SHA256PrefixB}} {
		pub, err := didkey.KeyFromEd25519(k.priv[32:])
		if err != nil {
			t.Fatal(err)
		}
		if pub.Hex() != k.public {
			t.Errorf("key %d: public key %s, file says %s", i, pub.Hex(), k.public)
		}
		sum := sha256.Sum256(pub[:])
		if got := hex.EncodeToString(sum[:5]); got != k.prefix {
			t.Errorf("key %d: SHA-256 prefix %s, file says %s", i, got, k.prefix)
		}
		for j, form := range []didkey.Form{didkey.FormShort, didkey.FormFallback} {
			d, err := didkey.OperatorDID(pub, form)
			if err != nil {
				t.Fatal(err)
			}
			dids[i][j] = d.String()
		}
		if !derivedSeed(k.seed) {
			t.Errorf("key %d: seed %s is not SHA-256(\"svrp-col\" || i) for any i below 2^20", i, k.seed)
		}
	}
	if dids[0][0] != dids[1][0] {
		t.Errorf("short DIDs differ: %s, %s", dids[0][0], dids[1][0])
	}
	if dids[0][1] == dids[1][1] {
		t.Errorf("10-hex DIDs agree: %s", dids[0][1])
	}
}

func derivedSeed(seed string) bool {
	msg := []byte("svrp-col\x00\x00\x00\x00\x00\x00\x00\x00")
	for i := uint64(0); i < 1<<20; i++ {
		binary.BigEndian.PutUint64(msg[8:], i)
		sum := sha256.Sum256(msg)
		if hex.EncodeToString(sum[:]) == seed {
			return true
		}
	}
	return false
}
