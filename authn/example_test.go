package authn_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
)

// An operator's root key vouches for a device key once, offline; the device then logs in
// with a fresh challenge, and the registry opens a one-hour session.
func Example() {
	const prefix = canonical.DefaultPrefix
	// Fixed seeds and a seeded random source keep the output stable; real keys and
	// challenges come from crypto/rand.
	root := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	device := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	random := rand.NewChaCha8([32]byte{3})
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

	// Operator, offline: the root key signs a DeviceCredential (message 2).
	rootKey, _ := didkey.KeyFromEd25519(root.Public().(ed25519.PublicKey))
	deviceKey, _ := didkey.KeyFromEd25519(device.Public().(ed25519.PublicKey))
	operator, _ := didkey.OperatorDID(rootKey, didkey.FormShort)
	dc := authn.DeviceCredential{DeviceCredential: canonical.DeviceCredential{
		CredentialID:          "cred-1",
		OperatorDID:           operator.String(),
		OperatorRootPublicKey: rootKey.Base58(),
		DeviceID:              "laptop",
		DevicePublicKey:       deviceKey.Base58(),
		Permissions:           []string{authn.NodesBind},
		IssuedAt:              "2025-01-01T00:00:00Z",
		ExpiresAt:             "2026-01-01T00:00:00Z",
		RevocationID:          "rev-1",
	}}
	dc.Signature, _ = canonical.Sign(root, prefix, dc.DeviceCredential)

	// Registry: a Challenger under a key drawn once per process.
	key, _ := authn.NewChallengeKey(random)
	challenges := authn.NewChallenger(key, random, 0)
	challenge, _ := challenges.Issue(now)

	// Device: sign message 1 over the challenge.
	issuedAt := canonical.FormatTime(now)
	sig, _ := canonical.Sign(device, prefix, canonical.Login{
		OperatorDID:     dc.OperatorDID,
		DevicePublicKey: dc.DevicePublicKey,
		Challenge:       challenge,
		IssuedAt:        issuedAt,
	})
	login := authn.Login{DeviceCredential: dc, Challenge: challenge, IssuedAt: issuedAt, Signature: sig}

	// Registry: verify, then open a session stored under the token's hash.
	dev, err := authn.VerifyLogin(login, prefix, now, challenges, nil, nil)
	if err != nil {
		fmt.Println("login refused:", err)
		return
	}
	fmt.Println("operator:", dev.OperatorDID)
	fmt.Println("may bind nodes:", dev.HasPermission(authn.NodesBind))
	_, _, _ = authn.NewToken(random) // the token goes to the client; the store keeps its hash
	session := authn.NewBearerSession(dev.OperatorDID.String(), now)
	fmt.Println("session valid for:", session.ExpiresAt.Sub(session.IssuedAt))
	fmt.Println("valid until the last second:", session.Check(now.Add(authn.SessionTTL-time.Second)) == nil)
	fmt.Println("expired after an hour:", errors.Is(session.Check(now.Add(authn.SessionTTL)), authn.ErrSessionExpired))

	// The challenge was single-use: replaying the same login fails at step 5.
	_, err = authn.VerifyLogin(login, prefix, now, challenges, nil, nil)
	fmt.Println("replay refused:", errors.Is(err, authn.ErrBadChallenge))
	// Output:
	// operator: did:svrp:o:34750f98
	// may bind nodes: true
	// session valid for: 1h0m0s
	// valid until the last second: true
	// expired after an hour: true
	// replay refused: true
}

func ExampleParseBearer() {
	for _, h := range []string{"Bearer 3vQB7B6MrGQZaxCuFg4oh", "bearer 3vQB7B6MrGQZaxCuFg4oh", "Basic dXNlcjpwYXNz", ""} {
		tok, err := authn.ParseBearer(h)
		fmt.Printf("%q %q %v\n", tok, h, errors.Is(err, authn.ErrNoSession))
	}
	// Output:
	// "3vQB7B6MrGQZaxCuFg4oh" "Bearer 3vQB7B6MrGQZaxCuFg4oh" false
	// "3vQB7B6MrGQZaxCuFg4oh" "bearer 3vQB7B6MrGQZaxCuFg4oh" false
	// "" "Basic dXNlcjpwYXNz" true
	// "" "" true
}
