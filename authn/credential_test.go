package authn_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

func TestCheckCredentialShape(t *testing.T) {
	w := newWorld(t)
	perms := func(n, size int) []string {
		var p []string
		for i := range n {
			p = append(p, fmt.Sprintf("%0*d", size, i))
		}
		return p
	}
	tests := []struct {
		name string
		edit func(*canonical.DeviceCredential)
		want proto.Code
	}{
		{"valid", func(*canonical.DeviceCredential) {}, ""},
		{"ids of 1 byte", func(f *canonical.DeviceCredential) { f.CredentialID, f.DeviceID, f.RevocationID = "c", "d", "r" }, ""},
		{"ids of 256 bytes", func(f *canonical.DeviceCredential) {
			f.CredentialID, f.DeviceID, f.RevocationID = strings.Repeat("c", 256), strings.Repeat("d", 256), strings.Repeat("r", 256)
		}, ""},
		{"non-ASCII", func(f *canonical.DeviceCredential) { f.DeviceID = "Gerät 设备 🖥" }, ""},
		{"no permissions", func(f *canonical.DeviceCredential) { f.Permissions = nil }, ""},
		{"64 permissions of 64 bytes", func(f *canonical.DeviceCredential) { f.Permissions = perms(64, 64) }, ""},
		{"65 permissions", func(f *canonical.DeviceCredential) { f.Permissions = perms(65, 2) }, proto.BadRequest},
		{"permission of 65 bytes", func(f *canonical.DeviceCredential) { f.Permissions = perms(1, 65) }, proto.BadRequest},
		{"empty permission", func(f *canonical.DeviceCredential) { f.Permissions = []string{""} }, proto.BadRequest},
		{"comma in permission", func(f *canonical.DeviceCredential) { f.Permissions = []string{"a,b"} }, proto.BadRequest},
		{"LF in permission", func(f *canonical.DeviceCredential) { f.Permissions = []string{"a\nb"} }, proto.BadRequest},
		{"credential_id empty", func(f *canonical.DeviceCredential) { f.CredentialID = "" }, proto.BadRequest},
		{"device_id empty", func(f *canonical.DeviceCredential) { f.DeviceID = "" }, proto.BadRequest},
		{"revocation_id empty", func(f *canonical.DeviceCredential) { f.RevocationID = "" }, proto.BadRequest},
		{"credential_id 257 bytes", func(f *canonical.DeviceCredential) { f.CredentialID = strings.Repeat("c", 257) }, proto.BadRequest},
		{"device_id 257 bytes", func(f *canonical.DeviceCredential) { f.DeviceID = strings.Repeat("d", 257) }, proto.BadRequest},
		{"revocation_id 257 bytes", func(f *canonical.DeviceCredential) { f.RevocationID = strings.Repeat("r", 257) }, proto.BadRequest},
		{"device_id 128 two-byte runes", func(f *canonical.DeviceCredential) { f.DeviceID = strings.Repeat("é", 128) }, ""},
		{"device_id 129 two-byte runes", func(f *canonical.DeviceCredential) { f.DeviceID = strings.Repeat("é", 129) }, proto.BadRequest},
		{"invalid UTF-8", func(f *canonical.DeviceCredential) { f.DeviceID = "dev\xff" }, proto.BadRequest},
		{"DEL in operator_did", func(f *canonical.DeviceCredential) { f.OperatorDID += "\x7f" }, proto.BadRequest},
		{"CR in root key", func(f *canonical.DeviceCredential) { f.OperatorRootPublicKey += "\r" }, proto.BadRequest},
		{"TAB in device key", func(f *canonical.DeviceCredential) { f.DevicePublicKey += "\t" }, proto.BadRequest},
		{"NUL in issued_at", func(f *canonical.DeviceCredential) { f.IssuedAt += "\x00" }, proto.BadRequest},
		{"LF in expires_at", func(f *canonical.DeviceCredential) { f.ExpiresAt += "\n" }, proto.BadRequest},
		// Content is judged later, by the step that uses it.
		{"unparsable DID", func(f *canonical.DeviceCredential) { f.OperatorDID = "not a did" }, ""},
		{"unparsable key", func(f *canonical.DeviceCredential) { f.DevicePublicKey = "0x00" }, ""},
		{"unparsable time", func(f *canonical.DeviceCredential) { f.ExpiresAt = "tomorrow" }, ""},
		{"empty DID", func(f *canonical.DeviceCredential) { f.OperatorDID = "" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := w.credentialFields()
			tt.edit(&f)
			err := authn.CheckCredentialShape(authn.DeviceCredential{DeviceCredential: f})
			wantCode(t, err, tt.want)
			if err != nil && !strings.Contains(err.Error(), "device_credential.") {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
}

func TestVerifyCredentialSteps(t *testing.T) {
	w := newWorld(t)
	other := otherWorld(t)
	tests := []struct {
		name string
		dc   func() authn.DeviceCredential
		want proto.Code
	}{
		{"valid", w.credential, ""},
		{"valid with hex keys", w.signedEdit(func(f *canonical.DeviceCredential) {
			f.OperatorRootPublicKey, f.DevicePublicKey = pubKey(w.root).Hex(), pubKey(w.device).Hex()
		}), ""},
		{"fallback operator DID", func() authn.DeviceCredential {
			f := w.credentialFields()
			d, err := didkey.OperatorDID(pubKey(w.root), didkey.FormFallback)
			if err != nil {
				t.Fatal(err)
			}
			f.OperatorDID = d.String()
			return w.signCredential(f)
		}, ""},
		{"small-order device key", w.signedEdit(func(f *canonical.DeviceCredential) {
			f.DevicePublicKey = "0100000000000000000000000000000000000000000000000000000000000000"
		}), proto.DCIDBinding},
		{"non-canonical device key", w.signedEdit(func(f *canonical.DeviceCredential) {
			f.DevicePublicKey = "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
		}), proto.DCIDBinding},
		{"DID of another root", w.signedEdit(func(f *canonical.DeviceCredential) { f.OperatorDID = other.operatorDID() }), proto.DCIDBinding},
		{"another method", w.signedEdit(func(f *canonical.DeviceCredential) { f.OperatorDID = "did:key:z6Mk" }), proto.DCIDBinding},
		{"empty DID", w.signedEdit(func(f *canonical.DeviceCredential) { f.OperatorDID = "" }), proto.DCIDBinding},
		{"root key empty", w.signedEdit(func(f *canonical.DeviceCredential) { f.OperatorRootPublicKey = "" }), proto.DCIDBinding},
		{"uppercase hex root key", w.signedEdit(func(f *canonical.DeviceCredential) { f.OperatorRootPublicKey = strings.ToUpper(pubKey(w.root).Hex()) }), proto.DCIDBinding},
		{"signed by another key", func() authn.DeviceCredential { return world{root: other.root}.signCredential(w.credentialFields()) }, proto.DCBadSignature},
		{"signature not base58", w.editedAfterSigning(func(dc *authn.DeviceCredential) { dc.Signature = "0" + dc.Signature[1:] }), proto.DCBadSignature},
		{"signature too long to decode", w.editedAfterSigning(func(dc *authn.DeviceCredential) { dc.Signature = strings.Repeat("z", 10000) }), proto.DCBadSignature},
		{"permissions reordered after signing still verify", func() authn.DeviceCredential {
			f := w.credentialFields()
			f.Permissions = []string{"b.read", authn.NodesBind, "a.read"}
			dc := w.signCredential(f)
			dc.Permissions = []string{authn.NodesBind, "a.read", "b.read"}
			return dc
		}, ""},
		{"permission added after signing", w.editedAfterSigning(func(dc *authn.DeviceCredential) { dc.Permissions = append(dc.Permissions, "nodes.admin") }), proto.DCBadSignature},
		{"control character passes through as BAD_REQUEST", w.editedAfterSigning(func(dc *authn.DeviceCredential) { dc.DeviceID = "dev\n1" }), proto.BadRequest},
		{"expired", w.signedEdit(func(f *canonical.DeviceCredential) { f.ExpiresAt = "2025-05-31T00:00:00Z" }), proto.DCExpired},
		{"issued_at malformed", w.signedEdit(func(f *canonical.DeviceCredential) { f.IssuedAt = "2025-01-01" }), proto.DCExpired},
		{"expires_at empty", w.signedEdit(func(f *canonical.DeviceCredential) { f.ExpiresAt = "" }), proto.DCExpired},
		{"device key unparsable", w.signedEdit(func(f *canonical.DeviceCredential) { f.DevicePublicKey = "not a key" }), proto.DCIDBinding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, err := authn.VerifyCredential(tt.dc(), prefix, testNow, nil)
			wantCode(t, err, tt.want)
			if err == nil && dev.OperatorDID.String() != tt.dc().OperatorDID {
				t.Errorf("Device.OperatorDID = %s", dev.OperatorDID)
			}
			if err != nil && !dev.OperatorDID.IsZero() {
				t.Errorf("failure returned a partial Device")
			}
		})
	}
}

// TestCredentialWindow walks the edges of issued_at − 5 s ≤ now ≤ expires_at + 5 s, with the
// clock truncated to the second, like TestValidateCertTime.
func TestCredentialWindow(t *testing.T) {
	w := newWorld(t)
	iss := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	exp := time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)
	f := w.credentialFields()
	f.IssuedAt, f.ExpiresAt = canonical.FormatTime(iss), canonical.FormatTime(exp)
	dc := w.signCredential(f)
	tests := []struct {
		name string
		now  time.Time
		want proto.Code
	}{
		{"long before", iss.Add(-24 * time.Hour), proto.DCExpired},
		{"issued_at - 6s", iss.Add(-6 * time.Second), proto.DCExpired},
		{"issued_at - 5.5s (truncates to -6s)", iss.Add(-5500 * time.Millisecond), proto.DCExpired},
		{"issued_at - 5s", iss.Add(-5 * time.Second), ""},
		{"issued_at - 4.5s", iss.Add(-4500 * time.Millisecond), ""},
		{"issued_at", iss, ""},
		{"middle", iss.Add(exp.Sub(iss) / 2), ""},
		{"expires_at", exp, ""},
		{"expires_at + 5s", exp.Add(5 * time.Second), ""},
		{"expires_at + 5.999s (truncates to +5s)", exp.Add(5999 * time.Millisecond), ""},
		{"expires_at + 6s", exp.Add(6 * time.Second), proto.DCExpired},
		{"long after", exp.Add(24 * time.Hour), proto.DCExpired},
		{"other time zone, inside", exp.Add(5 * time.Second).In(time.FixedZone("X", 3*3600)), ""},
		{"other time zone, outside", exp.Add(6 * time.Second).In(time.FixedZone("X", -3*3600)), proto.DCExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := authn.VerifyCredential(dc, prefix, tt.now, nil)
			wantCode(t, err, tt.want)
		})
	}
}

func TestDeviceKey(t *testing.T) {
	w := newWorld(t)
	dc := w.credential()
	dev := authn.Device{Credential: dc}
	if k, err := dev.DeviceKey(); err != nil || k != pubKey(w.device) {
		t.Fatalf("DeviceKey = %v, %v", k, err)
	}
	dev.Credential.DevicePublicKey = "0x1234"
	_, err := dev.DeviceKey()
	wantCode(t, err, proto.DCIDBinding)
	// docs/protocol.md §5.2: VerifyCredential already refuses such a key, at step 2.
	f := w.credentialFields()
	f.DevicePublicKey = "0x1234"
	_, err = authn.VerifyCredential(w.signCredential(f), prefix, testNow, nil)
	wantCode(t, err, proto.DCIDBinding)
}

func TestHasPermission(t *testing.T) {
	d := authn.Device{Credential: authn.DeviceCredential{DeviceCredential: canonical.DeviceCredential{Permissions: []string{"nodes.read", authn.NodesBind}}}}
	for p, want := range map[string]bool{authn.NodesBind: true, "nodes.read": true, "nodes": false, "": false, "NODES.BIND": false} {
		if got := d.HasPermission(p); got != want {
			t.Errorf("HasPermission(%q) = %v, want %v", p, got, want)
		}
	}
	if (authn.Device{}).HasPermission(authn.NodesBind) {
		t.Error("the zero Device has a permission")
	}
}
