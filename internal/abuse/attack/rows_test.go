package attack

import (
	"net/netip"
	"testing"
)

// The reference registrations stay within every default register budget, however many
// there are: no address registers more than its budget, no /24 more than its block's.
func TestReferenceAddressesStayWithinTheRegisterBudgets(t *testing.T) {
	perAddress, perBlock := map[string]int{}, map[netip.Prefix]int{}
	for i := range 5 * blockBudget() {
		a := referenceAddr(i)
		ip, err := netip.ParseAddr(a)
		if err != nil {
			t.Fatalf("key %d: address %q: %v", i, a, err)
		}
		block, _ := ip.Prefix(24)
		perAddress[a]++
		perBlock[block]++
	}
	for a, n := range perAddress {
		if n > DefaultRegisterAddressLimit {
			t.Errorf("%s registers %d keys; its budget is %d", a, n, DefaultRegisterAddressLimit)
		}
	}
	for b, n := range perBlock {
		if n > blockBudget() {
			t.Errorf("%s registers %d keys; its budget is %d", b, n, blockBudget())
		}
	}
	if len(perBlock) < 5 {
		t.Errorf("%d keys from %d blocks: more than one block's budget from a single block", 5*blockBudget(), len(perBlock))
	}
}

// Row 9's prepared registrations cover the budget of its addresses: a /24 of Addr holds 250
// of them, so 400 addresses make one full block and 150 addresses of another.
func TestRegisterBudgetCountsEachBlockOnce(t *testing.T) {
	for _, c := range []struct{ addresses, want int }{
		{1, DefaultRegisterAddressLimit},
		{250, blockBudget()},
		{freshAddresses, 2 * blockBudget()},
		{251, blockBudget() + DefaultRegisterAddressLimit},
	} {
		if got := registerBudget(c.addresses); got != c.want {
			t.Errorf("registerBudget(%d) = %d, want %d", c.addresses, got, c.want)
		}
	}
}

// Thin names a block of its own for each of its first 4,000 addresses, over 16 networks none
// of which is the honest clients' or the reference's: a spread-thin party never makes a
// block hold two of its entries.
func TestThinAddressesAreBlocksOfTheirOwn(t *testing.T) {
	blocks, networks := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for i := range 4000 {
		ip, err := netip.ParseAddr(Thin(10, i))
		if err != nil {
			t.Fatalf("address %d: %v", i, err)
		}
		block, _ := ip.Prefix(24)
		network, _ := ip.Prefix(16)
		if blocks[block] {
			t.Fatalf("address %d, %s: its block holds another", i, ip)
		}
		blocks[block], networks[network] = true, true
	}
	for _, g := range []int{Attackers, Honest, Reference} {
		if networks[netip.MustParsePrefix(Addr(g, 0)+"/16").Masked()] {
			t.Errorf("Thin reaches the network of group %d", g)
		}
	}
	if len(networks) != 16 {
		t.Errorf("4,000 blocks in %d networks, want 16", len(networks))
	}
}
