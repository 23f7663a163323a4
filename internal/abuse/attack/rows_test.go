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
