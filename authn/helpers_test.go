package authn_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

const prefix = canonical.DefaultPrefix

// testNow is the registry's clock in these tests: inside the credentials' default window.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	dcIssuedAt    = "2025-01-01T00:00:00Z"
	dcExpiresAt   = "2026-01-01T00:00:00Z"
	loginIssuedAt = "2025-06-01T11:59:30Z"
)

func pubKey(priv ed25519.PrivateKey) didkey.PublicKey {
	k, err := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	if err != nil {
		panic(err)
	}
	return k
}

// seededRand is a deterministic random source for challengers and tokens.
func seededRand(t testing.TB) *rand.ChaCha8 {
	return rand.NewChaCha8(sha256.Sum256([]byte("rand/" + t.Name())))
}

func seededChallenger(t testing.TB, maxUsed int) *authn.Challenger {
	r := seededRand(t)
	key, err := authn.NewChallengeKey(r)
	if err != nil {
		t.Fatal(err)
	}
	return authn.NewChallenger(key, r, maxUsed)
}

// world holds one operator's keys.
type world struct {
	root, device ed25519.PrivateKey
}

func newWorld(t testing.TB) world {
	return world{root: testkit.LabelKey(t, "root"), device: testkit.LabelKey(t, "device")}
}

// otherWorld is a second operator with keys of its own, for the tests that need someone else.
func otherWorld(t testing.TB) world {
	return world{root: testkit.LabelKey(t, "other-root"), device: testkit.LabelKey(t, "other-device")}
}

func (w world) operatorDID() string {
	d, err := didkey.OperatorDID(pubKey(w.root), didkey.FormShort)
	if err != nil {
		panic(err)
	}
	return d.String()
}

// credentialFields returns the unsigned fields of a valid credential.
func (w world) credentialFields() canonical.DeviceCredential {
	return canonical.DeviceCredential{
		CredentialID:          "cred-1",
		OperatorDID:           w.operatorDID(),
		OperatorRootPublicKey: pubKey(w.root).Base58(),
		DeviceID:              "laptop-1",
		DevicePublicKey:       pubKey(w.device).Base58(),
		Permissions:           []string{authn.NodesBind},
		IssuedAt:              dcIssuedAt,
		ExpiresAt:             dcExpiresAt,
		RevocationID:          "rev-1",
	}
}

// signCredential signs fields with the root key. Fields that canonical refuses to render
// get a well-formed signature over nothing, so that the refusal is the only fault.
func (w world) signCredential(f canonical.DeviceCredential) authn.DeviceCredential {
	sig, err := canonical.Sign(w.root, prefix, f)
	if err != nil {
		sig = b58sig(ed25519.Sign(w.root, nil))
	}
	return authn.DeviceCredential{DeviceCredential: f, Signature: sig}
}

// signedEdit is a credential of w whose fields edit changes before they are signed.
func (w world) signedEdit(edit func(*canonical.DeviceCredential)) func() authn.DeviceCredential {
	return func() authn.DeviceCredential {
		f := w.credentialFields()
		edit(&f)
		return w.signCredential(f)
	}
}

// editedAfterSigning is w's credential, which edit changes after it is signed.
func (w world) editedAfterSigning(edit func(*authn.DeviceCredential)) func() authn.DeviceCredential {
	return func() authn.DeviceCredential {
		dc := w.credential()
		edit(&dc)
		return dc
	}
}

func (w world) credential() authn.DeviceCredential { return w.signCredential(w.credentialFields()) }

// loginBytes joins message 1 as the protocol writes it, without canonical's checks, so a test
// can sign fields "as given" even when canonical would refuse them.
func loginBytes(p string, dc canonical.DeviceCredential, challenge, issuedAt string) []byte {
	return []byte(strings.Join([]string{p + canonical.LoginDomain, dc.OperatorDID, dc.DevicePublicKey, challenge, issuedAt}, "\n"))
}

func (w world) signLogin(dc authn.DeviceCredential, challenge, issuedAt string) authn.Login {
	return authn.Login{
		DeviceCredential: dc,
		Challenge:        challenge,
		IssuedAt:         issuedAt,
		Signature:        b58sig(ed25519.Sign(w.device, loginBytes(prefix, dc.DeviceCredential, challenge, issuedAt))),
	}
}

func b58sig(sig []byte) string { return base58.Encode(sig) }

// fatalT is what wantCode needs of a *testing.T or a *rapid.T.
type fatalT interface {
	Helper()
	Fatalf(format string, args ...any)
}

// sentinels are what an error of each code this package returns is a case of: its own
// sentinel, or that of didkey or canonical where their code is the answer.
var sentinels = map[proto.Code][]error{
	proto.DCIDBinding:       {authn.ErrDCIDBinding},
	proto.DCBadSignature:    {authn.ErrDCBadSignature},
	proto.DCExpired:         {authn.ErrDCExpired},
	proto.DCRevoked:         {authn.ErrDCRevoked},
	proto.DIDCollision:      {authn.ErrDIDCollision},
	proto.BadChallenge:      {authn.ErrBadChallenge},
	proto.BadSignature:      {authn.ErrBadSignature, canonical.ErrBadSignature},
	proto.NoSession:         {authn.ErrNoSession},
	proto.SessionExpired:    {authn.ErrSessionExpired},
	proto.StaleTS:           {authn.ErrStaleTS},
	proto.BadRequest:        {authn.ErrBadRequest, canonical.ErrBadRequest},
	proto.IDBindingFailed:   {didkey.ErrBindingFailed},
	proto.IDBindingRequired: {didkey.ErrBindingRequired},
}

// wantCode fails the test unless err carries code (or is nil when code is ""), and is a case
// of a sentinel of that code when there is one.
func wantCode(t fatalT, err error, code proto.Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("got error %v (%s), want success", err, proto.CodeOf(err))
		}
		return
	}
	if err == nil {
		t.Fatalf("got success, want %s", code)
	}
	if got := proto.CodeOf(err); got != code {
		t.Fatalf("got %s (%v), want %s", got, err, code)
	}
	if want, ok := sentinels[code]; ok && !slices.ContainsFunc(want, func(s error) bool { return errors.Is(err, s) }) {
		t.Fatalf("%v (%s) is no case of the sentinels %v", err, code, want)
	}
}

// acceptAll is a Challenges fake that accepts every challenge once, for vectors whose
// challenges this registry never issued.
type acceptAll struct{ seen map[string]bool }

func (a *acceptAll) Issue(time.Time) (string, error) { return "", errors.New("not used") }

func (a *acceptAll) Consume(c string, _ time.Time) error {
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	if a.seen[c] {
		return authn.ErrBadChallenge
	}
	a.seen[c] = true
	return nil
}

// counting wraps a Challenges and counts the successful consumes.
type counting struct {
	authn.Challenges
	ok int
}

func (c *counting) Consume(ch string, now time.Time) error {
	err := c.Challenges.Consume(ch, now)
	if err == nil {
		c.ok++
	}
	return err
}
