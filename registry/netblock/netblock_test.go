package netblock_test

import (
	"fmt"
	"net/netip"
	"testing"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/registry/netblock"
)

func TestClientOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":             "192.0.2.7",
		"::ffff:192.0.2.7":      "192.0.2.7",
		"2001:db8:1:2:3:4:5:6":  "2001:db8:1:2::/64",
		"2001:db8:1:2::9":       "2001:db8:1:2::/64",
		"fe80::1%eth0":          "fe80::/64",
		"::1":                   "::/64",
		"not an address":        "not an address",
		"2001:db8:1:3:ffff::ff": "2001:db8:1:3::/64",
	} {
		if got := netblock.ClientOf(in); got != want {
			t.Errorf("ClientOf(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestOf(t *testing.T) {
	for _, c := range []struct {
		in   string
		want [netblock.Levels]string
	}{
		{"192.0.2.7", [3]string{"192.0.2.7", "192.0.2.0/24", "192.0.0.0/16"}},
		{"192.0.3.255", [3]string{"192.0.3.255", "192.0.3.0/24", "192.0.0.0/16"}},
		{"2001:db8:1:2::/64", [3]string{"2001:db8:1:2::/64", "2001:db8:1::/48", "2001:db8::/32"}},
		{"2001:db8:1:ffff::/64", [3]string{"2001:db8:1:ffff::/64", "2001:db8:1::/48", "2001:db8::/32"}},
		{"::/64", [3]string{"::/64", "::/48", "::/32"}},
		// Blocks recorded by an earlier release: their own group below their width.
		{"192.0.2.0/24", [3]string{"192.0.2.0/24", "192.0.2.0/24", "192.0.0.0/16"}},
		{"2001:db8:1::/48", [3]string{"2001:db8:1::/48", "2001:db8:1::/48", "2001:db8::/32"}},
		{"not an address", [3]string{"not an address/*", "not an address/*", "not an address/*"}},
		{"10.0.0.0/99", [3]string{"10.0.0.0/99/*", "10.0.0.0/99/*", "10.0.0.0/99/*"}},
	} {
		if got := netblock.Groups(c.in); got != c.want {
			t.Errorf("Groups(%q) = %q; want %q", c.in, got, c.want)
		}
		if got := netblock.BlockOf(c.in); got != c.want[netblock.Block] {
			t.Errorf("BlockOf(%q) = %q; want %q", c.in, got, c.want[netblock.Block])
		}
	}
}

// TestOneBlock: the 65,536 /64s of one /48 are one block; a block is never itself a client
// group.
func TestOneBlock(t *testing.T) {
	seen := map[string]bool{}
	for i := range 1 << 16 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 7, byte(i >> 8), byte(i), 1})
		seen[netblock.BlockOf(netblock.ClientOf(a.String()))] = true
	}
	if len(seen) != 1 || !seen["2001:db8:7::/48"] {
		t.Fatalf("one /48's /64s fall in blocks %v", seen)
	}
	for _, g := range []string{"192.0.2.7", "2001:db8:1:2::/64", "odd"} {
		if netblock.BlockOf(g) == g {
			t.Errorf("block of %q is the group itself", g)
		}
	}
}

// TestNested: every address's group at a level lies within its group at every wider level,
// and two addresses that share a group at one level share it at every wider one.
func TestNested(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		addr := func(label string) string {
			if rapid.Bool().Draw(t, label+"-v4") {
				b := rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label)
				return netip.AddrFrom4([4]byte(b)).String()
			}
			b := rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label)
			return netip.AddrFrom16([16]byte(b)).Unmap().String()
		}
		a, b := netblock.ClientOf(addr("a")), netblock.ClientOf(addr("b"))
		ga, gb := netblock.Groups(a), netblock.Groups(b)
		for l := netblock.Block; l < netblock.Levels; l++ {
			wide := netip.MustParsePrefix(ga[l])
			narrow := ga[l-1]
			p, err := netip.ParsePrefix(narrow)
			if err != nil {
				p = netip.PrefixFrom(netip.MustParseAddr(narrow), 32)
			}
			if !wide.Contains(p.Addr()) || wide.Bits() > p.Bits() {
				t.Fatalf("%s's %v group %s is not within its %v group %s", a, l-1, narrow, l, ga[l])
			}
			if ga[l-1] == gb[l-1] && ga[l] != gb[l] {
				t.Fatalf("%s and %s share their %v group but not their %v group", a, b, l-1, l)
			}
		}
	})
}

func ExampleGroups() {
	fmt.Println(netblock.Groups(netblock.ClientOf("2001:db8:1:2::9")))
	fmt.Println(netblock.Groups("198.51.100.7"))
	// Output:
	// [2001:db8:1:2::/64 2001:db8:1::/48 2001:db8::/32]
	// [198.51.100.7 198.51.100.0/24 198.51.0.0/16]
}
