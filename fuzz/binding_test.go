package fuzz

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// bindingNow is the clock of the binding targets: five minutes into the vectors' sessions
// (created 10:30, expiring 10:40), four into their authorization.
var bindingNow = time.Date(2025, 1, 15, 10, 35, 0, 0, time.UTC)

type bindingVectorFiles struct {
	canon   map[string]testkit.SignedCase
	order   []string // canonical.json's case ids, in file order, for stable seeding
	rejects []testkit.Reject
}

func loadBindingVectors(f *testing.F) bindingVectorFiles {
	f.Helper()
	canon, rejects := testkit.Canonical(f), testkit.Rejects(f)
	v := bindingVectorFiles{canon: map[string]testkit.SignedCase{}, rejects: rejects.Cases}
	for _, c := range canon.Cases {
		v.canon[c.ID] = c
		v.order = append(v.order, c.ID)
	}
	return v
}

// bindingSeedJSON renders a vector's fields plus its signature under sigField as a JSON object.
func bindingSeedJSON(f *testing.F, fields json.RawMessage, sigField, sig string) []byte {
	f.Helper()
	var o map[string]any
	if err := json.Unmarshal(fields, &o); err != nil {
		f.Fatal(err)
	}
	o[sigField] = sig
	b, err := json.Marshal(o)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// requireBindingCode fails unless err carries a protocol code of its own, one of allowed.
func requireBindingCode(t *testing.T, err error, allowed ...proto.Code) {
	t.Helper()
	var c interface{ Code() string }
	if !errors.As(err, &c) {
		t.Fatalf("error without a protocol code: %v", err)
	}
	for _, a := range allowed {
		if proto.Code(c.Code()) == a {
			return
		}
	}
	t.Fatalf("code %s (%v), want one of %v", c.Code(), err, allowed)
}

// FuzzValidateInitiate decodes an initiate body and validates it: no panic, every refusal has
// one of the initiate codes, the answer is deterministic, and an accepted request makes a
// session whose stored description re-verifies on its own.
func FuzzValidateInitiate(f *testing.F) {
	v := loadBindingVectors(f)
	seeds := 0
	for _, id := range v.order {
		if c := v.canon[id]; c.Message == 6 {
			f.Add(bindingSeedJSON(f, c.Fields, "node_signature", c.SignatureB58), c.Prefix)
			seeds++
		}
	}
	for _, c := range v.rejects {
		if c.Message == 6 {
			f.Add([]byte(c.FieldsJSON), canonical.DefaultPrefix)
			seeds++
		}
	}
	if seeds == 0 {
		f.Fatal("no seeds loaded from the vectors")
	}
	f.Fuzz(func(t *testing.T, body []byte, prefix string) {
		var req binding.InitiateRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		key, err := binding.ValidateInitiate(req, prefix, bindingNow)
		key2, err2 := binding.ValidateInitiate(req, prefix, bindingNow)
		if key != key2 || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("not deterministic: %v, %v then %v, %v", key, err, key2, err2)
		}
		if err != nil {
			requireBindingCode(t, err, proto.BadRequest, proto.IDBindingRequired, proto.IDBindingFailed,
				proto.TTLTooLong, proto.AlreadyExpired, proto.BadSignature)
			if key != (didkey.PublicKey{}) {
				t.Fatalf("a refused request returned key %s", key)
			}
			return
		}
		s := binding.NewBindingSession(req, key, binding.HashSecret("CODE2345"), binding.HashSecret("token"), bindingNow)
		if s.State != binding.Initiated || s.Request.NodePublicKey != key.Base58() || !s.ExpiresAt.After(bindingNow) {
			t.Fatalf("accepted request made session %+v", s)
		}
		if ttl := s.ExpiresAt.Sub(s.CreatedAt); ttl <= 0 || ttl > binding.MaxSessionTTL {
			t.Fatalf("accepted a window of %v", ttl)
		}
		if err := canonical.Verify(key, prefix, s.Request, s.NodeSignature); err != nil {
			t.Fatalf("the stored description does not re-verify: %v", err)
		}
		var ce *binding.ChainError
		if err := binding.VerifyChain(s, binding.Acceptance{}, prefix); !errors.As(err, &ce) || ce.Link != binding.LinkDeviceCredential {
			t.Fatalf("an accepted session's own link does not verify: %v", err)
		}
	})
}

// bindingVectorSession is the session the vectors' chain builds (session-basic, dc-basic,
// authz-basic), as accept finds it: PENDING_NODE_ACCEPTANCE.
func bindingVectorSession(f *testing.F, v bindingVectorFiles) binding.BindingSession {
	f.Helper()
	decode := func(id string, into any) string {
		c, ok := v.canon[id]
		if !ok {
			f.Fatalf("vector %s missing", id)
		}
		if err := json.Unmarshal(c.Fields, into); err != nil {
			f.Fatal(err)
		}
		return c.SignatureB58
	}
	var req binding.InitiateRequest
	req.NodeSignature = decode("session-basic", &req.BindingSession)
	var dc authn.DeviceCredential
	dc.Signature = decode("dc-basic", &dc.DeviceCredential)
	var az binding.AuthorizationCredential
	az.Signature = decode("authz-basic", &az.Authorization)
	key, err := binding.ValidateInitiate(req, canonical.DefaultPrefix, bindingNow)
	if err != nil {
		f.Fatal(err)
	}
	s := binding.NewBindingSession(req, key, binding.HashSecret("CODE2345"), binding.HashSecret("token"), bindingNow)
	s.State, s.OperatorDID = binding.PendingNodeAcceptance, dc.OperatorDID
	s.DeviceCredential, s.Authorization = &dc, &az
	return s
}

// FuzzVerifyAcceptance decodes an acceptance and runs the accept checks against a fixed valid
// session: CheckAcceptance, then VerifyChain. Neither panics, each refusal has its code, both
// are deterministic, and a chain that verifies implies fields that match.
func FuzzVerifyAcceptance(f *testing.F) {
	v := loadBindingVectors(f)
	s := bindingVectorSession(f, v)
	seeds := 0
	for _, id := range v.order {
		if c := v.canon[id]; c.Message == 8 {
			f.Add(bindingSeedJSON(f, c.Fields, "signature", c.SignatureB58))
			seeds++
		}
	}
	for _, c := range v.rejects {
		if c.Message == 8 {
			f.Add([]byte(c.FieldsJSON))
			seeds++
		}
	}
	if seeds == 0 {
		f.Fatal("no seeds loaded from the vectors")
	}
	var valid binding.Acceptance
	if json.Unmarshal(bindingSeedJSON(f, v.canon["accept-true"].Fields, "signature", v.canon["accept-true"].SignatureB58), &valid) != nil {
		f.Fatal("accept-true does not decode")
	}
	if err := binding.VerifyChain(s, valid, canonical.DefaultPrefix); err != nil {
		f.Fatalf("the vectors' own chain does not verify: %v", err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var acc binding.Acceptance
		if json.Unmarshal(body, &acc) != nil {
			return
		}
		const prefix = canonical.DefaultPrefix
		fieldErr := binding.CheckAcceptance(s, acc, prefix, true)
		chainErr := binding.VerifyChain(s, acc, prefix)
		if again := binding.CheckAcceptance(s, acc, prefix, true); (again == nil) != (fieldErr == nil) || (again != nil && again.Error() != fieldErr.Error()) {
			t.Fatalf("CheckAcceptance not deterministic: %v then %v", fieldErr, again)
		}
		if again := binding.VerifyChain(s, acc, prefix); (again == nil) != (chainErr == nil) || (again != nil && again.Error() != chainErr.Error()) {
			t.Fatalf("VerifyChain not deterministic: %v then %v", chainErr, again)
		}
		if fieldErr != nil {
			requireBindingCode(t, fieldErr, proto.BadRequest)
		}
		if chainErr != nil {
			requireBindingCode(t, chainErr, proto.BadSignature)
			var ce *binding.ChainError
			if !errors.As(chainErr, &ce) || ce.Link != binding.LinkAcceptance {
				t.Fatalf("only the acceptance link can fail against this session: %v", chainErr)
			}
			return
		}
		if fieldErr != nil {
			t.Fatalf("the chain verifies but the fields do not match: %v", fieldErr)
		}
		if err := binding.VerifyAcceptanceSignature(s, acc, prefix); err != nil {
			t.Fatalf("the chain verifies but the acceptance signature does not: %v", err)
		}
	})
}

// FuzzNormalizeCode: normalising is idempotent, removes exactly ASCII lower case, spaces and
// dashes, never lengthens its input or breaks UTF-8, and NormalizePresented agrees with it.
func FuzzNormalizeCode(f *testing.F) {
	file := testkit.ShortCodes(f)
	for _, c := range file.Cases {
		f.Add(c.Input)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n := binding.NormalizeCode(in)
		if again := binding.NormalizeCode(n); again != n {
			t.Fatalf("NormalizeCode(%q) = %q, then %q", in, n, again)
		}
		if len(n) > len(in) {
			t.Fatalf("NormalizeCode(%q) = %q is longer", in, n)
		}
		if strings.ContainsAny(n, " -abcdefghijklmnopqrstuvwxyz") {
			t.Fatalf("NormalizeCode(%q) = %q keeps a space, dash or lower-case letter", in, n)
		}
		if utf8.ValidString(in) {
			// The same rule read rune by rune: only ASCII is touched.
			want := strings.Map(func(r rune) rune {
				switch {
				case r == ' ' || r == '-':
					return -1
				case r >= 'a' && r <= 'z':
					return r - 'a' + 'A'
				}
				return r
			}, in)
			if n != want {
				t.Fatalf("NormalizeCode(%q) = %q, want %q", in, n, want)
			}
		}
		if utf8.ValidString(in) && !utf8.ValidString(n) {
			t.Fatalf("NormalizeCode(%q) = %q is not UTF-8", in, n)
		}
		if binding.ValidShortCode(n) {
			for i := 0; i < len(n); i++ {
				if !strings.ContainsRune(binding.ShortCodeAlphabet, rune(n[i])) {
					t.Fatalf("valid code %q has %q", n, n[i])
				}
			}
		}
		norm, isCode := binding.NormalizePresented(in)
		if isCode != (len(n) == binding.ShortCodeLength) || (isCode && norm != n) || (!isCode && norm != in) {
			t.Fatalf("NormalizePresented(%q) = %q, %v; NormalizeCode gives %q", in, norm, isCode, n)
		}
	})
}
