package binding_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// canonicalCases indexes the cases of canonical.json by id.
func canonicalCases(t *testing.T) map[string]testkit.SignedCase {
	t.Helper()
	cases := map[string]testkit.SignedCase{}
	for _, c := range testkit.Canonical(t).Cases {
		cases[c.ID] = c
	}
	return cases
}

func decodeInto[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return v
}

// TestCanonicalVectors checks every message 6, 7 and 8 case of canonical.json: the bytes, the
// signature, and for message 6 the whole of ValidateInitiate; for message 8, that its digest is
// the digest of the message 7 case it names.
func TestCanonicalVectors(t *testing.T) {
	cases := canonicalCases(t)
	seen := map[int]int{}
	for _, c := range cases {
		if c.Message < 6 || c.Message > 8 {
			continue
		}
		seen[c.Message]++
		t.Run(c.ID, func(t *testing.T) {
			key, err := didkey.DecodeKey(c.PublicKeyB58)
			if err != nil {
				t.Fatal(err)
			}
			var m canonical.Message
			switch c.Message {
			case 6:
				req := binding.InitiateRequest{BindingSession: decodeInto[canonical.BindingSession](t, c.Fields), NodeSignature: c.SignatureB58}
				m = req.BindingSession
				created, _ := canonical.ParseTime(req.CreatedAt)
				got, err := binding.ValidateInitiate(req, c.Prefix, created.Add(time.Minute))
				if err != nil || got != key {
					t.Fatalf("ValidateInitiate = %v, %v", got, err)
				}
				req.NodePublicKey = key.Hex()
				if _, err := binding.ValidateInitiate(req, c.Prefix, created.Add(time.Minute)); err != nil {
					t.Fatalf("the same request with the key in hex: %v", err)
				}
			case 7:
				az := decodeInto[canonical.Authorization](t, c.Fields)
				m = az
				if err := binding.CheckAuthorizationShape(binding.AuthorizationCredential{Authorization: az}); err != nil {
					t.Fatalf("shape: %v", err)
				}
			case 8:
				acc := decodeInto[canonical.Acceptance](t, c.Fields)
				m = acc
				if err := binding.CheckAcceptanceShape(binding.Acceptance{Acceptance: acc}); err != nil {
					t.Fatalf("shape: %v", err)
				}
				named, ok := cases[c.AuthorizationCase]
				if !ok {
					t.Fatalf("names message 7 case %q, which is absent", c.AuthorizationCase)
				}
				digest, err := decodeInto[canonical.Authorization](t, named.Fields).Digest(named.Prefix)
				if err != nil || digest != acc.AuthorizationDigest {
					t.Fatalf("digest of %s is %s (%v), the acceptance carries %s", named.ID, digest, err, acc.AuthorizationDigest)
				}
			}
			b, err := m.Bytes(c.Prefix)
			if err != nil || string(b) != c.ExpectedUTF8 {
				t.Fatalf("bytes %q (%v), want %q", b, err, c.ExpectedUTF8)
			}
			if err := canonical.Verify(key, c.Prefix, m, c.SignatureB58); err != nil {
				t.Fatalf("signature: %v", err)
			}
		})
	}
	for _, msg := range []int{6, 7, 8} {
		if seen[msg] == 0 {
			t.Errorf("no message %d cases loaded", msg)
		}
	}
}

// TestVectorChain assembles a whole chain from the vectors alone — session-basic, dc-basic,
// authz-basic and accept-true, with their own signatures — and runs it through authorize,
// acceptance and VerifyChain; the fixture must sign exactly the same bytes.
func TestVectorChain(t *testing.T) {
	cases := canonicalCases(t)
	sc, dcc, azc, accc := cases["session-basic"], cases["dc-basic"], cases["authz-basic"], cases["accept-true"]
	req := binding.InitiateRequest{BindingSession: decodeInto[canonical.BindingSession](t, sc.Fields), NodeSignature: sc.SignatureB58}
	dc := authn.DeviceCredential{DeviceCredential: decodeInto[canonical.DeviceCredential](t, dcc.Fields), Signature: dcc.SignatureB58}
	az := binding.AuthorizationCredential{Authorization: decodeInto[canonical.Authorization](t, azc.Fields), Signature: azc.SignatureB58}
	acc := binding.Acceptance{Acceptance: decodeInto[canonical.Acceptance](t, accc.Fields), Signature: accc.SignatureB58}

	key, err := binding.ValidateInitiate(req, prefix, tInitiate)
	wantCode(t, err, "")
	s := binding.NewBindingSession(req, key, binding.HashSecret("QMD7RJT8"), binding.HashSecret("token"), tInitiate)
	s, err = binding.Apply(s, binding.Resolve, tInitiate)
	wantCode(t, err, "")
	s.OperatorDID = dc.OperatorDID
	wantCode(t, binding.VerifyAuthorization(s, dc, az, prefix, tAuthz, nil, nil), "")
	s, err = binding.Apply(s, binding.Authorize, tAuthz)
	wantCode(t, err, "")
	s.DeviceCredential, s.Authorization = &dc, &az
	wantCode(t, binding.CheckAcceptance(s, acc, prefix, true), "")
	s, err = binding.Apply(s, binding.Accept, tAuthz)
	wantCode(t, err, "")
	wantLink(t, binding.VerifyChain(s, acc, prefix), binding.LinkInvalid)
	s, err = binding.Apply(s, binding.VerifyOK, tAuthz)
	wantCode(t, err, "")
	if s.State != binding.Active {
		t.Fatalf("state %s", s.State)
	}

	fs, facc := newFixture().build(t)
	for name, pair := range map[string][2]string{
		"message 6": {fs.NodeSignature, sc.SignatureB58},
		"message 2": {fs.DeviceCredential.Signature, dcc.SignatureB58},
		"message 7": {fs.Authorization.Signature, azc.SignatureB58},
		"message 8": {facc.Signature, accc.SignatureB58},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: the fixture signs %s, the vector %s", name, pair[0], pair[1])
		}
	}
}

// TestRejectVectors runs the message 6, 7 and 8 cases of rejects.json that the Go structs can
// carry: each must be refused before any signature with its expected code, by ValidateInitiate
// (message 6), CheckAuthorizationShape (7) or CheckAcceptanceShape (8). Cases whose JSON does
// not fit the struct types (a string for a number, a number for a boolean) are the HTTP layer's
// shape check and are counted as skipped; every one of them must be of stage "wellformed".
func TestRejectVectors(t *testing.T) {
	file := testkit.Rejects(t)
	now := time.Date(2025, 1, 15, 10, 31, 0, 0, time.UTC)

	// check decodes one message's fields and returns its refusal; decoded is false when the
	// JSON does not fit the Go types. A non-nil limit overrides the named limit field, for the
	// values JSON cannot carry (NaN, ±Inf).
	check := func(t *testing.T, msg int, raw json.RawMessage, field string, limit *float64) (decoded bool, err error) {
		t.Helper()
		override := func(fields map[string]**float64) {
			if limit == nil {
				return
			}
			p, ok := fields[field]
			if !ok {
				t.Fatalf("no limit field %s in message %d", field, msg)
			}
			*p = limit
		}
		switch msg {
		case 6:
			var req binding.InitiateRequest
			if json.Unmarshal(raw, &req) != nil {
				return false, nil
			}
			override(map[string]**float64{
				"requested_single_limit": &req.RequestedSingleLimit,
				"requested_daily_limit":  &req.RequestedDailyLimit,
			})
			_, err := binding.ValidateInitiate(req, prefix, now)
			return true, err
		case 7:
			var az binding.AuthorizationCredential
			if json.Unmarshal(raw, &az) != nil {
				return false, nil
			}
			override(map[string]**float64{"single_limit": &az.SingleLimit, "daily_limit": &az.DailyLimit})
			return true, binding.CheckAuthorizationShape(az)
		case 8:
			var acc binding.Acceptance
			if json.Unmarshal(raw, &acc) != nil {
				return false, nil
			}
			override(nil)
			return true, binding.CheckAcceptanceShape(acc)
		}
		t.Fatalf("message %d", msg)
		return false, nil
	}

	// The base fields pass every check these cases exercise: message 6 reaches the signature.
	for msg, want := range map[int]proto.Code{6: proto.BadSignature, 7: "", 8: ""} {
		ok, err := check(t, msg, file.BaseFields[strconv.Itoa(msg)], "", nil)
		if !ok {
			t.Fatalf("message %d base fields do not decode", msg)
		}
		if errorCode(err) != want && !(want == "" && err == nil) {
			t.Fatalf("message %d base fields: %v, want %q", msg, err, want)
		}
	}

	covered, skipped := map[int]int{}, map[int]int{}
	for _, c := range file.Cases {
		if c.Message < 6 || c.Message > 8 {
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			var err error
			var ok bool
			if c.RawValue != "" {
				v, perr := strconv.ParseFloat(c.RawValue, 64)
				if perr != nil && !errors.Is(perr, strconv.ErrRange) {
					t.Fatalf("raw value %q: %v", c.RawValue, perr)
				}
				ok, err = check(t, c.Message, file.BaseFields[strconv.Itoa(c.Message)], c.Field, &v)
			} else {
				ok, err = check(t, c.Message, c.Fields, "", nil)
			}
			if !ok {
				if c.Stage != "wellformed" {
					t.Fatalf("stage %s case does not fit the Go structs", c.Stage)
				}
				skipped[c.Message]++
				return
			}
			covered[c.Message]++
			if c.Expected.HTTP != 400 {
				t.Fatalf("expected HTTP %d; only 400 cases exist for messages 6-8", c.Expected.HTTP)
			}
			wantCode(t, err, proto.Code(c.Expected.Code))
		})
	}
	t.Logf("covered %v, skipped to the HTTP layer %v (by message)", covered, skipped)
	if covered[6] == 0 || covered[7] == 0 || covered[8] == 0 {
		t.Fatalf("no cases covered for some message: %v", covered)
	}
}
