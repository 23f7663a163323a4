package binding_test

import (
	"math"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// tInitiate is when the fixture's initiate arrives: a minute into its window.
var tInitiate = t0.Add(time.Minute)

// setWindow gives the request a created_at and a lifetime.
func setWindow(f *fixture, created time.Time, ttl time.Duration) {
	f.req.CreatedAt = canonical.FormatTime(created)
	f.req.ExpiresAt = canonical.FormatTime(created.Add(ttl))
}

func TestValidateInitiateOrder(t *testing.T) {
	other := testkit.SeedKey(lead0Seed)
	for _, tc := range []struct {
		name   string
		before func(f *fixture)                             // changes the fields that are then signed
		after  func(f *fixture, r *binding.InitiateRequest) // changes the signed request
		now    time.Time                                    // zero means tInitiate
		want   proto.Code
	}{
		{name: "valid", want: ""},
		{name: "key sent as hex, signed as base58", after: func(f *fixture, r *binding.InitiateRequest) {
			r.NodePublicKey = pub(f.node).Hex()
		}},
		{name: "full DID", before: func(f *fixture) { f.req.NodeDID = "did:svrp:" + pub(f.node).Hex() }},
		{name: "fallback DID", before: func(f *fixture) {
			d, _ := didkey.NodeDID(pub(f.node), didkey.FormFallback)
			f.req.NodeDID = d.String()
		}},
		{name: "optional fields absent", before: func(f *fixture) {
			f.req.DeviceSummary, f.req.OS, f.req.Region = "", "", ""
			f.req.RequestedTaskTypes, f.req.RequestedSingleLimit, f.req.RequestedDailyLimit = nil, nil, nil
		}},
		{name: "limits at their bounds", before: func(f *fixture) {
			f.req.RequestedSingleLimit, f.req.RequestedDailyLimit = f64(canonical.MaxLimit), f64(math.Copysign(0, -1))
		}},
		{name: "every field at its longest", before: func(f *fixture) {
			f.req.BindingSessionID = strings.Repeat("b", 128)
			f.req.Nonce = strings.Repeat("n", 256)
			f.req.DeviceSummary = strings.Repeat("ü", 128)
			f.req.RequestedTaskTypes = nil
			for i := range 64 {
				f.req.RequestedTaskTypes = append(f.req.RequestedTaskTypes, strings.Repeat(string(rune('A'+i%26)), 62)+string(rune('a'+i/26))+"x")
			}
		}},
		{name: "U+2028 is not a control character", before: func(f *fixture) { f.req.OS = "Linux \u2028 x" }},
		{name: "TTL exactly 600 s", before: func(f *fixture) { setWindow(f, t0, 600*time.Second) }},
		{name: "TTL 1 s, expiring a second from now", now: t0.Add(-time.Second + 999*time.Millisecond),
			before: func(f *fixture) { setWindow(f, t0, time.Second) }},
		{name: "created exactly 300 s ahead", before: func(f *fixture) { setWindow(f, tInitiate.Add(300*time.Second), 600*time.Second) }},

		// Step 1: well-formed.
		{name: "id empty", before: func(f *fixture) { f.req.BindingSessionID = "" }, want: proto.BadRequest},
		{name: "id 129 chars", before: func(f *fixture) { f.req.BindingSessionID = strings.Repeat("b", 129) }, want: proto.BadRequest},
		{name: "id with slash", before: func(f *fixture) { f.req.BindingSessionID = "bs/1" }, want: proto.BadRequest},
		{name: "id non-ASCII", before: func(f *fixture) { f.req.BindingSessionID = "bs-é" }, want: proto.BadRequest},
		{name: "node_did with LF", before: func(f *fixture) { f.req.NodeDID += "\n" }, want: proto.BadRequest},
		{name: "node_public_key with NUL", after: func(f *fixture, r *binding.InitiateRequest) { r.NodePublicKey += "\x00" }, want: proto.BadRequest},
		{name: "device_summary 257 bytes", before: func(f *fixture) { f.req.DeviceSummary = strings.Repeat("d", 257) }, want: proto.BadRequest},
		{name: "os with CR", before: func(f *fixture) { f.req.OS = "lin\rux" }, want: proto.BadRequest},
		{name: "region with DEL", before: func(f *fixture) { f.req.Region = "eu\x7f" }, want: proto.BadRequest},
		{name: "region not UTF-8", before: func(f *fixture) { f.req.Region = "eu\xff" }, want: proto.BadRequest},
		{name: "nonce empty", before: func(f *fixture) { f.req.Nonce = "" }, want: proto.BadRequest},
		{name: "nonce 257 bytes", before: func(f *fixture) { f.req.Nonce = strings.Repeat("n", 257) }, want: proto.BadRequest},
		{name: "65 task types", before: func(f *fixture) {
			f.req.RequestedTaskTypes = strings.Split(strings.Repeat("t,", 64)+"t", ",")
		}, want: proto.BadRequest},
		{name: "task type 65 bytes", before: func(f *fixture) { f.req.RequestedTaskTypes = []string{strings.Repeat("t", 65)} }, want: proto.BadRequest},
		{name: "task type with comma", before: func(f *fixture) { f.req.RequestedTaskTypes = []string{"a,b"} }, want: proto.BadRequest},
		{name: "empty task type", before: func(f *fixture) { f.req.RequestedTaskTypes = []string{"inference", ""} }, want: proto.BadRequest},
		{name: "single limit NaN", before: func(f *fixture) { f.req.RequestedSingleLimit = f64(math.NaN()) }, want: proto.BadRequest},
		{name: "single limit +Inf", before: func(f *fixture) { f.req.RequestedSingleLimit = f64(math.Inf(1)) }, want: proto.BadRequest},
		{name: "single limit -1", before: func(f *fixture) { f.req.RequestedSingleLimit = f64(-1) }, want: proto.BadRequest},
		{name: "daily limit 2^53", before: func(f *fixture) { f.req.RequestedDailyLimit = f64(1 << 53) }, want: proto.BadRequest},
		{name: "daily limit -Inf", before: func(f *fixture) { f.req.RequestedDailyLimit = f64(math.Inf(-1)) }, want: proto.BadRequest},
		{name: "created_at with fraction", before: func(f *fixture) { f.req.CreatedAt = "2025-01-15T10:30:00.000Z" }, want: proto.BadRequest},
		{name: "expires_at with offset", before: func(f *fixture) { f.req.ExpiresAt = "2025-01-15T10:40:00+00:00" }, want: proto.BadRequest},
		{name: "expires_at on 30 February", before: func(f *fixture) { f.req.ExpiresAt = "2025-02-30T10:40:00Z" }, want: proto.BadRequest},

		// Step 2: the DID.
		{name: "another DID method", before: func(f *fixture) { f.req.NodeDID = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK" }, want: proto.IDBindingRequired},
		{name: "empty DID", before: func(f *fixture) { f.req.NodeDID = "" }, want: proto.IDBindingRequired},
		{name: "DID of another key", before: func(f *fixture) { f.req.NodeDID = otherNodeDID }, want: proto.IDBindingFailed},
		{name: "operator-tagged DID", before: func(f *fixture) { f.req.NodeDID = "did:svrp:o:34910d78" }, want: proto.IDBindingFailed},
		{name: "uppercase hex DID", before: func(f *fixture) { f.req.NodeDID = "did:svrp:n:34910D78" }, want: proto.IDBindingFailed},
		{name: "key not 32 bytes", after: func(f *fixture, r *binding.InitiateRequest) { r.NodePublicKey = "abc" }, want: proto.IDBindingFailed},

		// Step 3: the window.
		{name: "TTL 601 s", before: func(f *fixture) { setWindow(f, t0, 601*time.Second) }, want: proto.TTLTooLong},
		{name: "TTL 0", before: func(f *fixture) { setWindow(f, tInitiate, 0) }, want: proto.TTLTooLong},
		{name: "TTL negative", before: func(f *fixture) { setWindow(f, tInitiate, -time.Second) }, want: proto.TTLTooLong},

		// Step 4: not already past.
		{name: "expires at now", before: func(f *fixture) { setWindow(f, t0, 60*time.Second) }, want: proto.AlreadyExpired},
		{name: "expired an hour ago", before: func(f *fixture) { setWindow(f, t0.Add(-2*time.Hour), time.Minute) }, want: proto.AlreadyExpired},

		// Step 5: not post-dated.
		{name: "created 301 s ahead", before: func(f *fixture) { setWindow(f, tInitiate.Add(301*time.Second), time.Minute) }, want: proto.BadRequest},

		// Step 6: the signature.
		{name: "no signature", after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = "" }, want: proto.BadSignature},
		{name: "signature not base58", after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = "0OIl" }, want: proto.BadSignature},
		{name: "signature one bit off", after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = tamper(t, r.NodeSignature) }, want: proto.BadSignature},
		{name: "field changed after signing", after: func(f *fixture, r *binding.InitiateRequest) { r.Nonce = "n-7f3b" }, want: proto.BadSignature},
		{name: "node signed its key in hex", after: func(f *fixture, r *binding.InitiateRequest) {
			m := r.BindingSession
			m.NodePublicKey = pub(f.node).Hex()
			r.NodePublicKey = m.NodePublicKey
			r.NodeSignature = sign(t, f.node, m)
		}, want: proto.BadSignature},
		{name: "signed by another key", after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = sign(t, other, r.BindingSession) }, want: proto.BadSignature},
		{name: "signed under another prefix", after: func(f *fixture, r *binding.InitiateRequest) {
			sig, _ := canonical.Sign(f.node, "libertynet", r.BindingSession)
			r.NodeSignature = sig
		}, want: proto.BadSignature},

		// Two faults: the earlier check decides.
		{name: "shape before DID", before: func(f *fixture) { f.req.Nonce, f.req.NodeDID = "", "did:key:x" }, want: proto.BadRequest},
		{name: "timestamp before signature", before: func(f *fixture) { f.req.CreatedAt = "2025-01-15T10:30:00z" },
			after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = "" }, want: proto.BadRequest},
		{name: "DID before TTL", before: func(f *fixture) { f.req.NodeDID = "did:web:example.com"; setWindow(f, t0, time.Hour) }, want: proto.IDBindingRequired},
		{name: "DID before already expired", before: func(f *fixture) { f.req.NodeDID = "did:svrp:n:00000000"; setWindow(f, t0, time.Second) }, want: proto.IDBindingFailed},
		{name: "TTL before already expired", before: func(f *fixture) { setWindow(f, t0.Add(-time.Hour), time.Hour+time.Second) }, want: proto.TTLTooLong},
		{name: "TTL before post-dated", before: func(f *fixture) { setWindow(f, tInitiate.Add(time.Hour), 601*time.Second) }, want: proto.TTLTooLong},
		{name: "already expired before signature", before: func(f *fixture) { setWindow(f, t0, time.Second) },
			after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = "" }, want: proto.AlreadyExpired},
		{name: "post-dated before signature", before: func(f *fixture) { setWindow(f, tInitiate.Add(time.Hour), time.Minute) },
			after: func(f *fixture, r *binding.InitiateRequest) { r.NodeSignature = tamper(t, r.NodeSignature) }, want: proto.BadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			if tc.before != nil {
				tc.before(f)
			}
			req := f.initiate(t)
			if tc.after != nil {
				tc.after(f, &req)
			}
			now := tc.now
			if now.IsZero() {
				now = tInitiate
			}
			key, err := binding.ValidateInitiate(req, prefix, now)
			wantCode(t, err, tc.want)
			if !hasCode(err) && err != nil {
				t.Fatalf("error without a protocol code: %v", err)
			}
			if err == nil && key != pub(f.node) {
				t.Fatalf("key %s, want the node's", key)
			}
		})
	}
}

func TestNewBindingSession(t *testing.T) {
	f := newFixture()
	req := f.initiate(t)
	req.NodePublicKey = pub(f.node).Hex()
	key, err := binding.ValidateInitiate(req, prefix, tInitiate)
	wantCode(t, err, "")
	code, token := binding.HashSecret("QMD7RJT8"), binding.HashSecret("token")
	s := binding.NewBindingSession(req, key, code, token, tInitiate.Add(700*time.Millisecond))

	want := binding.BindingSession{
		ID:            "bs-0001",
		State:         binding.Initiated,
		NodeKey:       pub(f.node),
		Request:       f.req, // with the key in base58
		NodeSignature: req.NodeSignature,
		CreatedAt:     t0,
		ExpiresAt:     tExpires,
		CodeHash:      code,
		TokenHash:     token,
		UpdatedAt:     tInitiate,
	}
	if diff := gocmp.Diff(want, s); diff != "" {
		t.Fatalf("NewBindingSession (-want, +got):\n%s", diff)
	}
	req.RequestedTaskTypes[0] = "changed"
	*req.RequestedSingleLimit = 99
	if s.Request.RequestedTaskTypes[0] != "inference" || *s.Request.RequestedSingleLimit != 10 {
		t.Fatal("the session shares memory with the request")
	}
	if err := binding.VerifyChain(s, binding.Acceptance{}, prefix); errorCode(err) != proto.BadSignature {
		t.Fatalf("a new session has no credential, yet VerifyChain said %v", err)
	} else if ce := err.(*binding.ChainError); ce.Link != binding.LinkDeviceCredential {
		t.Fatalf("a new session's own link should verify; failed at %v", ce)
	}
}
