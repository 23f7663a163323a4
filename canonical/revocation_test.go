package canonical_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// extKinds are the messages of docs/protocol.md §10 that this package builds. Message 10
// (register v2) belongs to the registration work of issue 11 and is skipped here.
var extKinds = map[int]kind{
	11: {11, canonical.RevocationDomain, canonical.Revocation{}},
	12: {12, canonical.UnbindDomain, canonical.Unbind{}},
}

func decodeExt(t *testing.T, k kind, raw json.RawMessage) canonical.Message {
	t.Helper()
	var m canonical.Message
	var err error
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	switch k.num {
	case 11:
		var r canonical.Revocation
		err = dec.Decode(&r)
		m = r
	case 12:
		var u canonical.Unbind
		err = dec.Decode(&u)
		m = u
	}
	if err != nil {
		t.Fatalf("message %d fields: %v", k.num, err)
	}
	return m
}

func TestExtensionVectors(t *testing.T) {
	v := testkit.Extensions(t)
	for num, k := range extKinds {
		spec, ok := v.Messages[strconv.Itoa(num)]
		if !ok {
			t.Fatalf("message %d missing from extensions.json", num)
		}
		if spec.Domain != "P"+k.domain {
			t.Errorf("message %d domain %q, struct says P%s", num, spec.Domain, k.domain)
		}
		var names []string
		for i := 0; i < k.typ().NumField(); i++ {
			names = append(names, jsonName(k.typ().Field(i)))
		}
		if diff := cmp.Diff(spec.Fields, names); diff != "" {
			t.Errorf("message %d fields (-vectors +struct):\n%s", num, diff)
		}
	}
	checked := 0
	for _, c := range v.Cases {
		k, ok := extKinds[c.Message]
		if !ok {
			continue // message 10, register v2: issue 11
		}
		t.Run(c.ID, func(t *testing.T) {
			if c.Domain != c.Prefix+k.domain {
				t.Errorf("domain %q, want %q", c.Domain, c.Prefix+k.domain)
			}
			m := decodeExt(t, k, c.Fields)
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
			other := "other"
			if err := canonical.Verify(pub, other, m, c.SignatureB58); proto.CodeOf(err) != proto.BadSignature {
				t.Errorf("Verify under prefix %q = %v, want BAD_SIGNATURE", other, err)
			}
			checked++
		})
	}
	if checked != 5 {
		t.Errorf("reproduced %d cases of messages 11 and 12, want 5", checked)
	}
}

// A revocation and an unbind refuse what would make their bytes ambiguous, like every
// other message.
func TestExtensionInjectivity(t *testing.T) {
	for name, m := range map[string]canonical.Message{
		"revocation_id with LF":   canonical.Revocation{OperatorDID: "did:svrp:o:c05e0a31", OperatorRootPublicKey: "k", RevocationID: "a\nb", RevokedAt: "2025-01-15T11:00:00Z"},
		"operator_did with CR":    canonical.Revocation{OperatorDID: "did:svrp:o:c05e0a31\r", RevocationID: "r"},
		"revoked_at with NUL":     canonical.Revocation{RevokedAt: "2025-01-15T11:00:00Z\x00"},
		"unbind node_did with LF": canonical.Unbind{BindingSessionID: "bs-1", NodeDID: "did:svrp:n:1e452e22\n1"},
		"unbind id with DEL":      canonical.Unbind{BindingSessionID: "bs\x7f"},
	} {
		if _, err := m.Bytes("service"); proto.CodeOf(err) != proto.BadRequest {
			t.Errorf("%s: Bytes = %v, want BAD_REQUEST", name, err)
		}
	}
	// The two fields that could trade a line must not produce the same bytes.
	a, _ := canonical.Unbind{BindingSessionID: "bs", NodeDID: "did", TS: 1}.Bytes("service")
	b, _ := canonical.Cancel{BindingSessionID: "bs", NodeDID: "did", TS: 1}.Bytes("service")
	if bytes.Equal(a, b) {
		t.Error("an unbind and a cancel of the same session share their bytes")
	}
}
