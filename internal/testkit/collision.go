package testkit

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// CollisionFile is testdata/collision/roots.json: two root keys whose operator DIDs share a
// short body, found once by brute force and kept.
type CollisionFile struct {
	Comment       string `json:"comment"`
	SeedA         string `json:"seed_a"`
	PublicA       string `json:"public_a"`
	SHA256PrefixA string `json:"sha256_prefix_a"`
	SeedB         string `json:"seed_b"`
	PublicB       string `json:"public_b"`
	SHA256PrefixB string `json:"sha256_prefix_b"`
}

// Collision returns the collision file of the module.
func Collision(t testing.TB) CollisionFile {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "collision", "roots.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f CollisionFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("testdata/collision/roots.json: %v", err)
	}
	return f
}

// CollisionRoots returns the two root keys of the collision file.
func CollisionRoots(t testing.TB) (a, b ed25519.PrivateKey) {
	f := Collision(t)
	return SeedKey(f.SeedA), SeedKey(f.SeedB)
}
