package registry_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// betweenStore runs a function once, right after the next View: between the read and the
// write of a change that verifies outside its write (a call of the service's own methods, whose
// only View is that read).
type betweenStore struct {
	store.Store
	mu sync.Mutex
	fn func()
}

func (s *betweenStore) after(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn = fn
}

func (s *betweenStore) View(ctx context.Context, fn func(store.Tx) error) error {
	err := s.Store.View(ctx, fn)
	s.mu.Lock()
	between := s.fn
	s.fn = nil
	s.mu.Unlock()
	if between != nil {
		between()
	}
	return err
}

func betweenHarness(t *testing.T) (*harness, *betweenStore, operator, string) {
	t.Helper()
	bs := &betweenStore{Store: store.NewMemory()}
	h := startHarness(t, bs, t.TempDir(), testkit.NewClock(epoch))
	op := newOperator(t, "op", h.now(), "nodes.bind")
	return h, bs, op, op.login(h)
}

// A node's cancel verified on an INITIATED session that its operator resolves before the
// write starts over: the session is cancelled as it now is, resolved by that operator, not
// overwritten with the version read before the resolve.
func TestChangeStartsOverWhenTheSessionChanged(t *testing.T) {
	h, bs, op, token := betweenHarness(t)
	n := newNode(t, "node")
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-moved", h.now(), num(10), nil), "", &ini)
	bs.after(func() {
		h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode}, token, nil)
	})
	res, err := h.svc.CancelByNode(t.Context(), "bs-moved", n.cancelRequest(t, "bs-moved", n.did, h.now()))
	if err != nil || res.State != "CANCELLED" {
		t.Fatalf("cancel = %+v, %v; want CANCELLED", res, err)
	}
	got := storedSession(t, bs.Store, "bs-moved")
	if got.State != binding.Cancelled || got.OperatorDID != op.did {
		t.Errorf("stored session: state %s, operator %q; want CANCELLED, resolved by %s", got.State, got.OperatorDID, op.did)
	}
}

// An accept verified on a PENDING_NODE_ACCEPTANCE session that is cancelled before the write
// answers as the cancelled session does, BAD_STATE, and makes no binding.
func TestAcceptOfASessionCancelledMeanwhile(t *testing.T) {
	h, bs, op, token := betweenHarness(t)
	n := newNode(t, "node")
	f := h.drive(n, op, token, "bs-gone", "PENDING_NODE_ACCEPTANCE")
	bs.after(func() {
		h.ok("POST", "/v1/bindings/bs-gone/cancel", nil, token, nil)
	})
	_, err := h.svc.Accept(t.Context(), "bs-gone", n.acceptance(t, f.pend, true, h.now()).Acceptance)
	if proto.CodeOf(err) != proto.BadState {
		t.Fatalf("accept = %v, want BAD_STATE", err)
	}
	if got := storedSession(t, bs.Store, "bs-gone").State; got != binding.Cancelled {
		t.Errorf("stored state %s, want CANCELLED", got)
	}
	err = bs.Store.View(t.Context(), func(tx store.Tx) error { _, err := tx.Binding(n.key); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a binding was stored (%v)", err)
	}
}

// A revocation recorded between an authorization's read and its write stops it, although the
// session did not change: the write reads the revocations again.
func TestAuthorizeRevokedMeanwhile(t *testing.T) {
	h, bs, op, token := betweenHarness(t)
	n := newNode(t, "node")
	f := h.drive(n, op, token, "bs-revoked", "PENDING_OPERATOR")
	bs.after(func() {
		if err := bs.Store.Update(t.Context(), func(tx store.Tx) error {
			return tx.PutRevocation(store.Revocation{OperatorDID: op.did, RevocationID: op.cred.RevocationID, RootPublicKey: op.cred.OperatorRootPublicKey, RevokedAt: h.now(), RecordedAt: h.now()})
		}); err != nil {
			t.Error(err)
		}
	})
	_, err := h.svc.Authorize(t.Context(), authn.Operator{DID: op.did}, op.authorize(t, f.view, h.now(), num(5), num(50)))
	if proto.CodeOf(err) != proto.DCRevoked {
		t.Fatalf("authorize = %v, want DC_REVOKED", err)
	}
	if got := storedSession(t, bs.Store, "bs-revoked").State; got != binding.PendingOperator {
		t.Errorf("stored state %s, want PENDING_OPERATOR", got)
	}
}
