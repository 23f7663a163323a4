package authn_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// stepCode is the code of each check of device-login (docs/protocol.md §5.2), with the pin of
// §10.8 as check 4, between the root signature and the credential's window, and the revocation
// of §10.5 as check 6, between the window and the challenge. The checks below keep that
// numbering: 5 is the window, 7 the challenge, 8 the login signature.
var stepCode = [9]proto.Code{
	1: proto.BadRequest,
	2: proto.DCIDBinding,
	3: proto.DCBadSignature,
	4: proto.DIDCollision,
	5: proto.DCExpired,
	6: proto.DCRevoked,
	7: proto.BadChallenge,
	8: proto.BadSignature,
}

// lastStep is the number of the last check; a login broken nowhere "fails" at lastStep+1.
const lastStep = 8

// breakers names, for each step, the ways a test breaks that step alone. Each touches
// fields that no breaker of another step touches, so any combination breaks exactly the
// steps chosen.
var breakers = [9][]string{
	1: {"device_id-257-bytes", "empty-credential_id", "revocation_id-DEL", "permission-with-comma", "65-permissions", "permission-65-bytes", "permission-empty"},
	2: {"did-of-other-root", "node-tagged-did", "root-key-0x-hex", "did-web", "full-form-did", "root-key-31-bytes", "device-key-0x-hex", "device-key-31-bytes"},
	3: {"signed-by-device", "not-base58", "other-prefix", "empty", "over-other-fields", "63-bytes"},
	4: {"pinned-to-other-root", "pinned-by-pin-func"},
	5: {"expired", "not-yet-valid", "expires_at-fraction", "issued_at-feb-30", "issued_at-offset"},
	6: {"revoked", "revoked-by-list-func"},
	7: {"never-issued", "already-used", "expired", "control-char", "other-key", "tampered", "empty"},
	8: {"signed-by-root", "issued_at-fraction", "issued_at-trailing-LF", "over-other-challenge", "issued_at-empty"},
}

// attempt is one login ready to verify, with the Challenger it must be verified against.
type attempt struct {
	login     authn.Login
	ch        *authn.Challenger
	challenge string
	pins      authn.Pins
	revoked   authn.Revocations
}

var challengeKey = sha256.Sum256([]byte("challenge key"))

// build makes a login that is valid except at the steps in br (step → breaker index). Every
// signature is made after the fields it covers are final, so a step breaks only when asked.
func build(w world, other ed25519.PrivateKey, br map[int]int) (attempt, error) {
	f := w.credentialFields()
	if v, ok := br[1]; ok {
		switch breakers[1][v] {
		case "device_id-257-bytes":
			f.DeviceID = strings.Repeat("d", 257)
		case "empty-credential_id":
			f.CredentialID = ""
		case "revocation_id-DEL":
			f.RevocationID = "rev\x7f1"
		case "permission-with-comma":
			f.Permissions = []string{authn.NodesBind, "a,b"}
		case "65-permissions":
			f.Permissions = nil
			for i := range 65 {
				f.Permissions = append(f.Permissions, fmt.Sprintf("p%d", i))
			}
		case "permission-65-bytes":
			f.Permissions = []string{strings.Repeat("p", 65)}
		case "permission-empty":
			f.Permissions = []string{""}
		}
	}
	if v, ok := br[2]; ok {
		switch breakers[2][v] {
		case "did-of-other-root":
			f.OperatorDID = world{root: other}.operatorDID()
		case "node-tagged-did":
			f.OperatorDID = strings.Replace(f.OperatorDID, ":o:", ":n:", 1)
		case "root-key-0x-hex":
			f.OperatorRootPublicKey = "0x" + pubKey(w.root).Hex()
		case "did-web":
			f.OperatorDID = "did:web:example.com"
		case "full-form-did":
			f.OperatorDID = "did:svrp:" + pubKey(w.root).Hex()
		case "root-key-31-bytes":
			f.OperatorRootPublicKey = base58.Encode(pubKey(w.root).Ed25519()[:31])
		case "device-key-0x-hex":
			f.DevicePublicKey = "0x" + pubKey(w.device).Hex()
		case "device-key-31-bytes":
			f.DevicePublicKey = base58.Encode(pubKey(w.device).Ed25519()[:31])
		}
	}
	if v, ok := br[5]; ok {
		switch breakers[5][v] {
		case "expired":
			f.ExpiresAt = "2025-05-01T00:00:00Z"
		case "not-yet-valid":
			f.IssuedAt = canonical.FormatTime(testNow.Add(6 * time.Second))
		case "expires_at-fraction":
			f.ExpiresAt = "2026-01-01T00:00:00.000Z"
		case "issued_at-feb-30":
			f.IssuedAt = "2025-02-30T00:00:00Z"
		case "issued_at-offset":
			f.IssuedAt = "2025-01-01T00:00:00+00:00"
		}
	}
	dc := w.signCredential(f)
	if v, ok := br[3]; ok {
		switch breakers[3][v] {
		case "signed-by-device":
			dc = world{root: w.device}.signCredential(f)
		case "not-base58":
			dc.Signature = "0OIl" + dc.Signature[4:]
		case "other-prefix":
			sig, err := canonical.Sign(w.root, "libertynet", f)
			if err == nil {
				dc.Signature = sig
			}
		case "empty":
			dc.Signature = ""
		case "over-other-fields":
			g := f
			g.CredentialID += "x"
			dc.Signature = w.signCredential(g).Signature
		case "63-bytes":
			raw, _ := base58.Decode(dc.Signature)
			dc.Signature = base58.Encode(raw[:63])
		}
	}

	ch := authn.NewChallenger(challengeKey, bytes.NewReader(bytes.Repeat([]byte{7}, 1024)), 0)
	var challenge string
	var err error
	if v, ok := br[7]; ok {
		switch breakers[7][v] {
		case "never-issued":
			raw := sha256.Sum256([]byte("never issued"))
			challenge = base58.Encode(raw[:24])
		case "already-used":
			if challenge, err = ch.Issue(testNow); err == nil {
				err = ch.Consume(challenge, testNow)
			}
		case "expired":
			challenge, err = ch.Issue(testNow.Add(-authn.ChallengeTTL))
		case "control-char":
			challenge = "L1qwNvWz\nfnf7rfEsndrNPjFrbaez45iUT"
		case "other-key":
			challenge, err = authn.NewChallenger([32]byte{1}, bytes.NewReader(make([]byte, 64)), 0).Issue(testNow)
		case "tampered":
			if challenge, err = ch.Issue(testNow); err == nil {
				last := challenge[len(challenge)-1]
				repl := byte('2')
				if last == repl {
					repl = '3'
				}
				challenge = challenge[:len(challenge)-1] + string(repl)
			}
		case "empty":
			challenge = ""
		}
	} else {
		challenge, err = ch.Issue(testNow)
	}
	if err != nil {
		return attempt{}, err
	}

	signer, signed, issuedAt := w.device, challenge, loginIssuedAt
	if v, ok := br[8]; ok {
		switch breakers[8][v] {
		case "signed-by-root":
			signer = w.root
		case "issued_at-fraction":
			issuedAt = "2025-06-01T11:59:30.000Z"
		case "issued_at-trailing-LF":
			issuedAt = loginIssuedAt + "\n"
		case "over-other-challenge":
			signed = challenge + "x"
		case "issued_at-empty":
			issuedAt = ""
		}
	}
	sig := ed25519.Sign(signer, loginBytes(prefix, dc.DeviceCredential, signed, issuedAt))
	l := authn.Login{DeviceCredential: dc, Challenge: challenge, IssuedAt: issuedAt, Signature: base58.Encode(sig)}
	// Another pair of the same operator is always on the list, so a list that is
	// consulted but does not hold this credential's pair lets the login through.
	list := authn.RevocationSet{{OperatorDID: dc.OperatorDID, RevocationID: dc.RevocationID + "-other"}: true}
	var revoked authn.Revocations = list
	if v, ok := br[6]; ok {
		list[authn.RevocationKey{OperatorDID: dc.OperatorDID, RevocationID: dc.RevocationID}] = true
		if breakers[6][v] == "revoked-by-list-func" {
			revoked = authn.RevocationFunc(list.Revoked)
		}
	}
	// The credential's DID body is always pinned, to its own root key unless step 4 is
	// broken, so a set that is consulted and agrees lets the login through.
	var pins authn.Pins
	if did, err := didkey.Parse(dc.OperatorDID); err == nil && did.IsOperator() {
		set := authn.PinSet{did.Body(): pubKey(w.root)}
		pins = set
		if v, ok := br[4]; ok {
			set[did.Body()] = pubKey(other)
			if breakers[4][v] == "pinned-by-pin-func" {
				pins = authn.PinFunc(set.CheckPin)
			}
		}
	}
	return attempt{login: l, ch: ch, challenge: challenge, pins: pins, revoked: revoked}, nil
}

// checkAttempt verifies a login broken at the steps in br and checks that the earliest of
// them decided the code, and that the challenge was consumed exactly when check 7 passed.
func checkAttempt(w world, other ed25519.PrivateKey, br map[int]int) error {
	a, err := build(w, other, br)
	if err != nil {
		return fmt.Errorf("build: %v", err)
	}
	first := lastStep + 1
	for s := range br {
		first = min(first, s)
	}
	c := &counting{Challenges: a.ch}
	dev, err := authn.VerifyLogin(a.login, prefix, testNow, c, a.pins, a.revoked)
	if first == lastStep+1 {
		if err != nil {
			return fmt.Errorf("valid login refused: %v (%s)", err, proto.CodeOf(err))
		}
		if dev.OperatorDID.String() != w.operatorDID() {
			return fmt.Errorf("device for %s, want %s", dev.OperatorDID, w.operatorDID())
		}
	} else {
		if got := proto.CodeOf(err); got != stepCode[first] {
			return fmt.Errorf("got %s (%v), want %s of step %d", got, err, stepCode[first], first)
		}
		if !dev.OperatorDID.IsZero() || dev.Credential.OperatorDID != "" {
			return fmt.Errorf("failure returned a partial Device %+v", dev)
		}
	}
	wantConsumed := 0
	if first >= 8 {
		wantConsumed = 1
	}
	if c.ok != wantConsumed {
		return fmt.Errorf("challenge consumed %d times, want %d", c.ok, wantConsumed)
	}
	if _, broken7 := br[7]; !broken7 {
		again := a.ch.Consume(a.challenge, testNow)
		if first < 7 && again != nil {
			return fmt.Errorf("challenge burnt by a login that failed at check %d: %v", first, again)
		}
		if first >= 7 && again == nil {
			return fmt.Errorf("challenge still usable after a login that reached check 8")
		}
	}
	return nil
}

func TestLoginValid(t *testing.T) {
	w := newWorld(t)
	if err := checkAttempt(w, testkit.LabelKey(t, "other"), nil); err != nil {
		t.Fatal(err)
	}
}

// TestLoginBytesMatchCanonical keeps the tests' hand-joined message 1 honest.
func TestLoginBytesMatchCanonical(t *testing.T) {
	w := newWorld(t)
	dc := w.credentialFields()
	got := loginBytes(prefix, dc, "chal", loginIssuedAt)
	want, err := canonical.Login{OperatorDID: dc.OperatorDID, DevicePublicKey: dc.DevicePublicKey, Challenge: "chal", IssuedAt: loginIssuedAt}.Bytes(prefix)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("loginBytes = %q, canonical = %q (%v)", got, want, err)
	}
}

// TestLoginPinsAskedPastStep3: pins is asked exactly when the credential passed step 3, with
// the credential's own DID and root key, so that a registry pinning every login that got that
// far (docs/protocol.md §10.8) learns it from the question; and an error of pins that is not a
// refusal reaches the caller unchanged, with the challenge untouched.
func TestLoginPinsAskedPastStep3(t *testing.T) {
	w := newWorld(t)
	other := testkit.LabelKey(t, "other")
	for _, tt := range []struct {
		name   string
		br     map[int]int
		asked  bool
		answer proto.Code
	}{
		{"valid", nil, true, ""},
		{"1-shape", map[int]int{1: 0}, false, proto.BadRequest},
		{"2-id-binding", map[int]int{2: 0}, false, proto.DCIDBinding},
		{"3-root-signature", map[int]int{3: 0}, false, proto.DCBadSignature},
		{"3-root-signature+5-expired", map[int]int{3: 0, 5: 0}, false, proto.DCBadSignature},
		{"5-expired", map[int]int{5: 0}, true, proto.DCExpired},
		{"6-revoked", map[int]int{6: 0}, true, proto.DCRevoked},
		{"7-challenge", map[int]int{7: 0}, true, proto.BadChallenge},
		{"8-login-signature", map[int]int{8: 0}, true, proto.BadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := build(w, other, tt.br)
			if err != nil {
				t.Fatal(err)
			}
			asked := 0
			pins := authn.PinFunc(func(did didkey.DID, root didkey.PublicKey) error {
				asked++
				if did.String() != w.operatorDID() || root != pubKey(w.root) {
					t.Errorf("pins asked about %s with %s, want the credential's %s with its root key", did, root, w.operatorDID())
				}
				return nil
			})
			_, err = authn.VerifyLogin(a.login, prefix, testNow, a.ch, pins, a.revoked)
			wantCode(t, err, tt.answer)
			if (asked == 1) != tt.asked || asked > 1 {
				t.Errorf("pins asked %d times, want asked %v", asked, tt.asked)
			}
		})
	}
	t.Run("failing-pins", func(t *testing.T) {
		a, err := build(w, other, nil)
		if err != nil {
			t.Fatal(err)
		}
		boom := proto.New(proto.Internal, "pins down")
		c := &counting{Challenges: a.ch}
		_, err = authn.VerifyLogin(a.login, prefix, testNow, c, authn.PinFunc(func(didkey.DID, didkey.PublicKey) error { return boom }), a.revoked)
		if err != boom || c.ok != 0 {
			t.Fatalf("VerifyLogin with failing pins = %v, consumed %d; want the pins' error and no challenge consumed", err, c.ok)
		}
	})
}

// TestLoginEachStep breaks one step at a time, every way the tests know.
func TestLoginEachStep(t *testing.T) {
	w := newWorld(t)
	other := testkit.LabelKey(t, "other")
	for step := 1; step <= lastStep; step++ {
		for v, name := range breakers[step] {
			t.Run(fmt.Sprintf("%d-%s", step, name), func(t *testing.T) {
				if err := checkAttempt(w, other, map[int]int{step: v}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestLoginOrderPairs breaks every pair of steps i < j together, in every combination of
// ways, and requires step i's code: the protocol's order, stopping at the first failure.
func TestLoginOrderPairs(t *testing.T) {
	w := newWorld(t)
	other := testkit.LabelKey(t, "other")
	for i := 1; i <= lastStep; i++ {
		for j := i + 1; j <= lastStep; j++ {
			for vi, ni := range breakers[i] {
				for vj, nj := range breakers[j] {
					name := fmt.Sprintf("%d-%s+%d-%s", i, ni, j, nj)
					if err := checkAttempt(w, other, map[int]int{i: vi, j: vj}); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
		}
	}
}

// TestLoginOrderProperty breaks any set of steps, any way, and requires the code of the
// earliest.
func TestLoginOrderProperty(t *testing.T) {
	w := newWorld(t)
	other := testkit.LabelKey(t, "other")
	rapid.Check(t, func(rt *rapid.T) {
		br := map[int]int{}
		for s := 1; s <= lastStep; s++ {
			if rapid.Bool().Draw(rt, fmt.Sprintf("break%d", s)) {
				br[s] = rapid.IntRange(0, len(breakers[s])-1).Draw(rt, fmt.Sprintf("how%d", s))
			}
		}
		if err := checkAttempt(w, other, br); err != nil {
			rt.Fatal(err)
		}
	})
}

// TestLoginValidProperty: any credential within the limits, with keys in either encoding and
// permissions in any order, logs in, and the Device reports what the credential says.
func TestLoginValidProperty(t *testing.T) {
	w := newWorld(t)
	ch := seededChallenger(t, 0)
	text := rapid.StringMatching(`[a-zA-Z0-9 ._~é€-]{1,40}`)
	rapid.Check(t, func(rt *rapid.T) {
		f := w.credentialFields()
		f.CredentialID = text.Draw(rt, "credential_id")
		f.DeviceID = text.Draw(rt, "device_id")
		f.RevocationID = text.Draw(rt, "revocation_id")
		f.Permissions = rapid.SliceOfN(rapid.StringMatching(`[a-z.]{1,20}`), 0, 64).Draw(rt, "permissions")
		if rapid.Bool().Draw(rt, "hex root") {
			f.OperatorRootPublicKey = pubKey(w.root).Hex()
		}
		if rapid.Bool().Draw(rt, "hex device") {
			f.DevicePublicKey = pubKey(w.device).Hex()
		}
		c, err := ch.Issue(testNow)
		if err != nil {
			rt.Fatal(err)
		}
		l := w.signLogin(w.signCredential(f), c, loginIssuedAt)
		dev, err := authn.VerifyLogin(l, prefix, testNow, ch, nil, nil)
		if err != nil {
			rt.Fatalf("valid login refused: %v", err)
		}
		for _, p := range f.Permissions {
			if !dev.HasPermission(p) {
				rt.Fatalf("HasPermission(%q) = false", p)
			}
		}
		if dev.HasPermission("absent.permission") != slices.Contains(f.Permissions, "absent.permission") {
			rt.Fatal("HasPermission reports a permission the credential lacks")
		}
		if dev.RootKey != pubKey(w.root) {
			rt.Fatal("wrong root key")
		}
		if k, err := dev.DeviceKey(); err != nil || k != pubKey(w.device) {
			rt.Fatalf("DeviceKey = %v, %v", k, err)
		}
	})
}

func TestLoginNilChallenges(t *testing.T) {
	w := newWorld(t)
	l := w.signLogin(w.credential(), "x", loginIssuedAt)
	_, err := authn.VerifyLogin(l, prefix, testNow, nil, nil, nil)
	wantCode(t, err, proto.Internal)
}

// TestLoginChallengeStoreError: an error of the challenge store that is not a refusal
// reaches the caller unchanged.
func TestLoginChallengeStoreError(t *testing.T) {
	w := newWorld(t)
	l := w.signLogin(w.credential(), "x", loginIssuedAt)
	boom := proto.New(proto.Internal, "store down")
	_, err := authn.VerifyLogin(l, prefix, testNow, failing{boom}, nil, nil)
	if err != boom {
		t.Fatalf("got %v, want the store's error", err)
	}
}

type failing struct{ err error }

func (f failing) Issue(time.Time) (string, error) { return "", f.err }
func (f failing) Consume(string, time.Time) error { return f.err }

// TestLoginIssuedAtNotClocked: the login's own issued_at is only signed; a well-formed one
// far from the clock still logs in, because the challenge already bounds freshness.
func TestLoginIssuedAtNotClocked(t *testing.T) {
	w := newWorld(t)
	ch := seededChallenger(t, 0)
	for _, ia := range []string{"1999-01-01T00:00:00Z", "2099-12-31T23:59:59Z"} {
		c, err := ch.Issue(testNow)
		if err != nil {
			t.Fatal(err)
		}
		_, err = authn.VerifyLogin(w.signLogin(w.credential(), c, ia), prefix, testNow, ch, nil, nil)
		wantCode(t, err, "")
	}
}

// TestLoginPrefix: a login signed under one domain prefix does not verify under another.
func TestLoginPrefix(t *testing.T) {
	w := newWorld(t)
	ch := seededChallenger(t, 0)
	c, err := ch.Issue(testNow)
	if err != nil {
		t.Fatal(err)
	}
	l := w.signLogin(w.credential(), c, loginIssuedAt)
	_, err = authn.VerifyLogin(l, "libertynet", testNow, ch, nil, nil)
	wantCode(t, err, proto.DCBadSignature)
}
