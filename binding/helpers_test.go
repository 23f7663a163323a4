package binding_test

import (
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// The signers of testdata/vectors/canonical.json. Using the vectors' seeds makes the default
// fixture sign exactly the vectors' messages, which TestVectorChain checks byte for byte.
const (
	nodeSeed    = "ba075ff90bd5bc7a161b4808d0f66c589c00bc442d2556247c40beb7efc5c201"
	rootSeed    = "6dbd5d9b1c636e495c79aa0572b598f46c823644c29fc1f330a9bcadf84a5ebe"
	deviceSeed  = "a251414b3ebe7b7bf66fa92d97299ff00d7e36ca502a8f43690f8f339b2f1c9f"
	root2Seed   = "dd3eea5c014da21fe72d814716077b874bbd87d33d9ab8e1d8d4f6d6cafe94e7"
	device2Seed = "77596085d55cbac054f33bae04b809ebbeafc9f36bcfbcd14289994e7f1818db"
	lead0Seed   = "a05b4b608b66c4e54664976ac91991a782f2297960c709f891684856e8d935be"

	operatorDID  = "did:svrp:o:0efdccc6" // of rootSeed
	operator2DID = "did:svrp:o:d740e1158b"
	nodeDID      = "did:svrp:n:34910d78" // of nodeSeed
	otherNodeDID = "did:svrp:n:12512a76" // of lead0Seed: a node that is not the session's
)

// Times of the fixture: the session opens at t0 and lives 10 minutes.
var (
	t0        = time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)
	tAuthz    = t0.Add(90 * time.Second)
	tExpires  = t0.Add(10 * time.Minute)
	prefix    = canonical.DefaultPrefix
	errorCode = proto.CodeOf
)

func pub(priv ed25519.PrivateKey) didkey.PublicKey {
	k, err := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	if err != nil {
		panic(err)
	}
	return k
}

func f64(v float64) *float64 { return &v }

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// fixture is a binding chain as plain fields and keys. build signs it, so a test changes a
// field before build to get a validly signed chain with one semantic fault, or changes the
// built values to break a signature.
type fixture struct {
	node, root, device ed25519.PrivateKey
	req                canonical.BindingSession
	dc                 canonical.DeviceCredential
	az                 canonical.Authorization
	acc                canonical.Acceptance // an empty digest is filled in by build
	resolver           string
}

func newFixture() *fixture {
	node, root, device := testkit.SeedKey(nodeSeed), testkit.SeedKey(rootSeed), testkit.SeedKey(deviceSeed)
	return &fixture{
		node: node, root: root, device: device,
		req: canonical.BindingSession{
			BindingSessionID:     "bs-0001",
			NodeDID:              nodeDID,
			NodePublicKey:        pub(node).Base58(),
			DeviceSummary:        "8 vCPU, 32 GiB, 1x GPU",
			OS:                   "linux",
			Region:               "eu-west",
			RequestedTaskTypes:   []string{"inference", "embedding"},
			RequestedSingleLimit: f64(10),
			RequestedDailyLimit:  f64(2.5),
			Nonce:                "n-7f3a",
			CreatedAt:            "2025-01-15T10:30:00Z",
			ExpiresAt:            "2025-01-15T10:40:00Z",
		},
		dc: canonical.DeviceCredential{
			CredentialID:          "cred-0001",
			OperatorDID:           operatorDID,
			OperatorRootPublicKey: pub(root).Base58(),
			DeviceID:              "laptop-1",
			DevicePublicKey:       pub(device).Base58(),
			Permissions:           []string{"nodes.bind"},
			IssuedAt:              "2025-01-01T00:00:00Z",
			ExpiresAt:             "2026-01-01T00:00:00Z",
			RevocationID:          "rev-0001",
		},
		az: canonical.Authorization{
			BindingSessionID: "bs-0001",
			NodeDID:          nodeDID,
			OperatorDID:      operatorDID,
			TaskTypes:        []string{"inference"},
			SingleLimit:      f64(5),
			DailyLimit:       f64(2.5),
			RevocationID:     "authz-rev-0001",
			IssuedAt:         "2025-01-15T10:31:00Z",
			ExpiresAt:        "2025-01-15T11:31:00Z",
		},
		acc: canonical.Acceptance{
			BindingSessionID: "bs-0001",
			NodeDID:          nodeDID,
			OperatorDID:      operatorDID,
			Accepted:         true,
			IssuedAt:         "2025-01-15T10:32:00Z",
		},
		resolver: operatorDID,
	}
}

// sign signs m under the default prefix. A message that cannot be rendered (a test of the
// shape checks) gets no signature: no signer could have made one.
func sign(t fataler, priv ed25519.PrivateKey, m canonical.Message) string {
	t.Helper()
	sig, err := canonical.Sign(priv, prefix, m)
	if errorCode(err) == proto.BadRequest {
		return ""
	}
	if err != nil {
		t.Fatalf("sign %T: %v", m, err)
	}
	return sig
}

// initiate returns the signed initiate request of the fixture.
func (f *fixture) initiate(t fataler) binding.InitiateRequest {
	t.Helper()
	return binding.InitiateRequest{BindingSession: f.req, NodeSignature: sign(t, f.node, f.req)}
}

// credential returns the signed device credential of the fixture.
func (f *fixture) credential(t fataler) authn.DeviceCredential {
	t.Helper()
	return authn.DeviceCredential{DeviceCredential: f.dc, Signature: sign(t, f.root, f.dc)}
}

// authorization returns the signed authorization of the fixture.
func (f *fixture) authorization(t fataler) binding.AuthorizationCredential {
	t.Helper()
	return binding.AuthorizationCredential{Authorization: f.az, Signature: sign(t, f.device, f.az)}
}

// resolved returns the fixture's session as authorize finds it: PENDING_OPERATOR.
func (f *fixture) resolved(t fataler) binding.BindingSession {
	t.Helper()
	req := f.initiate(t)
	s := binding.NewBindingSession(req, pub(f.node), binding.HashSecret("QMD7RJT8"), binding.HashSecret("token"), t0)
	s.State = binding.PendingOperator
	s.OperatorDID = f.resolver
	return s
}

// build returns the fixture's session as accept finds it (PENDING_NODE_ACCEPTANCE, with its
// credential and authorization) and the node's signed acceptance.
func (f *fixture) build(t fataler) (binding.BindingSession, binding.Acceptance) {
	t.Helper()
	s := f.resolved(t)
	dc, az := f.credential(t), f.authorization(t)
	s.DeviceCredential, s.Authorization = &dc, &az
	s.State = binding.PendingNodeAcceptance
	acc := f.acc
	if acc.AuthorizationDigest == "" {
		d, err := f.az.Digest(prefix)
		if err != nil {
			t.Fatalf("digest: %v", err)
		}
		acc.AuthorizationDigest = d
	}
	return s, binding.Acceptance{Acceptance: acc, Signature: sign(t, f.node, acc)}
}

// wantCode fails unless err carries code (proto.Code("") meaning no error).
func wantCode(t fataler, err error, code proto.Code) {
	t.Helper()
	switch {
	case code == "" && err != nil:
		t.Fatalf("got error %q (%s), want none", err, errorCode(err))
	case code != "" && err == nil:
		t.Fatalf("got no error, want %s", code)
	case code != "" && errorCode(err) != code:
		t.Fatalf("got %s (%q), want %s", errorCode(err), err, code)
	}
}

// hasCode reports whether err carries a protocol code of its own (rather than defaulting to
// INTERNAL for want of one).
func hasCode(err error) bool {
	var c interface{ Code() string }
	return errors.As(err, &c)
}

// tamper returns a base58 signature with one bit flipped: well-formed, but not the signer's.
func tamper(t fataler, sig string) string {
	t.Helper()
	raw, err := canonical.DecodeSignature(sig)
	if err != nil {
		t.Fatalf("decode signature: %v", err)
	}
	raw[7] ^= 0x01
	return base58.Encode(raw[:])
}
