package didkey_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"

	"github.com/svrp/svrp/didkey"
)

// A node derives its DID from its own key; the registry checks the pair it receives.
func ExampleCheckNode() {
	// A fixed seed keeps the output stable; real keys come from ed25519.GenerateKey.
	seed := sha256.Sum256([]byte("example node"))
	pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)

	key, err := didkey.KeyFromEd25519(pub)
	if err != nil {
		panic(err)
	}
	did, err := didkey.NodeDID(key, didkey.FormShort)
	if err != nil {
		panic(err)
	}
	fmt.Println("did:", did)
	fmt.Println("fingerprint:", key.Fingerprint())

	// The registry may receive the key in either encoding.
	for _, wire := range []string{key.Hex(), key.Base58()} {
		_, k, err := didkey.CheckNode(did.String(), wire)
		fmt.Println("bound:", err == nil && k == key)
	}

	// Another key does not bind to this DID.
	other := sha256.Sum256([]byte("another node"))
	otherPub := ed25519.NewKeyFromSeed(other[:]).Public().(ed25519.PublicKey)
	otherKey, _ := didkey.KeyFromEd25519(otherPub)
	_, _, err = didkey.CheckNode(did.String(), otherKey.Base58())
	fmt.Println("other key:", err)
	// Output:
	// did: did:svrp:n:7e6e8ee4
	// fingerprint: 7e6e:8ee4:11c8:bcf2
	// bound: true
	// bound: true
	// other key: "did:svrp:n:7e6e8ee4" does not derive from the key presented
}

// Short, fallback and full DIDs are three spellings of one identity.
func ExampleDID_Matches() {
	key, err := didkey.DecodeKey("FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi")
	if err != nil {
		panic(err)
	}
	for _, s := range []string{
		"did:svrp:n:024f53bf",
		"did:svrp:n:024f53bfd7",
		"did:svrp:d6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471f",
	} {
		d, err := didkey.Parse(s)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Form(), d.Matches(key))
	}
	// Output:
	// short true
	// fallback true
	// full true
}

// A DID parsed once is bound to a key sent beside it without parsing it again.
func ExampleDID_Bind() {
	d, err := didkey.Parse("did:svrp:n:024f53bf")
	if err != nil {
		panic(err)
	}
	k, err := d.Bind("FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi")
	fmt.Println(k.ShortBody(), err)
	_, err = d.Bind("8ZyRZ8XDhWBA5D1rQkYsZrPLBQpCu9SkKufsiLoy7z3f")
	fmt.Println(err)
	// Output:
	// 024f53bf <nil>
	// "did:svrp:n:024f53bf" does not derive from the key presented
}
