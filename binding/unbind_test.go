package binding_test

import (
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/proto"
)

func TestUnbind(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)
	active := binding.BindingSession{ID: "bs-1", State: binding.Active}
	mine := binding.Binding{SessionID: "bs-1"}
	newer := binding.Binding{SessionID: "bs-2"}
	for _, tc := range []struct {
		name  string
		s     binding.BindingSession
		cur   binding.Binding
		found bool
		want  proto.Code
	}{
		{"the node's current binding", active, mine, true, ""},
		{"superseded by a newer binding", active, newer, true, proto.BadState},
		{"no binding left", active, binding.Binding{}, false, proto.BadState},
		{"already unbound", binding.BindingSession{ID: "bs-1", State: binding.Active, UnboundBy: binding.UnboundByNode}, mine, true, proto.BadState},
		{"pending", binding.BindingSession{ID: "bs-1", State: binding.PendingNodeAcceptance}, mine, true, proto.BadState},
		{"cancelled", binding.BindingSession{ID: "bs-1", State: binding.Cancelled}, mine, true, proto.BadState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := binding.Bound(tc.s, tc.cur, tc.found); got != (tc.want == "") {
				t.Errorf("Bound = %v", got)
			}
			next, err := binding.Unbind(tc.s, tc.cur, tc.found, binding.UnboundByOperator, now)
			wantCode(t, err, tc.want)
			if err != nil {
				if next.UnboundBy != tc.s.UnboundBy || !next.UnboundAt.Equal(tc.s.UnboundAt) {
					t.Errorf("a refused unbind changed the session: %+v", next)
				}
				return
			}
			if next.State != binding.Active || next.UnboundBy != binding.UnboundByOperator || !next.UnboundAt.Equal(now.Truncate(time.Second)) {
				t.Errorf("Unbind = %+v", next)
			}
			if binding.Bound(next, tc.cur, tc.found) {
				t.Error("still bound after Unbind")
			}
		})
	}
	sup := binding.Supersede(active, now)
	if sup.UnboundBy != binding.UnboundBySuperseded || sup.State != binding.Active {
		t.Errorf("Supersede = %+v", sup)
	}
	if again := binding.Supersede(binding.BindingSession{State: binding.Active, UnboundBy: binding.UnboundByRevocation}, now); again.UnboundBy != binding.UnboundByRevocation {
		t.Errorf("Supersede overwrote an earlier mark: %+v", again)
	}
}

func TestBindingRevoked(t *testing.T) {
	dc := &authn.DeviceCredential{}
	dc.OperatorDID, dc.RevocationID = "did:svrp:o:1", "dev"
	s := binding.BindingSession{DeviceCredential: dc}
	b := binding.Binding{OperatorDID: "did:svrp:o:1", RevocationID: "az"}
	for _, tc := range []struct {
		name string
		rl   authn.Revocations
		s    binding.BindingSession
		want bool
	}{
		{"nil list", nil, s, false},
		{"nothing of its own", authn.RevocationSet{{OperatorDID: "did:svrp:o:2", RevocationID: "az"}: true}, s, false},
		{"its authorization", authn.RevocationSet{{OperatorDID: "did:svrp:o:1", RevocationID: "az"}: true}, s, true},
		{"its device credential", authn.RevocationSet{{OperatorDID: "did:svrp:o:1", RevocationID: "dev"}: true}, s, true},
		{"device credential unknown", authn.RevocationSet{{OperatorDID: "did:svrp:o:1", RevocationID: "dev"}: true}, binding.BindingSession{}, false},
	} {
		got, err := binding.BindingRevoked(b, tc.s, tc.rl)
		if err != nil || got != tc.want {
			t.Errorf("%s: BindingRevoked = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
