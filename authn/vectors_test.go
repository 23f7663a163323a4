package authn_test

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// TestCanonicalVectors verifies every DeviceCredential of canonical.json, and logs in with
// every login vector, paired with the credential that names the same operator and device key.
func TestCanonicalVectors(t *testing.T) {
	v := testkit.Canonical(t)
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

	var creds []authn.DeviceCredential
	var credPrefix []string
	for _, c := range v.Cases {
		if c.Message != 2 {
			continue
		}
		var dc authn.DeviceCredential
		if err := json.Unmarshal(c.Fields, &dc.DeviceCredential); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		dc.Signature = c.SignatureB58
		t.Run(c.ID, func(t *testing.T) {
			if sig, err := canonical.Sign(testkit.SeedKey(v.Signers[c.Signer].SeedHex), c.Prefix, dc.DeviceCredential); err != nil || sig != c.SignatureB58 {
				t.Fatalf("signing with the vector's seed gives %q, %v; vector has %q", sig, err, c.SignatureB58)
			}
			wantCode(t, authn.CheckCredentialShape(dc), "")
			dev, err := authn.VerifyCredential(dc, c.Prefix, now, nil)
			wantCode(t, err, "")
			if dev.OperatorDID.String() != dc.OperatorDID || dev.RootKey.Hex() != v.Signers[c.Signer].PublicKeyHex {
				t.Fatalf("Device = %s %s", dev.OperatorDID, dev.RootKey)
			}
			other := "service"
			if c.Prefix == other {
				other = "libertynet"
			}
			_, err = authn.VerifyCredential(dc, other, now, nil)
			wantCode(t, err, proto.DCBadSignature)
		})
		creds = append(creds, dc)
		credPrefix = append(credPrefix, c.Prefix)
	}

	logins := 0
	for _, c := range v.Cases {
		if c.Message != 1 {
			continue
		}
		var m canonical.Login
		if err := json.Unmarshal(c.Fields, &m); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		found := false
		for i, dc := range creds {
			if credPrefix[i] != c.Prefix || dc.OperatorDID != m.OperatorDID || dc.DevicePublicKey != m.DevicePublicKey {
				continue
			}
			found = true
			logins++
			l := authn.Login{DeviceCredential: dc, Challenge: m.Challenge, IssuedAt: m.IssuedAt, Signature: c.SignatureB58}
			t.Run(c.ID, func(t *testing.T) {
				ch := &acceptAll{}
				dev, err := authn.VerifyLogin(l, c.Prefix, now, ch, nil, nil)
				wantCode(t, err, "")
				if dev.OperatorDID.String() != m.OperatorDID {
					t.Fatalf("Device.OperatorDID = %s", dev.OperatorDID)
				}
				wantCode(t, ch.Consume(m.Challenge, now), proto.BadChallenge)
				// The same login under a fresh challenge store but with one signature byte
				// changed fails at step 6, having consumed the challenge.
				bad := l
				bad.Signature = flipB58(l.Signature)
				ch = &acceptAll{}
				_, err = authn.VerifyLogin(bad, c.Prefix, now, ch, nil, nil)
				wantCode(t, err, proto.BadSignature)
				wantCode(t, ch.Consume(m.Challenge, now), proto.BadChallenge)
			})
			break
		}
		if !found {
			t.Errorf("%s: no credential vector pairs with this login", c.ID)
		}
	}
	if len(creds) == 0 || logins == 0 {
		t.Fatalf("loaded %d credential and %d login vectors", len(creds), logins)
	}
}

// flipB58 changes one signature byte and re-encodes it, so the result is still base58 of
// 64 bytes.
func flipB58(sig string) string {
	raw, err := base58.Decode(sig)
	if err != nil {
		return sig + "x"
	}
	raw[10] ^= 0x40
	return base58.Encode(raw)
}

// TestRejectVectors runs the message 1 and 2 cases of rejects.json through VerifyLogin. The
// vectors leave signatures out and "assume the rest of the request is valid", so each case
// keeps its fields but takes this test's keys, a challenge issued here, and signatures made
// over the fields as given.
func TestRejectVectors(t *testing.T) {
	v := testkit.Rejects(t)
	w := newWorld(t)
	n := 0
	for _, c := range v.Cases {
		if c.Message != 1 && c.Message != 2 {
			continue
		}
		n++
		t.Run(c.ID, func(t *testing.T) {
			want := proto.Code(c.Expected.Code)
			ch := seededChallenger(t, 0)
			challenge := issue(t, ch, testNow)
			var l authn.Login
			switch c.Message {
			case 1:
				var m canonical.Login
				if err := json.Unmarshal(c.Fields, &m); err != nil {
					t.Fatal(err)
				}
				l = w.signLogin(w.credential(), challenge, m.IssuedAt)
			case 2:
				var fields map[string]any
				if err := json.Unmarshal(c.Fields, &fields); err != nil {
					t.Fatal(err)
				}
				own := w.credentialFields()
				for name, val := range map[string]string{
					"operator_did":             own.OperatorDID,
					"operator_root_public_key": own.OperatorRootPublicKey,
					"device_public_key":        own.DevicePublicKey,
				} {
					if name != c.Field {
						fields[name] = val
					}
				}
				b, _ := json.Marshal(fields)
				var f canonical.DeviceCredential
				if err := json.Unmarshal(b, &f); err != nil {
					// A JSON type error: the HTTP layer's 400 before anything here runs.
					if c.Stage != "wellformed" || want != proto.BadRequest {
						t.Fatalf("fields do not decode (%v) but the case is %s/%s", err, c.Stage, want)
					}
					return
				}
				l = w.signLogin(w.signCredential(f), challenge, loginIssuedAt)
			}
			_, err := authn.VerifyLogin(l, prefix, testNow, ch, nil, nil)
			wantCode(t, err, want)
			consumed := ch.Consume(challenge, testNow) != nil
			wantConsumed := c.Expected.Consumed()
			if consumed != wantConsumed {
				t.Fatalf("challenge consumed = %v, want %v", consumed, wantConsumed)
			}
			if c.Message == 2 && want == proto.BadRequest {
				wantCode(t, authn.CheckCredentialShape(l.DeviceCredential), proto.BadRequest)
			}
		})
	}
	if n == 0 {
		t.Fatal("no message 1 or 2 cases in rejects.json")
	}
}

// TestDIDVectors: the operator-role cases of dids.json as a credential's operator_did and
// operator_root_public_key. Negatives are DC_ID_BINDING, positives pass.
func TestDIDVectors(t *testing.T) {
	v := testkit.DIDs(t)
	w := newWorld(t)
	seeds := map[string]ed25519.PrivateKey{}
	for _, k := range v.Keys {
		seeds[k.PublicKeyHex] = testkit.SeedKey(k.SeedHex)
	}
	// Each case's credential is signed by the key it names, when the vectors hold its seed,
	// so that step 3 would pass and only step 2 can fail.
	credential := func(c testkit.DIDCase) authn.DeviceCredential {
		f := w.credentialFields()
		f.OperatorDID, f.OperatorRootPublicKey = c.DID, c.PublicKey
		root := w.root
		if k, err := didkey.DecodeKey(c.PublicKey); err == nil && seeds[k.Hex()] != nil {
			root = seeds[k.Hex()]
		}
		return world{root: root, device: w.device}.signCredential(f)
	}
	neg, pos := 0, 0
	for _, c := range v.Negative {
		if c.Role != "operator" {
			continue
		}
		neg++
		t.Run(c.ID, func(t *testing.T) {
			if c.Expected == nil || c.Expected.Code != string(proto.DCIDBinding) {
				t.Fatalf("operator negative expects %+v", c.Expected)
			}
			dc := credential(c)
			_, err := authn.VerifyCredential(dc, prefix, testNow, nil)
			wantCode(t, err, proto.DCIDBinding)
			ch := seededChallenger(t, 0)
			challenge := issue(t, ch, testNow)
			_, err = authn.VerifyLogin(w.signLogin(dc, challenge, loginIssuedAt), prefix, testNow, ch, nil, nil)
			wantCode(t, err, proto.DCIDBinding)
			wantCode(t, ch.Consume(challenge, testNow), "")
		})
	}
	for _, c := range v.Positive {
		if c.Role != "operator" {
			continue
		}
		pos++
		t.Run(c.ID, func(t *testing.T) {
			dev, err := authn.VerifyCredential(credential(c), prefix, testNow, nil)
			wantCode(t, err, "")
			if dev.OperatorDID.String() != c.DID {
				t.Fatalf("Device.OperatorDID = %s", dev.OperatorDID)
			}
		})
	}
	if neg == 0 || pos == 0 {
		t.Fatalf("loaded %d operator negatives and %d positives", neg, pos)
	}
}
