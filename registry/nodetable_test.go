package registry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/store"
)

// quotaService is a registry on the memory store with the node bounds given and a clock
// the test moves.
func quotaService(t *testing.T, l limits.Limits) (*Service, *time.Time) {
	t.Helper()
	now := time.Unix(1_700_000_000, 0).UTC()
	s, err := New(Config{Store: store.NewMemory(), Clock: func() time.Time { return now }, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	return s, &now
}

// testKey is the i-th made-up node key.
func testKey(i int) didkey.PublicKey {
	return didkey.PublicKey(sha256.Sum256(fmt.Appendf(nil, "node quota %d", i)))
}

// registerKey registers key i (unsigned, as grace mode allows) from addr.
func registerKey(s *Service, i int, addr string) error {
	k := testKey(i)
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	_, err := s.Register(context.Background(), api.RegisterRequest{DID: d.String(), PublicKey: k.Hex(), Endpoint: "203.0.113.7:7000"}, addr)
	return err
}

// mustRegister is registerKey for a registration the test needs to succeed.
func mustRegister(t *testing.T, s *Service, i int, addr string) {
	t.Helper()
	if err := registerKey(s, i, addr); err != nil {
		t.Fatal(err)
	}
}

func hasNode(t *testing.T, s *Service, i int) bool {
	t.Helper()
	err := s.store.View(context.Background(), func(tx store.Tx) error {
		_, err := tx.Node(testKey(i))
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// bind gives key i an active binding, as a finished binding would.
func bind(t *testing.T, s *Service, i int) {
	t.Helper()
	err := s.store.Update(context.Background(), func(tx store.Tx) error {
		d, _ := didkey.NodeDID(testKey(i), didkey.FormShort)
		return tx.PutBinding(binding.Binding{NodeKey: testKey(i), NodeDID: d.String(), OperatorDID: "did:svrp:o:00000000", SessionID: fmt.Sprint("s", i)})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A block at its quota is refused a new key; another block is not, and the refused block's
// known keys still register.
func TestNodeQuotaPerBlock(t *testing.T) {
	s, _ := quotaService(t, limits.Limits{MaxNodes: 100, MaxNodesPerBlock: 3})
	for i := range 3 {
		mustRegister(t, s, i, fmt.Sprint("198.51.100.", i+1))
	}
	if err := registerKey(s, 3, "198.51.100.9"); budget.LimitOf(err) != budget.LimitNodesPerBlock {
		t.Fatalf("a fourth key from the /24: %v; want %s", err, budget.LimitNodesPerBlock)
	}
	if err := registerKey(s, 0, "198.51.100.1"); err != nil {
		t.Fatalf("a known key of the full block: %v", err)
	}
	if err := registerKey(s, 4, "203.0.113.1"); err != nil {
		t.Fatalf("a key from another block: %v", err)
	}
}

// A full table gives a newcomer the place of the least recently seen record that is stale
// (unseen for the online window) and not bound, whatever its block; a node in use is never
// displaced, and when none is stale the newcomer is refused with a Retry-After.
func TestNodeDisplacementOrder(t *testing.T) {
	s, now := quotaService(t, limits.Limits{MaxNodes: 6})
	// Keys 0–4 from one /24, a minute apart; key 10 from another.
	for i := range 5 {
		mustRegister(t, s, i, "192.0.2.7")
		*now = now.Add(time.Minute)
	}
	mustRegister(t, s, 10, "198.51.100.1")
	*now = now.Add(time.Hour)
	bind(t, s, 0) // the stalest, bound: never displaced
	// Keys 1 and 10 heartbeat: in use. Keys 2, then 3, are the stalest unbound records.
	for _, i := range []int{1, 10} {
		if err := s.store.TouchNode(context.Background(), testKey(i), *now); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{11, 12} {
		if err := registerKey(s, i, "203.0.113.2"); err != nil {
			t.Fatalf("newcomer %d while full: %v", i, err)
		}
	}
	have := func() string {
		return fmt.Sprintf("0:%v 1:%v 2:%v 3:%v 4:%v 10:%v", hasNode(t, s, 0), hasNode(t, s, 1), hasNode(t, s, 2), hasNode(t, s, 3), hasNode(t, s, 4), hasNode(t, s, 10))
	}
	if got, want := have(), "0:true 1:true 2:false 3:false 4:true 10:true"; got != want {
		t.Fatalf("after two displacements: %s; want %s", got, want)
	}
	mustRegister(t, s, 13, "203.0.113.3") // takes key 4, the last stale one
	// Every record now is in use or bound: the next newcomer waits.
	err := registerKey(s, 14, "203.0.113.4")
	if budget.LimitOf(err) != budget.LimitNodes || budget.RetryAfter(err) <= 0 || budget.RetryAfter(err) > DefaultOnlineWindow {
		t.Fatalf("a newcomer when every record is in use: %v (retry after %v); want %s", err, budget.RetryAfter(err), budget.LimitNodes)
	}
	if !hasNode(t, s, 0) || !hasNode(t, s, 1) || !hasNode(t, s, 10) {
		t.Fatal("a node in use or bound was displaced")
	}
}

// A block at its quota gives its newcomer the place of its own stalest record, never another
// block's; a network's quota holds however many blocks the newcomers spread over.
func TestNodeQuotaLevels(t *testing.T) {
	s, now := quotaService(t, limits.Limits{MaxNodes: 100, MaxNodesPerBlock: 2, MaxNodesPerNetwork: 3})
	mustRegister(t, s, 0, "192.0.2.1")
	mustRegister(t, s, 1, "198.51.100.1")
	*now = now.Add(time.Minute)
	mustRegister(t, s, 2, "192.0.2.2")
	*now = now.Add(time.Hour)
	if err := registerKey(s, 3, "192.0.2.3"); err != nil {
		t.Fatalf("a newcomer of a full /24 with a stale record: %v", err)
	}
	if hasNode(t, s, 0) || !hasNode(t, s, 1) || !hasNode(t, s, 2) {
		t.Fatal("the full /24's newcomer did not take its own block's stalest record")
	}
	// 192.0.0.0/16 holds 2 (keys 2, 3); one more block of it fills the network.
	mustRegister(t, s, 4, "192.0.7.1")
	for _, i := range []int{2, 3} {
		if err := s.store.TouchNode(context.Background(), testKey(i), *now); err != nil {
			t.Fatal(err)
		}
	}
	if err := registerKey(s, 5, "192.0.9.1"); budget.LimitOf(err) != budget.LimitNodesPerNetwork {
		t.Fatalf("a third block of a full /16: %v; want %s", err, budget.LimitNodesPerNetwork)
	}
	if err := registerKey(s, 6, "203.0.113.1"); err != nil {
		t.Fatalf("another network: %v", err)
	}
}

// The sweep removes the nodes unseen for the expiry that are not bound, from the store, the
// node count and the blocks' counts; a bound node stays however long unseen.
func TestNodeExpiry(t *testing.T) {
	s, now := quotaService(t, limits.Limits{MaxNodes: 3, MaxNodesPerBlock: 3, NodeExpiry: 2 * time.Hour})
	for i := range 3 {
		mustRegister(t, s, i, "192.0.2.7")
	}
	bind(t, s, 0)
	*now = now.Add(90 * time.Minute)
	if err := s.store.TouchNode(context.Background(), testKey(1), *now); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(31 * time.Minute)
	if err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !hasNode(t, s, 0) || !hasNode(t, s, 1) || hasNode(t, s, 2) {
		t.Fatalf("after the sweep: 0:%v 1:%v 2:%v; want 2 (unbound, unseen 121 min) gone", hasNode(t, s, 0), hasNode(t, s, 1), hasNode(t, s, 2))
	}
	if n := s.tables.nodes.Held("192.0.2.7", netblock.Block, *now); n != 2 {
		t.Fatalf("the block holds %d after the sweep; want 2", n)
	}
	// The place is free again, for the same block.
	if err := registerKey(s, 3, "192.0.2.8"); err != nil {
		t.Fatalf("a new key after an expiry: %v", err)
	}
}

// A count from the store brings in what another daemon changed: a node deleted behind this
// service's back leaves its block's count at the next refresh, and one registered elsewhere
// joins it.
func TestNodeBlocksRefresh(t *testing.T) {
	s, now := quotaService(t, limits.Limits{MaxNodes: 10, MaxNodesPerBlock: 10})
	for i := range 3 {
		mustRegister(t, s, i, "192.0.2.7")
	}
	err := s.store.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.DeleteNode(testKey(0)); err != nil {
			return err
		}
		d, _ := didkey.NodeDID(testKey(9), didkey.FormShort)
		return tx.PutNode(store.Node{Key: testKey(9), DID: d.String(), Endpoint: "x:1", FirstSeen: *now, LastSeen: *now, Origin: "198.51.100.0/24"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.countNodeTable(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if a, b := s.tables.nodes.Held("192.0.2.7", netblock.Block, *now), s.tables.nodes.Held("198.51.100.9", netblock.Block, *now); a != 2 || b != 1 {
		t.Fatalf("after a refresh: %d and %d; want 2 and 1", a, b)
	}
}

// The longest expiry, given to mean never, expires nothing.
func TestNodeExpiryHuge(t *testing.T) {
	s, now := quotaService(t, limits.Limits{NodeExpiry: math.MaxInt64})
	mustRegister(t, s, 0, "192.0.2.7")
	*now = now.Add(24 * time.Hour)
	if err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !hasNode(t, s, 0) {
		t.Fatal("a node seen a day ago expired under the longest expiry")
	}
}

// Bind only the top block: 10 bound nodes in the block holding the most, and 990 stale
// unbound records in 110 blocks of 9, fill a table of 1,000. Honest new nodes from another
// network, each from a block of its own, are all admitted, each in the place of a stale
// unbound record, never of a bound one: the search for a victim looks past the kept
// records, whichever block holds the most. (The abuse suite's rows run a daemon on the real
// clock, on which no record goes stale within a test; this row lives here for that.)
func TestNodeBindOnlyTheTopBlock(t *testing.T) {
	const bound, blocks, perBlock, newcomers = 10, 110, 9, 20
	s, now := quotaService(t, limits.Limits{MaxNodes: bound + blocks*perBlock, MaxNodesPerBlock: bound, MaxNodesPerNetwork: bound + blocks*perBlock})
	for i := range bound {
		mustRegister(t, s, i, fmt.Sprint("10.0.0.", i+1))
		bind(t, s, i)
	}
	for b := range blocks {
		for j := range perBlock {
			mustRegister(t, s, 1000+b*perBlock+j, fmt.Sprintf("10.1.%d.%d", b, j+1))
		}
	}
	*now = now.Add(time.Hour)
	for i := range newcomers {
		if err := registerKey(s, 5000+i, fmt.Sprintf("192.0.%d.1", i)); err != nil {
			t.Fatalf("honest newcomer %d of %d: %v", i+1, newcomers, err)
		}
	}
	for i := range bound {
		if !hasNode(t, s, i) {
			t.Fatalf("bound node %d was displaced", i)
		}
	}
	gone := 0
	for k := range blocks * perBlock {
		if !hasNode(t, s, 1000+k) {
			gone++
		}
	}
	if gone != newcomers {
		t.Fatalf("%d stale unbound records gave their place up for %d newcomers", gone, newcomers)
	}
}

// Spread thin: an honest /24 holds 12 heartbeating nodes and the attacker one node in each
// of 48 /24s of as many networks, filling a table of 60. Once the attacker's records are
// stale each newcomer from a fresh /24 takes one of them, never an honest node, although the
// honest block holds the most; once none is stale the next newcomer is refused with a
// Retry-After.
func TestNodeSpreadThin(t *testing.T) {
	const honest, thin = 12, 48
	s, now := quotaService(t, limits.Limits{MaxNodes: honest + thin})
	for i := range honest {
		mustRegister(t, s, i, fmt.Sprint("198.51.100.", i+1))
	}
	for i := range thin {
		mustRegister(t, s, 100+i, fmt.Sprintf("10.%d.%d.1", i, i))
	}
	*now = now.Add(time.Hour)
	for i := range honest {
		if err := s.store.TouchNode(context.Background(), testKey(i), *now); err != nil {
			t.Fatal(err)
		}
	}
	for i := range thin {
		if err := registerKey(s, 200+i, fmt.Sprintf("172.%d.%d.1", 16+i%16, i)); err != nil {
			t.Fatalf("newcomer %d while %d attacker records are stale: %v", i, thin-i, err)
		}
	}
	for i := range honest {
		if !hasNode(t, s, i) {
			t.Fatalf("honest heartbeating node %d was displaced", i)
		}
	}
	err := registerKey(s, 300, "172.31.250.1")
	if budget.LimitOf(err) != budget.LimitNodes || budget.RetryAfter(err) <= 0 || budget.RetryAfter(err) > DefaultOnlineWindow {
		t.Fatalf("a newcomer when no record is stale: %v (retry after %v); want %s", err, budget.RetryAfter(err), budget.LimitNodes)
	}
}
