package fuzz

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// authnNow is the clock of the vector seeds: inside the vectors' credential windows.
var authnNow = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).Unix()

type authnSeed struct {
	prefix string
	dc     authn.DeviceCredential
	login  *canonical.Login // message 1 fields, when a login vector pairs with dc
	sig    string           // the login signature
}

// authnSeeds builds signed credentials from canonical.json, pairs them with the login
// vectors that name the same operator and device key, and adds the unsigned credential
// and login fields of rejects.json.
func authnSeeds(f *testing.F) []authnSeed {
	f.Helper()
	canon := testkit.Canonical(f)
	var seeds []authnSeed
	logins := 0
	for _, c := range canon.Cases {
		if c.Message != 2 {
			continue
		}
		s := authnSeed{prefix: c.Prefix}
		if json.Unmarshal(c.Fields, &s.dc.DeviceCredential) != nil {
			f.Fatalf("%s: fields do not decode", c.ID)
		}
		s.dc.Signature = c.SignatureB58
		seeds = append(seeds, s)
	}
	for _, c := range canon.Cases {
		if c.Message != 1 {
			continue
		}
		var m canonical.Login
		if json.Unmarshal(c.Fields, &m) != nil {
			f.Fatalf("%s: fields do not decode", c.ID)
		}
		for _, s := range seeds {
			if s.login == nil && s.prefix == c.Prefix && s.dc.OperatorDID == m.OperatorDID && s.dc.DevicePublicKey == m.DevicePublicKey {
				s.login, s.sig = &m, c.SignatureB58
				seeds = append(seeds, s)
				logins++
				break
			}
		}
	}
	// Reject cases start from a valid neighbour: message 1 fields with the first signed
	// credential, message 2 fields with the base login of rejects.json.
	rejects := testkit.Rejects(f)
	var base canonical.Login
	if json.Unmarshal(rejects.BaseFields["1"], &base) != nil {
		f.Fatal("rejects.json: base login fields do not decode")
	}
	for _, c := range rejects.Cases {
		switch c.Message {
		case 1:
			var m canonical.Login
			if json.Unmarshal(c.Fields, &m) == nil && len(seeds) > 0 {
				seeds = append(seeds, authnSeed{prefix: seeds[0].prefix, dc: seeds[0].dc, login: &m, sig: "1"})
			}
		case 2:
			s := authnSeed{prefix: canonical.DefaultPrefix, login: &base}
			if json.Unmarshal(c.Fields, &s.dc.DeviceCredential) == nil {
				seeds = append(seeds, s)
			}
		}
	}
	if len(seeds) == 0 || logins == 0 {
		f.Fatalf("loaded %d seeds, %d of them complete signed logins", len(seeds), logins)
	}
	f.Logf("%d seeds from the vectors, %d of them complete signed logins", len(seeds), logins)
	return seeds
}

func (s authnSeed) loginJSON() []byte {
	l := authn.Login{DeviceCredential: s.dc, Signature: s.sig}
	if s.login != nil {
		l.Challenge, l.IssuedAt = s.login.Challenge, s.login.IssuedAt
	}
	b, _ := json.Marshal(l)
	return b
}

// verifyTwice is the common start of the verifier targets: data is decoded as a T (when it
// does not decode, ok is false and the input is skipped), and verify runs on it twice at the
// clock unix. The two runs must agree, and a failure must carry one of codes and return
// nothing. It returns the input, the clock, and the first run's answer and error.
func verifyTwice[T, R any](t *testing.T, data []byte, unix int64, codes map[proto.Code]bool, verify func(T, time.Time) (R, error)) (in T, now time.Time, got R, ok bool, err error) {
	if json.Unmarshal(data, &in) != nil {
		return in, now, got, false, nil
	}
	now = time.Unix(unix, 0).UTC()
	got, err = verify(in, now)
	got2, err2 := verify(in, now)
	if proto.CodeOf(err) != proto.CodeOf(err2) || !reflect.DeepEqual(got, got2) || (err == nil) != (err2 == nil) {
		t.Fatalf("two runs disagree: %v / %v", err, err2)
	}
	if err != nil {
		if !codes[proto.CodeOf(err)] {
			t.Fatalf("error %q carries code %s", err, proto.CodeOf(err))
		}
		var zero R
		if !reflect.DeepEqual(got, zero) {
			t.Fatalf("failure returned a partial answer %+v", got)
		}
	}
	return in, now, got, true, err
}

// credentialCodes are the answers VerifyCredential may give.
var credentialCodes = map[proto.Code]bool{
	proto.BadRequest: true, proto.DCIDBinding: true, proto.DCBadSignature: true, proto.DCExpired: true,
}

// FuzzVerifyCredential decodes arbitrary JSON as a DeviceCredential and verifies it. It must
// not panic, must answer with one of the credential codes, must answer the same way twice,
// and may accept only what each step's own check accepts.
func FuzzVerifyCredential(f *testing.F) {
	for _, s := range authnSeeds(f) {
		b, _ := json.Marshal(s.dc)
		f.Add(b, s.prefix, authnNow)
	}
	f.Fuzz(func(t *testing.T, data []byte, prefix string, unix int64) {
		dc, now, dev, ok, err := verifyTwice(t, data, unix, credentialCodes, func(dc authn.DeviceCredential, now time.Time) (authn.Device, error) {
			return authn.VerifyCredential(dc, prefix, now, nil)
		})
		if !ok {
			return
		}
		if err != nil {
			if proto.CodeOf(err) == proto.BadRequest && canonical.CheckPrefix(prefix) == nil && authn.CheckCredentialShape(dc) == nil {
				t.Fatalf("BAD_REQUEST for a credential that passes the shape check: %v", err)
			}
			return
		}
		d, root, err := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
		if err != nil || d != dev.OperatorDID || root != dev.RootKey {
			t.Fatalf("accepted a credential whose operator does not bind: %v", err)
		}
		if err := canonical.Verify(root, prefix, dc.DeviceCredential, dc.Signature); err != nil {
			t.Fatalf("accepted a credential whose signature fails: %v", err)
		}
		iss, err1 := canonical.ParseTime(dc.IssuedAt)
		exp, err2 := canonical.ParseTime(dc.ExpiresAt)
		if err1 != nil || err2 != nil || now.Before(iss.Add(-authn.CredentialSkew)) || now.After(exp.Add(authn.CredentialSkew)) {
			t.Fatalf("accepted a credential outside its window at %s", now)
		}
		if !reflect.DeepEqual(dev.Credential, dc) {
			t.Fatal("Device does not carry the credential as given")
		}
	})
}

// recordingChallenges accepts any challenge but the empty one, and counts the calls.
type recordingChallenges struct{ calls, accepted int }

func (r *recordingChallenges) Issue(time.Time) (string, error) { return "", nil }

func (r *recordingChallenges) Consume(c string, _ time.Time) error {
	r.calls++
	if c == "" {
		return authn.ErrBadChallenge
	}
	r.accepted++
	return nil
}

// loginStep maps each code VerifyLogin may give to the step that gives it.
var loginStep = map[proto.Code]int{
	proto.BadRequest: 1, proto.DCIDBinding: 2, proto.DCBadSignature: 3, proto.DCExpired: 4,
	proto.BadChallenge: 5, proto.BadSignature: 6,
}

// FuzzVerifyLogin decodes arbitrary JSON as a login body and verifies it against a
// challenge store that accepts every non-empty challenge. Beyond no panic and a protocol
// code, it checks the order of the protocol: the challenge is offered to the store exactly
// when steps 1–4 pass, and is consumed only then; the credential steps agree with
// VerifyCredential; and the answer is the same twice.
func FuzzVerifyLogin(f *testing.F) {
	for _, s := range authnSeeds(f) {
		if s.login != nil && s.dc.Signature != "" && s.sig != "1" {
			// A complete vector login must pass, or the fuzzer starts from nothing valid.
			var l authn.Login
			if json.Unmarshal(s.loginJSON(), &l) != nil {
				f.Fatal("seed login does not round-trip through JSON")
			}
			if _, err := authn.VerifyLogin(l, s.prefix, time.Unix(authnNow, 0), &recordingChallenges{}, nil, nil); err != nil {
				f.Fatalf("vector login refused: %v", err)
			}
		}
		f.Add(s.loginJSON(), s.prefix, authnNow)
	}
	f.Fuzz(func(t *testing.T, data []byte, prefix string, unix int64) {
		var l authn.Login
		if json.Unmarshal(data, &l) != nil {
			return
		}
		now := time.Unix(unix, 0).UTC()
		ch := &recordingChallenges{}
		dev, err := authn.VerifyLogin(l, prefix, now, ch, nil, nil)
		code := proto.CodeOf(err)
		step := 7
		if err != nil {
			var ok bool
			if step, ok = loginStep[code]; !ok {
				t.Fatalf("error %q carries code %s", err, code)
			}
			if !reflect.DeepEqual(dev, authn.Device{}) {
				t.Fatalf("failure returned a partial Device %+v", dev)
			}
		}
		if wantCalls := b2i(step >= 5); ch.calls != wantCalls || ch.accepted != b2i(step >= 6) {
			t.Fatalf("%s at step %d: challenge offered %d times, accepted %d", code, step, ch.calls, ch.accepted)
		}

		shape := authn.CheckCredentialShape(l.DeviceCredential)
		_, cerr := authn.VerifyCredential(l.DeviceCredential, prefix, now, nil)
		switch {
		case shape != nil:
			if step != 1 {
				t.Fatalf("shape check fails (%v) but the login failed at step %d", shape, step)
			}
		case step <= 4:
			if proto.CodeOf(cerr) != code {
				t.Fatalf("login failed with %s, VerifyCredential with %v", code, cerr)
			}
		default:
			if cerr != nil {
				t.Fatalf("login reached step %d but VerifyCredential fails: %v", step, cerr)
			}
		}
		if step == 7 {
			if _, err := canonical.ParseTime(l.IssuedAt); err != nil {
				t.Fatalf("accepted a malformed issued_at: %v", err)
			}
			key, err := didkey.DecodeKey(l.DeviceCredential.DevicePublicKey)
			if err != nil {
				t.Fatalf("accepted an undecodable device key: %v", err)
			}
			m := canonical.Login{OperatorDID: l.DeviceCredential.OperatorDID, DevicePublicKey: l.DeviceCredential.DevicePublicKey, Challenge: l.Challenge, IssuedAt: l.IssuedAt}
			if err := canonical.Verify(key, prefix, m, l.Signature); err != nil {
				t.Fatalf("accepted a login signature that fails: %v", err)
			}
		}

		_, err2 := authn.VerifyLogin(l, prefix, now, &recordingChallenges{}, nil, nil)
		if proto.CodeOf(err2) != code || (err == nil) != (err2 == nil) {
			t.Fatalf("two runs disagree: %v / %v", err, err2)
		}
	})
}

var revocationCodes = map[proto.Code]bool{proto.BadRequest: true, proto.DCIDBinding: true, proto.DCBadSignature: true}

// FuzzVerifyRevocation: VerifyRevocation (POST /v1/auth/revoke, docs/protocol.md §10.5) is
// deterministic and never panics; it fails only with BAD_REQUEST, DC_ID_BINDING or
// DC_BAD_SIGNATURE and returns nothing then; BAD_REQUEST exactly when the shape check
// fails; and what it accepts has a revocation_id of 1–256 bytes, a revoked_at in the
// 20-character form at most 5 s ahead, a root key that derives the o-tagged DID, and the
// root key's signature over message 11.
func FuzzVerifyRevocation(f *testing.F) {
	for _, c := range extensionCases(f, 11) {
		body := `{"revocation":` + string(c.Fields) + `,"signature":"` + c.SignatureB58 + `"}`
		f.Add([]byte(body), c.Prefix, authnNow)
	}
	f.Fuzz(func(t *testing.T, data []byte, prefix string, unix int64) {
		r, now, got, ok, err := verifyTwice(t, data, unix, revocationCodes, func(r authn.SignedRevocation, now time.Time) (authn.Revoked, error) {
			return authn.VerifyRevocation(r, prefix, now)
		})
		if !ok {
			return
		}
		if err != nil {
			shapeOK := authn.CheckRevocationShape(r, now) == nil
			if shapeOK == (proto.CodeOf(err) == proto.BadRequest) && canonical.CheckPrefix(prefix) == nil {
				t.Fatalf("BAD_REQUEST is %v but the shape check says %v: %v", proto.CodeOf(err) == proto.BadRequest, shapeOK, err)
			}
			return
		}
		m := r.Revocation
		if n := len(m.RevocationID); n < 1 || n > authn.MaxIDLen {
			t.Fatalf("accepted a revocation_id of %d bytes", n)
		}
		at, perr := canonical.ParseTime(m.RevokedAt)
		if perr != nil || at.After(now.Truncate(time.Second).Add(authn.RevocationSkew)) || !at.Equal(got.RevokedAt) {
			t.Fatalf("accepted revoked_at %q at %s", m.RevokedAt, now)
		}
		d, root, cerr := didkey.CheckOperator(m.OperatorDID, m.OperatorRootPublicKey)
		if cerr != nil || d.String() != got.OperatorDID || got.RevocationID != m.RevocationID {
			t.Fatalf("accepted a revocation whose operator does not bind: %v", cerr)
		}
		if err := canonical.Verify(root, prefix, m, r.Signature); err != nil {
			t.Fatalf("accepted a revocation whose signature fails: %v", err)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
