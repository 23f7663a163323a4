package canonical_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	if diff := cmp.Diff(spec.Fields, fieldNames(kind{zero: canonical.RegisterV2{}}.typ())); diff != "" {
		t.Errorf("message 10 fields (-vectors +struct):\n%s", diff)
	}
	checked := 0
	for _, c := range v.Cases {
		if c.Message != 10 {
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			var m canonical.RegisterV2
			dec := json.NewDecoder(bytes.NewReader(c.Fields))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("fields: %v", err)
			}
			m.PublicKey = toBase58(t, m.PublicKey)
			_, pub := checkSignedCase(t, c, canonical.RegisterV2Domain, m)
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
