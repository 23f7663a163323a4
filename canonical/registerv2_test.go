package canonical_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// TestVectorRegisterV2 reproduces every message-10 case of extensions.json byte for byte,
// signature included, and checks that the struct lists the protocol's fields in order.
func TestVectorRegisterV2(t *testing.T) {
	v := testkit.Extensions(t)
	spec, ok := v.Messages["10"]
	if !ok {
		t.Fatal("message 10 missing from extensions.json")
	}
	if spec.Domain != "P"+canonical.RegisterV2Domain {
		t.Errorf("message 10 domain %q, want P%s", spec.Domain, canonical.RegisterV2Domain)
	}
	typ := kind{zero: canonical.RegisterV2{}}.typ()
	var names []string
	for i := 0; i < typ.NumField(); i++ {
		names = append(names, jsonName(typ.Field(i)))
	}
	if diff := cmp.Diff(spec.Fields, names); diff != "" {
		t.Errorf("message 10 fields (-vectors +struct):\n%s", diff)
	}
	checked := 0
	for _, c := range v.Cases {
		if c.Message != 10 {
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			if c.Domain != c.Prefix+canonical.RegisterV2Domain {
				t.Errorf("domain %q, want %q", c.Domain, c.Prefix+canonical.RegisterV2Domain)
			}
			var m canonical.RegisterV2
			dec := json.NewDecoder(bytes.NewReader(c.Fields))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("fields: %v", err)
			}
			m.PublicKey = toBase58(t, m.PublicKey)
			got, err := m.Bytes(c.Prefix)
			if err != nil {
				t.Fatalf("Bytes: %v", err)
			}
			if diff := cmp.Diff(c.ExpectedUTF8, string(got)); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
			if hex.EncodeToString(got) != c.ExpectedHex {
				t.Errorf("hex %x, want %s", got, c.ExpectedHex)
			}
			priv := testkit.SeedKey(c.SeedHex)
			pub := pubOf(t, priv)
			if pub.Base58() != c.PublicKeyB58 || pub.Hex() != c.PublicKeyHex {
				t.Fatalf("seed gives key %s, want %s", pub.Base58(), c.PublicKeyB58)
			}
			sig, err := canonical.Sign(priv, c.Prefix, m)
			if err != nil || sig != c.SignatureB58 {
				t.Errorf("Sign = %q, %v; want %q", sig, err, c.SignatureB58)
			}
			if err := canonical.Verify(pub, c.Prefix, m, c.SignatureB58); err != nil {
				t.Errorf("Verify(vector signature): %v", err)
			}
			raw, _ := base58.Decode(c.SignatureB58)
			if !ed25519.Verify(pub.Ed25519(), []byte(c.ExpectedUTF8), raw) {
				t.Errorf("vector signature does not verify over expected_utf8")
			}
			// A v2 signature is not a v1 signature over the same fields, nor one over
			// another ts: the domain and the ts are both signed.
			v1 := canonical.Register{DID: m.DID, PublicKey: m.PublicKey, Endpoint: m.Endpoint, Capabilities: m.Capabilities, Region: m.Region}
			if err := canonical.Verify(pub, c.Prefix, v1, c.SignatureB58); proto.CodeOf(err) != proto.BadSignature {
				t.Errorf("the v2 signature verifies as message 3: %v", err)
			}
			later := m
			later.TS++
			if err := canonical.Verify(pub, c.Prefix, later, c.SignatureB58); proto.CodeOf(err) != proto.BadSignature {
				t.Errorf("the signature verifies over ts+1: %v", err)
			}
			checked++
		})
	}
	if checked != 3 {
		t.Errorf("reproduced %d message-10 cases, want 3", checked)
	}
}

// RegisterV2 refuses what would make its bytes ambiguous, like message 3.
func TestRegisterV2Injectivity(t *testing.T) {
	for name, m := range map[string]canonical.RegisterV2{
		"endpoint with LF":     {DID: "did:svrp:n:1e452e22", Endpoint: "a\n1"},
		"region with CR":       {Region: "eu\r"},
		"capability with ',':": {Capabilities: []string{"a,b"}},
		"empty capability":     {Capabilities: []string{""}},
	} {
		if _, err := m.Bytes("service"); proto.CodeOf(err) != proto.BadRequest {
			t.Errorf("%s: Bytes = %v, want BAD_REQUEST", name, err)
		}
	}
}
