package binding_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

func TestVerifyAuthorizationOrder(t *testing.T) {
	root2, device2 := testkit.SeedKey(root2Seed), testkit.SeedKey(device2Seed)
	type request struct {
		s  *binding.BindingSession
		dc *authn.DeviceCredential
		az *binding.AuthorizationCredential
	}
	at := func(d time.Duration) string { return canonical.FormatTime(tAuthz.Add(d)) }
	for _, tc := range []struct {
		name   string
		before func(f *fixture)            // changes fields that are then signed
		after  func(f *fixture, r request) // changes the signed request
		now    time.Time                   // zero means tAuthz
		revoke string                      // "dc", "az", "both" or "other": what the revocation list holds
		pin    string                      // "own" or "other": the root key the credential's DID body is pinned to
		want   proto.Code
	}{
		{name: "valid"},
		{name: "node DID in full form", before: func(f *fixture) { f.az.NodeDID = "did:svrp:" + pub(f.node).Hex() }},
		{name: "credential keys in hex", before: func(f *fixture) {
			f.dc.OperatorRootPublicKey, f.dc.DevicePublicKey = pub(f.root).Hex(), pub(f.device).Hex()
		}},
		{name: "issued 5 s ahead", before: func(f *fixture) { f.az.IssuedAt = at(5 * time.Second) }},
		{name: "expired 5 s ago", before: func(f *fixture) { f.az.IssuedAt, f.az.ExpiresAt = at(-time.Minute), at(-5*time.Second) }},
		{name: "expired 5.9 s ago, as the clock reads seconds", before: func(f *fixture) {
			f.az.IssuedAt, f.az.ExpiresAt = at(-time.Minute), at(-5*time.Second)
		}, now: tAuthz.Add(900 * time.Millisecond)},
		{name: "no cap requested, any granted", before: func(f *fixture) {
			f.req.RequestedSingleLimit, f.req.RequestedDailyLimit = nil, nil
			f.az.SingleLimit, f.az.DailyLimit = f64(1e15), nil
		}},

		// Shape first, whatever else is wrong.
		{name: "revocation_id empty", before: func(f *fixture) { f.az.RevocationID = "" }, want: proto.BadRequest},
		{name: "revocation_id 257 bytes", before: func(f *fixture) { f.az.RevocationID = strings.Repeat("r", 257) }, want: proto.BadRequest},
		{name: "issued_at malformed", before: func(f *fixture) { f.az.IssuedAt = "2025-01-15 10:31:00Z" }, want: proto.BadRequest},
		{name: "task type with comma", after: func(f *fixture, r request) { r.az.TaskTypes = []string{"a,b"} }, want: proto.BadRequest},
		{name: "single limit NaN", after: func(f *fixture, r request) { r.az.SingleLimit = f64(math.NaN()) }, want: proto.BadRequest},
		{name: "shape before state", before: func(f *fixture) { f.az.ExpiresAt = "soon" },
			after: func(f *fixture, r request) { r.s.State = binding.Cancelled }, want: proto.BadRequest},

		// The session's state, expiry applied.
		{name: "session INITIATED", after: func(f *fixture, r request) { r.s.State = binding.Initiated }, want: proto.BadState},
		{name: "session already authorized", after: func(f *fixture, r request) { r.s.State = binding.PendingNodeAcceptance }, want: proto.BadState},
		{name: "session ACTIVE", after: func(f *fixture, r request) { r.s.State = binding.Active }, want: proto.BadState},
		{name: "session expired", now: tExpires, want: proto.BadState},
		{name: "state before credential", after: func(f *fixture, r request) {
			r.s.State = binding.Cancelled
			r.dc.Signature = tamper(t, r.dc.Signature)
		}, want: proto.BadState},

		// The credential is the resolver's.
		{name: "credential of another operator", before: func(f *fixture) { f.resolver = operator2DID }, want: proto.PermissionDenied},
		{name: "resolver before credential checks", before: func(f *fixture) {
			f.resolver = operator2DID
			f.dc.OperatorRootPublicKey = pub(root2).Base58()
		}, want: proto.PermissionDenied},

		// The credential: DC_ID_BINDING → DC_BAD_SIGNATURE → DC_EXPIRED.
		{name: "root key does not derive operator_did", before: func(f *fixture) { f.dc.OperatorRootPublicKey = pub(root2).Base58() }, want: proto.DCIDBinding},
		{name: "credential signature one bit off", after: func(f *fixture, r request) { r.dc.Signature = tamper(t, r.dc.Signature) }, want: proto.DCBadSignature},
		{name: "credential expired", before: func(f *fixture) { f.dc.ExpiresAt = "2025-01-15T10:00:00Z" }, want: proto.DCExpired},
		{name: "id-binding before credential signature", before: func(f *fixture) { f.dc.OperatorRootPublicKey = pub(root2).Base58() },
			after: func(f *fixture, r request) { r.dc.Signature = tamper(t, r.dc.Signature) }, want: proto.DCIDBinding},
		{name: "credential signature before expiry", before: func(f *fixture) { f.dc.ExpiresAt = "2025-01-15T10:00:00Z" },
			after: func(f *fixture, r request) { r.dc.Signature = tamper(t, r.dc.Signature) }, want: proto.DCBadSignature},

		// The pin (docs/protocol.md §10.8): after the root signature, before the window.
		{name: "DID pinned to its own root key", pin: "own"},
		{name: "DID pinned to another root key", pin: "other", want: proto.DIDCollision},
		{name: "resolver before pin", before: func(f *fixture) { f.resolver = operator2DID }, pin: "other", want: proto.PermissionDenied},
		{name: "id-binding before pin", before: func(f *fixture) { f.dc.OperatorRootPublicKey = pub(root2).Base58() }, pin: "other", want: proto.DCIDBinding},
		{name: "credential signature before pin", after: func(f *fixture, r request) { r.dc.Signature = tamper(t, r.dc.Signature) }, pin: "other", want: proto.DCBadSignature},
		{name: "pin before credential expiry", before: func(f *fixture) { f.dc.ExpiresAt = "2025-01-15T10:00:00Z" }, pin: "other", want: proto.DIDCollision},
		{name: "pin before revocation", pin: "other", revoke: "both", want: proto.DIDCollision},

		// nodes.bind.
		{name: "credential without nodes.bind", before: func(f *fixture) { f.dc.Permissions = []string{"nodes.read"} }, want: proto.PermissionDenied},
		{name: "credential with no permissions", before: func(f *fixture) { f.dc.Permissions = nil }, want: proto.PermissionDenied},
		{name: "credential expiry before permission", before: func(f *fixture) {
			f.dc.ExpiresAt = "2025-01-15T10:00:00Z"
			f.dc.Permissions = nil
		}, want: proto.DCExpired},

		// The authorization names this session, its node and the credential's operator.
		{name: "authorization for another session", before: func(f *fixture) { f.az.BindingSessionID = "bs-0002" }, want: proto.BadRequest},
		{name: "authorization for another node", before: func(f *fixture) { f.az.NodeDID = otherNodeDID }, want: proto.BadRequest},
		{name: "authorization node_did operator-tagged", before: func(f *fixture) { f.az.NodeDID = "did:svrp:o:34910d78" }, want: proto.BadRequest},
		{name: "authorization node_did not a DID", before: func(f *fixture) { f.az.NodeDID = "node" }, want: proto.BadRequest},
		{name: "authorization for another operator", before: func(f *fixture) { f.az.OperatorDID = operator2DID }, want: proto.BadRequest},
		{name: "permission before field match", before: func(f *fixture) {
			f.dc.Permissions = nil
			f.az.BindingSessionID = "bs-0002"
		}, want: proto.PermissionDenied},

		// The device key's signature.
		{name: "authorization signature one bit off", after: func(f *fixture, r request) { r.az.Signature = tamper(t, r.az.Signature) }, want: proto.BadSignature},
		{name: "authorization unsigned", after: func(f *fixture, r request) { r.az.Signature = "" }, want: proto.BadSignature},
		{name: "authorization signed by another device", before: func(f *fixture) { f.device = device2 }, want: proto.BadSignature},
		{name: "device_public_key not a key", before: func(f *fixture) { f.dc.DevicePublicKey = "not-a-key" }, want: proto.DCIDBinding},
		{name: "field match before signature", before: func(f *fixture) { f.az.OperatorDID = operator2DID },
			after: func(f *fixture, r request) { r.az.Signature = "" }, want: proto.BadRequest},

		// The authorization's own window.
		{name: "issued 6 s ahead", before: func(f *fixture) { f.az.IssuedAt = at(6 * time.Second) }, want: proto.AuthzExpired},
		{name: "expired 6 s ago", before: func(f *fixture) { f.az.IssuedAt, f.az.ExpiresAt = at(-time.Minute), at(-6*time.Second) }, want: proto.AuthzExpired},
		{name: "signature before window", before: func(f *fixture) { f.az.IssuedAt, f.az.ExpiresAt = at(-time.Minute), at(-time.Minute) },
			after: func(f *fixture, r request) { r.az.Signature = tamper(t, r.az.Signature) }, want: proto.BadSignature},

		// Scope.
		{name: "task type not requested", before: func(f *fixture) { f.az.TaskTypes = []string{"inference", "storage"} }, want: proto.ScopeExceeded},
		{name: "single limit above request", before: func(f *fixture) { f.az.SingleLimit = f64(10.5) }, want: proto.ScopeExceeded},
		{name: "single limit null against a cap", before: func(f *fixture) { f.az.SingleLimit = nil }, want: proto.ScopeExceeded},
		{name: "daily limit above request", before: func(f *fixture) { f.az.DailyLimit = f64(2.6) }, want: proto.ScopeExceeded},
		{name: "window before scope", before: func(f *fixture) {
			f.az.IssuedAt, f.az.ExpiresAt = at(-time.Hour), at(-time.Minute)
			f.az.TaskTypes = []string{"storage"}
		}, want: proto.AuthzExpired},

		// Revocation (docs/protocol.md §10.5): after the chain's signatures and the window, before
		// scope.
		{name: "another operator's pair revoked", revoke: "other"},
		{name: "device credential revoked", revoke: "dc", want: proto.DCRevoked},
		{name: "authorization revoked", revoke: "az", want: proto.AuthzRevoked},
		{name: "device credential before authorization", revoke: "both", want: proto.DCRevoked},
		{name: "credential expiry before revocation", before: func(f *fixture) { f.dc.ExpiresAt = "2025-01-15T10:00:00Z" }, revoke: "dc", want: proto.DCExpired},
		{name: "credential signature before revocation", after: func(f *fixture, r request) { r.dc.Signature = tamper(t, r.dc.Signature) }, revoke: "dc", want: proto.DCBadSignature},
		{name: "permission before revocation", before: func(f *fixture) { f.dc.Permissions = nil }, revoke: "both", want: proto.PermissionDenied},
		{name: "authorization signature before revocation", after: func(f *fixture, r request) { r.az.Signature = tamper(t, r.az.Signature) }, revoke: "both", want: proto.BadSignature},
		{name: "window before revocation", before: func(f *fixture) { f.az.IssuedAt, f.az.ExpiresAt = at(-time.Hour), at(-time.Minute) }, revoke: "az", want: proto.AuthzExpired},
		{name: "revocation before scope", before: func(f *fixture) { f.az.TaskTypes = []string{"storage"} }, revoke: "az", want: proto.AuthzRevoked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			if tc.before != nil {
				tc.before(f)
			}
			s, dc, az := f.resolved(t), f.credential(t), f.authorization(t)
			if tc.after != nil {
				tc.after(f, request{&s, &dc, &az})
			}
			now := tc.now
			if now.IsZero() {
				now = tAuthz
			}
			list := authn.RevocationSet{}
			switch tc.revoke {
			case "dc", "both":
				list[authn.RevocationKey{OperatorDID: dc.OperatorDID, RevocationID: dc.RevocationID}] = true
			case "other":
				list[authn.RevocationKey{OperatorDID: operator2DID, RevocationID: dc.RevocationID}] = true
				list[authn.RevocationKey{OperatorDID: operator2DID, RevocationID: az.RevocationID}] = true
			}
			if tc.revoke == "az" || tc.revoke == "both" {
				list[authn.RevocationKey{OperatorDID: az.OperatorDID, RevocationID: az.RevocationID}] = true
			}
			pins := authn.PinSet{}
			if did, err := didkey.Parse(dc.OperatorDID); err == nil {
				switch tc.pin {
				case "own":
					pins[did.Body()] = pub(f.root)
				case "other":
					pins[did.Body()] = pub(root2)
				}
			}
			err := binding.VerifyAuthorization(s, dc, az, prefix, now, pins, list)
			if err != nil && (!hasCode(err) || errorCode(err) == proto.Internal) {
				t.Fatalf("error without a protocol code of its own: %v", err)
			}
			wantCode(t, err, tc.want)
		})
	}
}

func TestCheckScope(t *testing.T) {
	req := func(tasks []string, single, daily *float64) canonical.BindingSession {
		return canonical.BindingSession{RequestedTaskTypes: tasks, RequestedSingleLimit: single, RequestedDailyLimit: daily}
	}
	grant := func(tasks []string, single, daily *float64) canonical.Authorization {
		return canonical.Authorization{TaskTypes: tasks, SingleLimit: single, DailyLimit: daily}
	}
	both := []string{"embedding", "inference"}
	negZero := math.Copysign(0, -1)
	for _, tc := range []struct {
		name    string
		req     canonical.BindingSession
		granted canonical.Authorization
		ok      bool
	}{
		{"equal", req(both, f64(10), f64(2.5)), grant(both, f64(10), f64(2.5)), true},
		{"subset and lower", req(both, f64(10), f64(2.5)), grant([]string{"inference"}, f64(5), f64(0)), true},
		{"no task types granted", req(both, nil, nil), grant(nil, nil, nil), true},
		{"a task type granted twice", req(both, nil, nil), grant([]string{"inference", "inference"}, nil, nil), true},
		{"task type not requested", req(both, nil, nil), grant([]string{"storage"}, nil, nil), false},
		{"task type with other case", req(both, nil, nil), grant([]string{"Inference"}, nil, nil), false},
		{"any task type against none requested", req(nil, nil, nil), grant([]string{"inference"}, nil, nil), false},

		{"single: cap, equal", req(nil, f64(10), nil), grant(nil, f64(10), nil), true},
		{"single: cap, above", req(nil, f64(10), nil), grant(nil, f64(10.000001), nil), false},
		{"single: cap, null granted", req(nil, f64(10), nil), grant(nil, nil, nil), false},
		{"single: cap 0, -0 granted", req(nil, f64(0), nil), grant(nil, f64(negZero), nil), true},
		{"single: cap, NaN granted", req(nil, f64(10), nil), grant(nil, f64(math.NaN()), nil), false},
		{"single: no cap, null granted", req(nil, nil, nil), grant(nil, nil, nil), true},
		{"single: no cap, huge granted", req(nil, nil, nil), grant(nil, f64(canonical.MaxLimit), nil), true},

		{"daily: cap, equal", req(nil, nil, f64(2.5)), grant(nil, nil, f64(2.5)), true},
		{"daily: cap, above", req(nil, nil, f64(2.5)), grant(nil, nil, f64(3)), false},
		{"daily: cap, null granted", req(nil, nil, f64(2.5)), grant(nil, nil, nil), false},
		{"daily: no cap, value granted", req(nil, nil, nil), grant(nil, nil, f64(7)), true},
		{"single fine, daily above", req(nil, f64(10), f64(1)), grant(nil, f64(1), f64(2)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := binding.CheckScope(tc.req, tc.granted)
			if tc.ok {
				wantCode(t, err, "")
			} else {
				wantCode(t, err, proto.ScopeExceeded)
			}
		})
	}
}

func TestCheckAuthorizationShape(t *testing.T) {
	f := newFixture()
	if err := binding.CheckAuthorizationShape(f.authorization(t)); err != nil {
		t.Fatalf("valid authorization: %v", err)
	}
	for name, change := range map[string]func(a *binding.AuthorizationCredential){
		"session id empty":     func(a *binding.AuthorizationCredential) { a.BindingSessionID = "" },
		"operator_did with LF": func(a *binding.AuthorizationCredential) { a.OperatorDID += "\n" },
		"65 task types":        func(a *binding.AuthorizationCredential) { a.TaskTypes = make([]string, 65) },
		"expires_at lowercase": func(a *binding.AuthorizationCredential) { a.ExpiresAt = strings.ToLower(a.ExpiresAt) },
		"daily limit negative": func(a *binding.AuthorizationCredential) { a.DailyLimit = f64(-0.5) },
	} {
		az := f.authorization(t)
		change(&az)
		if err := binding.CheckAuthorizationShape(az); errorCode(err) != proto.BadRequest {
			t.Errorf("%s: %v, want BAD_REQUEST", name, err)
		}
	}
}
