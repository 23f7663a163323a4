package binding_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// wantLink fails unless err is a chain error of the given link (LinkInvalid meaning no
// error) that also reads as BAD_SIGNATURE.
func wantLink(t fataler, err error, link binding.Link) {
	t.Helper()
	if link == binding.LinkInvalid {
		if err != nil {
			t.Fatalf("chain refused: %v", err)
		}
		return
	}
	var ce *binding.ChainError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a chain error at link %d (%s)", err, link, link)
	}
	if ce.Link != link {
		t.Fatalf("failed at link %d (%s): %v; want link %d (%s)", ce.Link, ce.Link, err, link, link)
	}
	if !errors.Is(err, binding.ErrBadSignature) || proto.CodeOf(err) != proto.BadSignature {
		t.Fatalf("chain error %v does not read as BAD_SIGNATURE", err)
	}
	if want := fmt.Sprintf("chain link %d (%s) does not verify: ", uint8(link), link); !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error text %q does not name the link as %q", err, want)
	}
}

func TestVerifyChainValid(t *testing.T) {
	for name, change := range map[string]func(f *fixture){
		"as the vectors": func(f *fixture) {},
		"credential keys in hex": func(f *fixture) {
			f.dc.OperatorRootPublicKey, f.dc.DevicePublicKey = pub(f.root).Hex(), pub(f.device).Hex()
		},
		"three DID spellings": func(f *fixture) {
			full, _ := didkey.NodeDID(pub(f.node), didkey.FormFull)
			fallback, _ := didkey.NodeDID(pub(f.node), didkey.FormFallback)
			f.az.NodeDID, f.acc.NodeDID = full.String(), fallback.String()
		},
		"null limits": func(f *fixture) {
			f.req.RequestedSingleLimit, f.req.RequestedDailyLimit = nil, nil
			f.az.SingleLimit, f.az.DailyLimit = nil, f64(1e12)
		},
		"credential expired since": func(f *fixture) { f.dc.ExpiresAt = "2025-01-15T10:31:30Z" },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture()
			change(f)
			s, acc := f.build(t)
			wantLink(t, binding.VerifyChain(s, acc, prefix), binding.LinkInvalid)
		})
	}
}

// TestVerifyChainBreakOneLink builds a valid chain, then breaks exactly one thing per
// subtest: a signature, a signed field after signing, an id-binding or the scope, with the
// rest of the chain validly signed.
func TestVerifyChainBreakOneLink(t *testing.T) {
	root2, device2, other := testkit.SeedKey(root2Seed), testkit.SeedKey(device2Seed), testkit.SeedKey(lead0Seed)
	for _, tc := range []struct {
		name   string
		before func(f *fixture)                                                   // signed
		after  func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) // not signed
		link   binding.Link
	}{
		// 1: the node's description, message 6.
		{name: "node signature one bit off", link: binding.LinkSession, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.NodeSignature = tamper(t, s.NodeSignature)
		}},
		{name: "node signature missing", link: binding.LinkSession, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.NodeSignature = ""
		}},
		{name: "description changed after signing", link: binding.LinkSession, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.Request.Nonce = "n-7f3b"
		}},
		{name: "description signed by another key", link: binding.LinkSession, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.NodeSignature = sign(t, other, s.Request)
		}},
		{name: "node id-binding: DID of another key", link: binding.LinkSession, before: func(f *fixture) { f.req.NodeDID = otherNodeDID }},
		{name: "node id-binding: operator-tagged DID", link: binding.LinkSession, before: func(f *fixture) { f.req.NodeDID = "did:svrp:o:34910d78" }},
		{name: "stored key is not the session's", link: binding.LinkSession, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.Request.NodePublicKey = pub(other).Base58()
		}},
		{name: "description without a nonce, signed", link: binding.LinkSession, before: func(f *fixture) { f.req.Nonce = "" }},
		{name: "description of another session", link: binding.LinkSession, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.ID = "bs-0002"
		}},

		// 2: the device credential, message 2.
		{name: "credential signature one bit off", link: binding.LinkDeviceCredential, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			dc := *s.DeviceCredential
			dc.Signature = tamper(t, dc.Signature)
			s.DeviceCredential = &dc
		}},
		{name: "credential changed after signing", link: binding.LinkDeviceCredential, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			dc := *s.DeviceCredential
			dc.DeviceID = "laptop-2"
			s.DeviceCredential = &dc
		}},
		{name: "credential signed by another root", link: binding.LinkDeviceCredential, before: func(f *fixture) { f.root = root2 }},
		{name: "operator id-binding: root key of another operator", link: binding.LinkDeviceCredential, before: func(f *fixture) {
			f.dc.OperatorRootPublicKey = pub(root2).Base58()
			f.root = root2
		}},
		{name: "operator id-binding: DID of another operator", link: binding.LinkDeviceCredential, before: func(f *fixture) {
			f.dc.OperatorDID, f.az.OperatorDID, f.acc.OperatorDID, f.resolver = operator2DID, operator2DID, operator2DID, operator2DID
		}},
		{name: "operator DID not operator-tagged", link: binding.LinkDeviceCredential, before: func(f *fixture) {
			d := "did:svrp:n:0efdccc6"
			f.dc.OperatorDID, f.az.OperatorDID, f.acc.OperatorDID, f.resolver = d, d, d, d
		}},
		{name: "credential without nodes.bind", link: binding.LinkDeviceCredential, before: func(f *fixture) { f.dc.Permissions = []string{"nodes.read"} }},
		{name: "credential of an operator that did not resolve", link: binding.LinkDeviceCredential, before: func(f *fixture) { f.resolver = operator2DID }},
		{name: "no credential", link: binding.LinkDeviceCredential, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.DeviceCredential = nil
		}},

		// 3: the authorization, message 7, and the scope.
		{name: "authorization signature one bit off", link: binding.LinkAuthorization, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			az := *s.Authorization
			az.Signature = tamper(t, az.Signature)
			s.Authorization = &az
		}},
		{name: "authorization signed by another device", link: binding.LinkAuthorization, before: func(f *fixture) { f.device = device2 }},
		{name: "authorization changed after signing", link: binding.LinkAuthorization, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			az := *s.Authorization
			az.RevocationID = "authz-rev-0002"
			s.Authorization = &az
		}},
		{name: "credential names an unusable device key", link: binding.LinkAuthorization, before: func(f *fixture) { f.dc.DevicePublicKey = "nope" }},
		{name: "authorization for another node", link: binding.LinkAuthorization, before: func(f *fixture) { f.az.NodeDID = otherNodeDID }},
		{name: "authorization for another session", link: binding.LinkAuthorization, before: func(f *fixture) { f.az.BindingSessionID = "bs-0002" }},
		{name: "authorization by another operator", link: binding.LinkAuthorization, before: func(f *fixture) {
			f.az.OperatorDID, f.acc.OperatorDID = operator2DID, operator2DID
		}},
		{name: "scope: task type not requested", link: binding.LinkAuthorization, before: func(f *fixture) { f.az.TaskTypes = []string{"inference", "storage"} }},
		{name: "scope: single limit above request", link: binding.LinkAuthorization, before: func(f *fixture) { f.az.SingleLimit = f64(10.5) }},
		{name: "scope: request lowered below grant", link: binding.LinkAuthorization, before: func(f *fixture) { f.req.RequestedDailyLimit = f64(1) }},
		{name: "scope: null grant against a cap", link: binding.LinkAuthorization, before: func(f *fixture) { f.az.DailyLimit = nil }},
		{name: "authorization without revocation_id, signed", link: binding.LinkAuthorization, before: func(f *fixture) { f.az.RevocationID = "" }},
		{name: "no authorization", link: binding.LinkAuthorization, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			s.Authorization = nil
		}},

		// 4: the acceptance, message 8.
		{name: "acceptance signature one bit off", link: binding.LinkAcceptance, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			a.Signature = tamper(t, a.Signature)
		}},
		{name: "acceptance changed after signing", link: binding.LinkAcceptance, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			a.IssuedAt = "2025-01-15T10:33:00Z"
		}},
		{name: "acceptance signed by another key", link: binding.LinkAcceptance, after: func(f *fixture, s *binding.BindingSession, a *binding.Acceptance) {
			a.Signature = sign(t, other, a.Acceptance)
		}},
		{name: "acceptance with a fractional issued_at, signed", link: binding.LinkAcceptance, before: func(f *fixture) {
			f.acc.IssuedAt = "2025-01-15T10:32:00.5Z"
		}},
		{name: "acceptance refuses", link: binding.LinkAcceptance, before: func(f *fixture) { f.acc.Accepted = false }},
		{name: "acceptance of another authorization", link: binding.LinkAcceptance, before: func(f *fixture) {
			az := f.az
			az.RevocationID = "authz-rev-0002"
			f.acc.AuthorizationDigest, _ = az.Digest(prefix)
		}},
		{name: "acceptance by another node", link: binding.LinkAcceptance, before: func(f *fixture) { f.acc.NodeDID = otherNodeDID }},
		{name: "acceptance for another operator", link: binding.LinkAcceptance, before: func(f *fixture) { f.acc.OperatorDID = operator2DID }},
		{name: "acceptance for another session", link: binding.LinkAcceptance, before: func(f *fixture) { f.acc.BindingSessionID = "bs-0002" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			if tc.before != nil {
				tc.before(f)
			}
			s, acc := f.build(t)
			if tc.after != nil {
				tc.after(f, &s, &acc)
			}
			wantLink(t, binding.VerifyChain(s, acc, prefix), tc.link)
		})
	}

	t.Run("another prefix breaks the first link", func(t *testing.T) {
		s, acc := newFixture().build(t)
		wantLink(t, binding.VerifyChain(s, acc, "libertynet"), binding.LinkSession)
	})
}

// drawChain draws a valid chain: task types, limits within the request, DID spellings and
// key encodings all vary.
func drawChain(rt *rapid.T) *fixture {
	f := newFixture()
	pool := []string{"inference", "embedding", "storage", "proof", "übersetzen"}
	f.req.RequestedTaskTypes = rapid.SliceOfDistinct(rapid.SampledFrom(pool), rapid.ID[string]).Draw(rt, "requested")
	if len(f.req.RequestedTaskTypes) > 0 {
		f.az.TaskTypes = rapid.SliceOfDistinct(rapid.SampledFrom(f.req.RequestedTaskTypes), rapid.ID[string]).Draw(rt, "granted")
	} else {
		f.az.TaskTypes = nil
	}
	limit := func(name string) (req, grant *float64) {
		if rapid.Bool().Draw(rt, name+" capped") {
			r := float64(rapid.IntRange(0, 1_000_000).Draw(rt, name+" requested")) / 4
			return &r, f64(r * rapid.Float64Range(0, 1).Draw(rt, name+" share"))
		}
		if rapid.Bool().Draw(rt, name+" granted") {
			return nil, f64(float64(rapid.IntRange(0, 1<<40).Draw(rt, name)))
		}
		return nil, nil
	}
	f.req.RequestedSingleLimit, f.az.SingleLimit = limit("single")
	f.req.RequestedDailyLimit, f.az.DailyLimit = limit("daily")
	forms := []didkey.Form{didkey.FormShort, didkey.FormFallback, didkey.FormFull}
	for _, d := range []*string{&f.req.NodeDID, &f.az.NodeDID, &f.acc.NodeDID} {
		spelled, _ := didkey.NodeDID(pub(f.node), rapid.SampledFrom(forms).Draw(rt, "form"))
		*d = spelled.String()
	}
	if rapid.Bool().Draw(rt, "hex keys") {
		f.dc.OperatorRootPublicKey, f.dc.DevicePublicKey = pub(f.root).Hex(), pub(f.device).Hex()
	}
	return f
}

// TestVerifyChainProperty: every drawn valid chain verifies, and altering any one of its four
// signatures, its two id-bindings or its scope makes it fail at the link that holds it.
func TestVerifyChainProperty(t *testing.T) {
	root2, other := testkit.SeedKey(root2Seed), testkit.SeedKey(lead0Seed)
	otherDID, _ := didkey.NodeDID(pub(other), didkey.FormFallback)
	type change struct {
		name   string
		link   binding.Link
		before func(f *fixture)
		after  func(rt *rapid.T, s *binding.BindingSession, a *binding.Acceptance)
	}
	changes := []change{
		{name: "node signature", link: binding.LinkSession, after: func(rt *rapid.T, s *binding.BindingSession, a *binding.Acceptance) {
			s.NodeSignature = tamper(rt, s.NodeSignature)
		}},
		{name: "credential signature", link: binding.LinkDeviceCredential, after: func(rt *rapid.T, s *binding.BindingSession, a *binding.Acceptance) {
			dc := *s.DeviceCredential
			dc.Signature = tamper(rt, dc.Signature)
			s.DeviceCredential = &dc
		}},
		{name: "authorization signature", link: binding.LinkAuthorization, after: func(rt *rapid.T, s *binding.BindingSession, a *binding.Acceptance) {
			az := *s.Authorization
			az.Signature = tamper(rt, az.Signature)
			s.Authorization = &az
		}},
		{name: "acceptance signature", link: binding.LinkAcceptance, after: func(rt *rapid.T, s *binding.BindingSession, a *binding.Acceptance) {
			a.Signature = tamper(rt, a.Signature)
		}},
		{name: "node id-binding", link: binding.LinkSession, before: func(f *fixture) { f.req.NodeDID = otherDID.String() }},
		{name: "operator id-binding", link: binding.LinkDeviceCredential, before: func(f *fixture) {
			f.dc.OperatorRootPublicKey, f.root = pub(root2).Base58(), root2
		}},
		{name: "scope: task type", link: binding.LinkAuthorization, before: func(f *fixture) {
			f.az.TaskTypes = append(f.az.TaskTypes, "never-requested")
		}},
		{name: "scope: single limit", link: binding.LinkAuthorization, before: func(f *fixture) {
			f.req.RequestedSingleLimit, f.az.SingleLimit = f64(1), f64(1.5)
		}},
		{name: "scope: daily limit withheld", link: binding.LinkAuthorization, before: func(f *fixture) {
			f.req.RequestedDailyLimit, f.az.DailyLimit = f64(1), nil
		}},
	}
	rapid.Check(t, func(rt *rapid.T) {
		f := drawChain(rt)
		s, acc := f.build(rt)
		if err := binding.VerifyChain(s, acc, prefix); err != nil {
			rt.Fatalf("valid chain refused: %v", err)
		}
		c := rapid.SampledFrom(changes).Draw(rt, "change")
		if c.before != nil {
			c.before(f)
			s, acc = f.build(rt)
		}
		if c.after != nil {
			c.after(rt, &s, &acc)
		}
		wantLink(rt, binding.VerifyChain(s, acc, prefix), c.link)
	})
}

// BenchmarkVerifyChain and BenchmarkEd25519FourVerifies measure the chain against its floor:
// four bare Ed25519 verifications over messages of the same sizes.
func BenchmarkVerifyChain(b *testing.B) {
	s, acc := newFixture().build(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := binding.VerifyChain(s, acc, prefix); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519FourVerifies(b *testing.B) {
	f := newFixture()
	s, acc := f.build(b)
	type item struct {
		key ed25519.PublicKey
		msg []byte
		sig [64]byte
	}
	var items []item
	add := func(key ed25519.PrivateKey, m canonical.Message, sig string) {
		msg, err := m.Bytes(prefix)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := canonical.DecodeSignature(sig)
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, item{key.Public().(ed25519.PublicKey), msg, raw})
	}
	add(f.node, s.Request, s.NodeSignature)
	add(f.root, s.DeviceCredential.DeviceCredential, s.DeviceCredential.Signature)
	add(f.device, s.Authorization.Authorization, s.Authorization.Signature)
	add(f.node, acc.Acceptance, acc.Signature)
	b.ReportAllocs()
	for b.Loop() {
		for _, it := range items {
			if !ed25519.Verify(it.key, it.msg, it.sig[:]) {
				b.Fatal("does not verify")
			}
		}
	}
}
