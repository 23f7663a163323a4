package canonical_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
)

// An operator's device logs in by signing the challenge the registry issued.
func ExampleSign() {
	// A fixed seed keeps the output stable; a real device key comes from ed25519.GenerateKey.
	seed := sha256.Sum256([]byte("example device"))
	device := ed25519.NewKeyFromSeed(seed[:])
	devicePub, err := didkey.KeyFromEd25519(device.Public().(ed25519.PublicKey))
	if err != nil {
		panic(err)
	}

	login := canonical.Login{
		OperatorDID:     "did:svrp:o:0efdccc6",
		DevicePublicKey: devicePub.Base58(), // exactly as the DeviceCredential carries it
		Challenge:       "L1qwNvWzfnf7rfEsndrNPjFrbaez45iUT",
		IssuedAt:        canonical.FormatTime(time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)),
	}
	msg, err := login.Bytes(canonical.DefaultPrefix)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", msg)

	sig, err := canonical.Sign(device, canonical.DefaultPrefix, login)
	if err != nil {
		panic(err)
	}
	fmt.Println("signature:", sig)

	// The registry rebuilds the same bytes from the request and checks the signature.
	err = canonical.Verify(devicePub, canonical.DefaultPrefix, login, sig)
	fmt.Println("verified:", err == nil)
	// The domain literal separates deployments: the same signature fails under another prefix.
	err = canonical.Verify(devicePub, "libertynet", login, sig)
	fmt.Println("under libertynet:", err)
	// Output:
	// service-auth-challenge:v1
	// did:svrp:o:0efdccc6
	// 98ZPLT4qvhwhrL4GyTZQbasgnWAMVmLhvVGCoGPbcff4
	// L1qwNvWzfnf7rfEsndrNPjFrbaez45iUT
	// 2025-01-15T10:30:00Z
	// signature: 5iwiA9m5HhSmduyBQLVmAEiniFyJegCsLZCBwkgRJdWqUx3E6b7YswmmmzStj7nGkRLdAhixgkzt3pMp5odCm6fb
	// verified: true
	// under libertynet: signature does not verify
}

// A field that could forge a line boundary is refused before any signature is checked.
func ExampleRegister_Bytes() {
	reg := canonical.Register{
		DID:          "did:svrp:n:34910d78",
		PublicKey:    "6ot1FZK3amwwM2no2PcTN3gH9W8E21igHbvmLvLM5EsM",
		Endpoint:     "203.0.113.7:7000\nsomething-else",
		Capabilities: []string{"inference", "health:ready"},
	}
	_, err := reg.Bytes(canonical.DefaultPrefix)
	fmt.Println(err)

	reg.Endpoint = "203.0.113.7:7000"
	msg, _ := reg.Bytes(canonical.DefaultPrefix)
	fmt.Printf("%q\n", msg)
	// Output:
	// field endpoint contains a control character
	// "service-node-register:v1\ndid:svrp:n:34910d78\n6ot1FZK3amwwM2no2PcTN3gH9W8E21igHbvmLvLM5EsM\n203.0.113.7:7000\nhealth:ready,inference\n"
}
