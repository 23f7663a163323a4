package registry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/budget"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

func revocationLimits(maxList, perRoot, perBlock int) harnessOption {
	return func(c *registry.Config) {
		c.Limits.MaxRevocations, c.Limits.RevocationsPerRoot, c.Limits.RevocationsPerBlock = maxList, perRoot, perBlock
		c.Limits.RevocationTTL = 24 * time.Hour
	}
}

// strangerRevocation is a revocation by a root key of its own that never logged in.
func strangerRevocation(t *testing.T, label string, now time.Time) authn.SignedRevocation {
	t.Helper()
	r, err := authn.SignRevocation(testkit.LabelKey(t, label), canonical.DefaultPrefix, "", "", "rev-"+label, now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func revocationCount(t *testing.T, st store.Store) int {
	t.Helper()
	var n int
	if err := st.View(context.Background(), func(tx store.Tx) (err error) {
		n, err = tx.RevocationCount()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRevocationListFair: strangers' revocations fill the list; a stranger from the block that
// filled it is refused, a newcomer from another block takes the place of the list's oldest
// unproven revocation, and an operator who logged in revokes its stolen credential whatever
// the list holds. An
// unproven revocation expires; a proven one stays.
func TestRevocationListFair(t *testing.T) {
	h := newHarness(t, revocationLimits(10, 3, 8))
	ctx := context.Background()
	revoke := func(r authn.SignedRevocation, addr string) error {
		_, err := h.svc.Revoke(ctx, r, addr)
		return err
	}
	wantLimit := func(err error, limit string) {
		t.Helper()
		if proto.CodeOf(err) != proto.RateLimited || budget.LimitOf(err) != limit {
			t.Fatalf("got %v (limit %q), want RATE_LIMITED by %s", err, budget.LimitOf(err), limit)
		}
	}
	// Block 10.0.0.0/24 holds 8 (its quota), block 10.0.1.0/24 holds 2: the list is full.
	for i := range 8 {
		if err := revoke(strangerRevocation(t, fmt.Sprint("a", i), h.now()), fmt.Sprintf("10.0.0.%d", i+1)); err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
		h.clock.Advance(time.Second)
	}
	wantLimit(revoke(strangerRevocation(t, "a-over", h.now()), "10.0.0.99"), budget.LimitRevocationsPerBlock)
	for i := range 2 {
		if err := revoke(strangerRevocation(t, fmt.Sprint("b", i), h.now()), "10.0.1.1"); err != nil {
			t.Fatal(err)
		}
	}
	wantLimit(revoke(strangerRevocation(t, "b-over", h.now()), "10.0.1.2"), budget.LimitRevocationList)

	// Once a sweep, or the recount of a daemon another is sweeping for, has found the
	// candidates, a newcomer displaces the oldest unproven revocation of the whole list.
	if err := h.svc.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	if err := revoke(strangerRevocation(t, "c0", h.now()), "10.0.2.1"); err != nil {
		t.Fatalf("a newcomer block on a full list: %v", err)
	}
	if n := revocationCount(t, h.st); n != 10 {
		t.Errorf("list holds %d, want 10", n)
	}
	first := strangerRevocation(t, "a0", h.now()).Revocation
	if err := h.st.View(ctx, func(tx store.Tx) error {
		_, err := tx.Revocation(first.OperatorDID, first.RevocationID)
		return err
	}); err != store.ErrNotFound {
		t.Errorf("the list's oldest unproven revocation: %v, want it displaced", err)
	}

	// An operator who logged in revokes a stolen credential on the full list; its root key's
	// quota is its own.
	op := newOperator(t, "op", h.now(), "nodes.bind")
	stolen := op.newDevice(t, "stolen", "rev-stolen")
	stolen.login(h)
	if err := revoke(op.revocation(t, op.root, "rev-stolen", h.now()), "10.0.5.1"); err != nil {
		t.Fatalf("the operator's revocation on a full list: %v", err)
	}
	for i := range 2 {
		if err := revoke(op.revocation(t, op.root, fmt.Sprint("rev-more-", i), h.now()), "10.0.5.1"); err != nil {
			t.Fatal(err)
		}
	}
	wantLimit(revoke(op.revocation(t, op.root, "rev-too-many", h.now()), "10.0.5.1"), budget.LimitRevocationsPerRoot)

	// A root key that revoked before it ever logged in, and then logged in, keeps its
	// revocation: it was displaceable, and is proven now.
	late := newOperator(t, "late", h.now(), "nodes.bind")
	if err := revoke(late.revocation(t, late.root, "rev-early", h.now()), "10.0.6.1"); err != nil {
		t.Fatalf("a revocation by a root key that has not logged in yet, on a full list: %v", err)
	}
	late.login(h)

	// Unproven revocations expire; the proven ones stay, and still refuse the stolen device.
	expire := func() int {
		t.Helper()
		h.clock.Advance(25 * time.Hour)
		if err := h.svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		return revocationCount(t, h.st)
	}
	if n := expire(); n != 4 {
		t.Errorf("after expiry the list holds %d, want the operator's 3 and the late one", n)
	}
	h.fails("POST", "/v1/auth/device-login", stolen.loginRequest(t, h.challenge(), h.now()), "", 401, "DC_REVOKED")
	// A revocation recorded before the list had quotas (no group) is kept, however old.
	legacy := strangerRevocation(t, "legacy", h.now()).Revocation
	if err := h.st.Update(ctx, func(tx store.Tx) error {
		return tx.PutRevocation(store.Revocation{OperatorDID: legacy.OperatorDID, RevocationID: legacy.RevocationID, RootPublicKey: legacy.OperatorRootPublicKey, RecordedAt: h.now()})
	}); err != nil {
		t.Fatal(err)
	}
	if n := expire(); n != 5 {
		t.Errorf("after a second expiry the list holds %d, want the 4 proven and the old one", n)
	}
	// The block that held most holds nothing now, and is admitted again.
	if err := revoke(strangerRevocation(t, "a-again", h.now()), "10.0.0.1"); err != nil {
		t.Fatalf("a stranger after expiry: %v", err)
	}
}

// TestRevocationNeededAlwaysGetsIn: a revocation of a credential a live session logged in
// with gets in on a full list with nothing to displace, and ends that session; a stranger's
// is refused there. It is still held to its network's quota, which refuses it from a full
// network and not from another.
func TestRevocationNeededAlwaysGetsIn(t *testing.T) {
	h := newHarness(t, func(c *registry.Config) {
		c.Limits.MaxRevocations, c.Limits.RevocationsPerRoot, c.Limits.RevocationsPerBlock = 4, 5, 3
		c.Limits.RevocationsPerNetwork = 3
		c.Limits.RevocationTTL = 24 * time.Hour
	})
	ctx := context.Background()
	revoke := func(r authn.SignedRevocation, addr string) error {
		_, err := h.svc.Revoke(ctx, r, addr)
		return err
	}
	op := newOperator(t, "op", h.now(), "nodes.bind")
	stolen := op.newDevice(t, "stolen", "rev-stolen")
	stolenToken := stolen.login(h)
	// The operator's own first revocation and strangers fill the network 10.0.0.0/16 and the
	// list; no sweep has found candidates to displace.
	if err := revoke(op.revocation(t, op.root, "rev-other", h.now()), "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for i, addr := range []string{"10.0.1.1", "10.0.2.1", "10.1.0.1"} {
		if err := revoke(strangerRevocation(t, fmt.Sprint("s", i), h.now()), addr); err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
	}
	if err := revoke(strangerRevocation(t, "full", h.now()), "10.2.0.1"); budget.LimitOf(err) != budget.LimitRevocationList {
		t.Fatalf("a stranger on the full list: %v; want %s", err, budget.LimitRevocationList)
	}
	if err := revoke(op.revocation(t, op.root, "rev-stolen", h.now()), "10.0.0.1"); budget.LimitOf(err) != budget.LimitRevocationsPerNetwork {
		t.Fatalf("the operator's revocation from the full network: %v; want %s", err, budget.LimitRevocationsPerNetwork)
	}
	// Sent from another network, as a revocation needs no bearer, it gets in.
	if err := revoke(op.revocation(t, op.root, "rev-stolen", h.now()), "10.3.0.1"); err != nil {
		t.Fatalf("the revocation of the credential in use, on a full list: %v", err)
	}
	h.fails("GET", "/v1/operator/me/credits", nil, stolenToken, 401, "NO_SESSION")
	if n := revocationCount(t, h.st); n != 5 {
		t.Errorf("list holds %d; want the cap 4 and the needed one", n)
	}
}
