package authn_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
)

func TestVerifyRevocation(t *testing.T) {
	w := newWorld(t)
	other := otherWorld(t)
	at := testNow.Add(-time.Hour)
	valid, err := authn.SignRevocation(w.root, prefix, "", "", "rev-1", at)
	if err != nil {
		t.Fatal(err)
	}
	if valid.Revocation.OperatorDID != w.operatorDID() || valid.Revocation.OperatorRootPublicKey != pubKey(w.root).Base58() {
		t.Fatalf("SignRevocation derived %+v", valid.Revocation)
	}
	resign := func(f func(m *canonical.Revocation)) authn.SignedRevocation {
		r := valid
		f(&r.Revocation)
		r.Signature, _ = canonical.Sign(w.root, prefix, r.Revocation)
		return r
	}
	edit := func(f func(r *authn.SignedRevocation)) authn.SignedRevocation {
		r := valid
		f(&r)
		return r
	}
	cases := []struct {
		name string
		r    authn.SignedRevocation
		want proto.Code
	}{
		{"valid", valid, ""},
		{"hex root key, signed as given", resign(func(m *canonical.Revocation) { m.OperatorRootPublicKey = pubKey(w.root).Hex() }), ""},
		{"revoked_at 5 s ahead", resign(func(m *canonical.Revocation) { m.RevokedAt = canonical.FormatTime(testNow.Add(5 * time.Second)) }), ""},
		{"revoked_at years ago", resign(func(m *canonical.Revocation) { m.RevokedAt = "2001-01-01T00:00:00Z" }), ""},
		{"revocation_id of 256 bytes", resign(func(m *canonical.Revocation) { m.RevocationID = strings.Repeat("r", 256) }), ""},
		// 1. shape
		{"revoked_at 6 s ahead", resign(func(m *canonical.Revocation) { m.RevokedAt = canonical.FormatTime(testNow.Add(6 * time.Second)) }), proto.BadRequest},
		{"revoked_at with offset", resign(func(m *canonical.Revocation) { m.RevokedAt = "2025-06-01T11:00:00+00:00" }), proto.BadRequest},
		{"revoked_at empty", resign(func(m *canonical.Revocation) { m.RevokedAt = "" }), proto.BadRequest},
		{"revocation_id empty", resign(func(m *canonical.Revocation) { m.RevocationID = "" }), proto.BadRequest},
		{"revocation_id of 257 bytes", resign(func(m *canonical.Revocation) { m.RevocationID = strings.Repeat("r", 257) }), proto.BadRequest},
		{"revocation_id with LF", edit(func(r *authn.SignedRevocation) { r.Revocation.RevocationID = "a\nb" }), proto.BadRequest},
		{"operator_did with NUL", edit(func(r *authn.SignedRevocation) { r.Revocation.OperatorDID += "\x00" }), proto.BadRequest},
		{"root key invalid UTF-8", edit(func(r *authn.SignedRevocation) { r.Revocation.OperatorRootPublicKey = "\xff" }), proto.BadRequest},
		{"shape before id-binding", edit(func(r *authn.SignedRevocation) { r.Revocation.OperatorDID = "x"; r.Revocation.RevokedAt = "x" }), proto.BadRequest},
		// 2. id-binding
		{"operator_did of another root", edit(func(r *authn.SignedRevocation) { r.Revocation.OperatorDID = other.operatorDID() }), proto.DCIDBinding},
		{"node-tagged DID", edit(func(r *authn.SignedRevocation) {
			r.Revocation.OperatorDID = strings.Replace(r.Revocation.OperatorDID, ":o:", ":n:", 1)
		}), proto.DCIDBinding},
		{"root key 31 bytes", edit(func(r *authn.SignedRevocation) { r.Revocation.OperatorRootPublicKey = "abc" }), proto.DCIDBinding},
		{"id-binding before signature", edit(func(r *authn.SignedRevocation) { r.Revocation.OperatorDID = other.operatorDID(); r.Signature = "" }), proto.DCIDBinding},
		// 3. signature
		{"signed by another root", func() authn.SignedRevocation {
			r := valid
			r.Signature, _ = canonical.Sign(other.root, prefix, r.Revocation)
			return r
		}(), proto.DCBadSignature},
		{"signature empty", edit(func(r *authn.SignedRevocation) { r.Signature = "" }), proto.DCBadSignature},
		{"signature over another id", edit(func(r *authn.SignedRevocation) { r.Revocation.RevocationID = "rev-2" }), proto.DCBadSignature},
		{"signed as a device credential", edit(func(r *authn.SignedRevocation) { r.Signature = w.credential().Signature }), proto.DCBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := authn.VerifyRevocation(c.r, prefix, testNow)
			wantCode(t, err, c.want)
			if c.want != "" {
				if got != (authn.Revoked{}) {
					t.Errorf("failure returned %+v", got)
				}
				return
			}
			at, _ := canonical.ParseTime(c.r.Revocation.RevokedAt)
			if got.OperatorDID != c.r.Revocation.OperatorDID || got.RevocationID != c.r.Revocation.RevocationID || !got.RevokedAt.Equal(at) {
				t.Errorf("VerifyRevocation = %+v", got)
			}
		})
	}
	if _, err := authn.VerifyRevocation(valid, "libertynet", testNow); proto.CodeOf(err) != proto.DCBadSignature {
		t.Errorf("under another prefix: %v, want DC_BAD_SIGNATURE", err)
	}
}

func TestSignRevocationRefusesAnotherIdentity(t *testing.T) {
	w := newWorld(t)
	other := otherWorld(t)
	if _, err := authn.SignRevocation(w.root, prefix, other.operatorDID(), "", "r", testNow); proto.CodeOf(err) != proto.DCIDBinding {
		t.Errorf("another operator's DID: %v, want DC_ID_BINDING", err)
	}
	if _, err := authn.SignRevocation(w.root, prefix, "", pubKey(other.root).Base58(), "r", testNow); proto.CodeOf(err) != proto.DCIDBinding {
		t.Errorf("another root key string: %v, want DC_ID_BINDING", err)
	}
	if _, err := authn.SignRevocation(w.root[:10], prefix, "", "", "r", testNow); err == nil {
		t.Error("a short private key signed")
	}
	// The credential's spelling is repeated exactly, so the revocation matches it.
	dc := w.credential()
	r, err := authn.SignRevocation(w.root, prefix, dc.OperatorDID, dc.OperatorRootPublicKey, dc.RevocationID, testNow)
	if err != nil || r.Revocation.OperatorDID != dc.OperatorDID || r.Revocation.RevocationID != dc.RevocationID {
		t.Fatalf("SignRevocation = %+v, %v", r, err)
	}
}

func TestCheckCredentialRevoked(t *testing.T) {
	w := newWorld(t)
	dc := w.credential()
	boom := errors.New("list down")
	for _, c := range []struct {
		name string
		rl   authn.Revocations
		want proto.Code
		err  error
	}{
		{"nil list", nil, "", nil},
		{"empty list", authn.RevocationSet{}, "", nil},
		{"other id", authn.RevocationSet{{OperatorDID: dc.OperatorDID, RevocationID: dc.RevocationID + "x"}: true}, "", nil},
		{"other operator", authn.RevocationSet{{OperatorDID: dc.OperatorDID + "0", RevocationID: dc.RevocationID}: true}, "", nil},
		{"revoked", authn.RevocationSet{{OperatorDID: dc.OperatorDID, RevocationID: dc.RevocationID}: true}, proto.DCRevoked, nil},
		{"list fails", authn.RevocationFunc(func(string, string) (bool, error) { return false, boom }), proto.Internal, boom},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := authn.CheckCredentialRevoked(dc, c.rl)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want the list's own error", err)
				}
				return
			}
			wantCode(t, err, c.want)
			if c.want == proto.DCRevoked && !errors.Is(err, authn.ErrDCRevoked) {
				t.Errorf("%v does not match ErrDCRevoked", err)
			}
		})
	}
	// A failing list stops a login before the challenge is consumed.
	l := w.signLogin(dc, "chal", loginIssuedAt)
	c := &counting{Challenges: &acceptAll{}}
	if _, err := authn.VerifyLogin(l, prefix, testNow, c, nil, authn.RevocationFunc(func(string, string) (bool, error) { return false, boom })); !errors.Is(err, boom) || c.ok != 0 {
		t.Fatalf("VerifyLogin with a failing list = %v, consumed %d", err, c.ok)
	}
}
