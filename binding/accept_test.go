package binding_test

import (
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

func TestCheckAcceptance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(s *binding.BindingSession, a *binding.Acceptance)
		accepted bool
		want     proto.Code
	}{
		{name: "accept", accepted: true},
		{name: "reject", change: func(s *binding.BindingSession, a *binding.Acceptance) { a.Accepted = false }},
		{name: "node DID in full form", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			a.NodeDID = "did:svrp:" + s.NodeKey.Hex()
		}},
		{name: "the signature is not this check's business", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			a.Signature = ""
		}},

		{name: "accepted false at accept", change: func(s *binding.BindingSession, a *binding.Acceptance) { a.Accepted = false }, accepted: true, want: proto.BadRequest},
		{name: "accepted true at reject", want: proto.BadRequest},
		{name: "another session", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.BindingSessionID = "bs-0002" }, want: proto.BadRequest},
		{name: "another node", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.NodeDID = otherNodeDID }, want: proto.BadRequest},
		{name: "operator-tagged node DID", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.NodeDID = "did:svrp:o:34910d78" }, want: proto.BadRequest},
		{name: "another operator", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.OperatorDID = operator2DID }, want: proto.BadRequest},
		{name: "resolver, not authorizer, is what counts", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			s.OperatorDID = operator2DID
		}},
		{name: "digest of nothing", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			a.AuthorizationDigest = strings.Repeat("0", 64)
		}, want: proto.BadRequest},
		{name: "digest in upper case", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			a.AuthorizationDigest = strings.ToUpper(a.AuthorizationDigest)
		}, want: proto.BadRequest},
		{name: "digest under another prefix", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			a.AuthorizationDigest, _ = s.Authorization.Digest("libertynet")
		}, want: proto.BadRequest},
		{name: "digest of another authorization", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			az := *s.Authorization
			az.RevocationID = "authz-rev-0002"
			s.Authorization = &az
		}, want: proto.BadRequest},

		{name: "issued_at malformed", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.IssuedAt = "2025-01-15T10:32:00+00:00" }, want: proto.BadRequest},
		{name: "session id with slash", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.BindingSessionID = "bs/1" }, want: proto.BadRequest},
		{name: "node_did with CR", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { a.NodeDID += "\r" }, want: proto.BadRequest},
		{name: "shape before state", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) {
			a.IssuedAt = ""
			s.Authorization = nil
		}, want: proto.BadRequest},
		{name: "session never authorized", accepted: true, change: func(s *binding.BindingSession, a *binding.Acceptance) { s.Authorization = nil }, want: proto.BadState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, acc := newFixture().build(t)
			if tc.change != nil {
				tc.change(&s, &acc)
			}
			err := binding.CheckAcceptance(s, acc, prefix, tc.accepted)
			wantCode(t, err, tc.want)
			if err != nil && strings.Contains(err.Error(), acc.AuthorizationDigest) {
				t.Errorf("error text repeats the digest: %q", err)
			}
		})
	}
}

func TestVerifyAcceptanceSignature(t *testing.T) {
	f := newFixture()
	s, acc := f.build(t)
	wantCode(t, binding.VerifyAcceptanceSignature(s, acc, prefix), "")

	broken := acc
	broken.Signature = tamper(t, acc.Signature)
	wantCode(t, binding.VerifyAcceptanceSignature(s, broken, prefix), proto.BadSignature)

	f.node = testkit.SeedKey(lead0Seed)
	_, foreign := f.build(t)
	wantCode(t, binding.VerifyAcceptanceSignature(s, foreign, prefix), proto.BadSignature)
	wantCode(t, binding.VerifyAcceptanceSignature(s, acc, "libertynet"), proto.BadSignature)
}

func TestActivate(t *testing.T) {
	f := newFixture()
	s, _ := f.build(t)
	now := tAuthz.Add(time.Minute + 400*time.Millisecond)
	b := binding.Activate(s, now)
	want := binding.Binding{
		NodeKey:      pub(f.node),
		NodeDID:      nodeDID,
		OperatorDID:  operatorDID,
		SessionID:    "bs-0001",
		TaskTypes:    []string{"inference"},
		SingleLimit:  f64(5),
		DailyLimit:   f64(2.5),
		RevocationID: "authz-rev-0001",
		ActivatedAt:  now.Truncate(time.Second),
	}
	if diff := gocmp.Diff(want, b); diff != "" {
		t.Fatalf("Activate (-want, +got):\n%s", diff)
	}
	b.TaskTypes[0] = "changed"
	*b.SingleLimit = 99
	if s.Authorization.TaskTypes[0] != "inference" || *s.Authorization.SingleLimit != 5 {
		t.Fatal("the binding shares memory with the session")
	}

	s.Authorization.TaskTypes, s.Authorization.SingleLimit = nil, nil
	if b := binding.Activate(s, now); b.TaskTypes == nil || b.SingleLimit != nil {
		t.Fatalf("an empty grant should give [] task types and a null limit, got %#v", b)
	}
}
