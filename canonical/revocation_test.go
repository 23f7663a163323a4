package canonical_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

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
		if diff := cmp.Diff(spec.Fields, fieldNames(k.typ())); diff != "" {
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
			m := decodeExt(t, k, c.Fields)
			_, pub := checkSignedCase(t, c, k.domain, m)
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
