package fuzz

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// leaveCases returns the message 11 or 12 cases of extensions.json.
func leaveCases(f *testing.F, message int) []testkit.SignedCase {
	f.Helper()
	var out []testkit.SignedCase
	for _, c := range testkit.Extensions(f).Cases {
		if c.Message == message {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		f.Fatalf("extensions.json has no message %d case", message)
	}
	return out
}

// revocationNow is a clock after every revocation vector's revoked_at.
var revocationNow = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).Unix()

var revocationCodes = map[proto.Code]bool{proto.BadRequest: true, proto.DCIDBinding: true, proto.DCBadSignature: true}

// FuzzVerifyRevocation: VerifyRevocation (POST /v1/auth/revoke, docs/protocol.md §10.5) is
// deterministic and never panics; it fails only with BAD_REQUEST, DC_ID_BINDING or
// DC_BAD_SIGNATURE and returns nothing then; BAD_REQUEST exactly when the shape check
// fails; and what it accepts has a revocation_id of 1–256 bytes, a revoked_at in the
// 20-character form at most 5 s ahead, a root key that derives the o-tagged DID, and the
// root key's signature over message 11.
func FuzzVerifyRevocation(f *testing.F) {
	for _, c := range leaveCases(f, 11) {
		body := `{"revocation":` + string(c.Fields) + `,"signature":"` + c.SignatureB58 + `"}`
		f.Add([]byte(body), c.Prefix, revocationNow)
	}
	f.Fuzz(func(t *testing.T, data []byte, prefix string, unix int64) {
		var r authn.SignedRevocation
		if json.Unmarshal(data, &r) != nil {
			return
		}
		now := time.Unix(unix, 0).UTC()
		got, err := authn.VerifyRevocation(r, prefix, now)
		got2, err2 := authn.VerifyRevocation(r, prefix, now)
		if got != got2 || proto.CodeOf(err) != proto.CodeOf(err2) || (err == nil) != (err2 == nil) {
			t.Fatalf("two runs disagree: %v / %v", err, err2)
		}
		if err != nil {
			if !revocationCodes[proto.CodeOf(err)] {
				t.Fatalf("error %q carries code %s", err, proto.CodeOf(err))
			}
			if got != (authn.Revoked{}) {
				t.Fatalf("failure returned %+v", got)
			}
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

// FuzzRevocation: message 11's bytes, like every message's, are deterministic, refuse
// exactly what breaks injectivity, and split on LF into the domain line and its four fields
// as given.
func FuzzRevocation(f *testing.F) {
	for _, c := range leaveCases(f, 11) {
		var m canonical.Revocation
		if json.Unmarshal(c.Fields, &m) != nil {
			f.Fatalf("%s: fields do not decode", c.ID)
		}
		f.Add(c.Prefix, m.OperatorDID, m.OperatorRootPublicKey, m.RevocationID, m.RevokedAt)
	}
	f.Fuzz(func(t *testing.T, prefix, did, key, id, at string) {
		m := canonical.Revocation{OperatorDID: did, OperatorRootPublicKey: key, RevocationID: id, RevokedAt: at}
		b, err := m.Bytes(prefix)
		b2, err2 := m.Bytes(prefix)
		if string(b) != string(b2) || (err == nil) != (err2 == nil) {
			t.Fatal("two runs disagree")
		}
		valid := canonical.CheckPrefix(prefix) == nil
		for _, s := range []string{did, key, id, at} {
			valid = valid && canonical.CheckString("f", s) == nil
		}
		if valid != (err == nil) {
			t.Fatalf("Bytes error %v, fields valid %v", err, valid)
		}
		if err != nil {
			if proto.CodeOf(err) != proto.BadRequest || b != nil {
				t.Fatalf("refusal %v with %d bytes", err, len(b))
			}
			return
		}
		want := []string{prefix + canonical.RevocationDomain, did, key, id, at}
		if got := strings.Split(string(b), "\n"); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("bytes %q do not split into %q", b, want)
		}
	})
}

// FuzzUnbind: message 12 as FuzzRevocation checks message 11.
func FuzzUnbind(f *testing.F) {
	for _, c := range leaveCases(f, 12) {
		var m canonical.Unbind
		if json.Unmarshal(c.Fields, &m) != nil {
			f.Fatalf("%s: fields do not decode", c.ID)
		}
		f.Add(c.Prefix, m.BindingSessionID, m.NodeDID, m.TS)
	}
	f.Fuzz(func(t *testing.T, prefix, id, did string, ts int64) {
		m := canonical.Unbind{BindingSessionID: id, NodeDID: did, TS: ts}
		b, err := m.Bytes(prefix)
		valid := canonical.CheckPrefix(prefix) == nil && canonical.CheckString("f", id) == nil && canonical.CheckString("f", did) == nil
		if valid != (err == nil) {
			t.Fatalf("Bytes error %v, fields valid %v", err, valid)
		}
		if err != nil {
			if proto.CodeOf(err) != proto.BadRequest || b != nil {
				t.Fatalf("refusal %v with %d bytes", err, len(b))
			}
			return
		}
		want := strings.Join([]string{prefix + canonical.UnbindDomain, id, did, strconv.FormatInt(ts, 10)}, "\n")
		if string(b) != want {
			t.Fatalf("bytes %q, want %q", b, want)
		}
	})
}
