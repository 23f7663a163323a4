package registry

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/svrp/svrp/store"
)

func TestClientGroup(t *testing.T) {
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
		if got := ClientGroup(in); got != want {
			t.Errorf("ClientGroup(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestAddressBlock: every client group of one IPv4 /24 or IPv6 /48 has one block, and
// groups of different blocks have different ones.
func TestAddressBlock(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.0/24"},
		{"192.0.2.255", "192.0.2.0/24"},
		{"192.0.3.1", "192.0.3.0/24"},
		{"2001:db8:1:2::/64", "2001:db8:1::/48"},
		{"2001:db8:1:ffff::/64", "2001:db8:1::/48"},
		{"2001:db8:2::/64", "2001:db8:2::/48"},
		{"::/64", "::/48"},
		{"not an address", "not an address/*"},
	} {
		if got := AddressBlock(c.in); got != c.want {
			t.Errorf("AddressBlock(%q) = %q; want %q", c.in, got, c.want)
		}
	}
	// The 65,536 /64s of one /48 are one block; a block is never itself a client group.
	seen := map[string]bool{}
	for i := range 1 << 16 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 7, byte(i >> 8), byte(i), 1})
		seen[AddressBlock(ClientGroup(a.String()))] = true
	}
	if len(seen) != 1 || !seen["2001:db8:7::/48"] {
		t.Fatalf("one /48's /64s fall in blocks %v", seen)
	}
	for _, g := range []string{"192.0.2.7", "2001:db8:1:2::/64", "odd"} {
		if AddressBlock(g) == g {
			t.Errorf("block of %q is the group itself", g)
		}
	}
}

func TestParseHop(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" for no address
	}{
		{"192.0.2.1", "192.0.2.1"},
		{" 192.0.2.1 ", "192.0.2.1"},
		{"192.0.2.1:4711", "192.0.2.1"},
		{`"192.0.2.1:4711"`, "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:4711", "2001:db8::1"},
		{`"[2001:db8::1]:4711"`, "2001:db8::1"},
		{"[2001:db8::1]:_obf", "2001:db8::1"},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
		{"unknown", ""},
		{"_hidden", ""},
		{"[2001:db8::1", ""},
		{"192.0.2.1:4711:1", ""},
		{"", ""},
	} {
		a, ok := parseHop(c.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != c.want {
			t.Errorf("parseHop(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
}

func TestClientAddr(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	xff, err := New(Config{Store: store.NewMemory(), TrustedProxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := New(Config{Store: store.NewMemory(), TrustedProxies: proxies, ClientAddressHeader: "forwarded"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		header     http.Header
		xff, fwd   string // the client group with each header trusted
	}{
		{"no proxy", "192.0.2.1:5000", nil, "192.0.2.1", "192.0.2.1"},
		{"untrusted peer's headers ignored", "192.0.2.1:5000",
			http.Header{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.2"}}, "192.0.2.1", "192.0.2.1"},
		{"trusted peer, no header", "10.1.2.3:5000", nil, "10.1.2.3", "10.1.2.3"},
		{"trusted peer", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1", "10.1.2.3"},
		{"nearest untrusted hop wins", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.9, 198.51.100.1, 10.9.9.9"}}, "198.51.100.1", "10.1.2.3"},
		{"several header lines", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.9", "198.51.100.1"}}, "198.51.100.1", "10.1.2.3"},
		{"spoofed left part ignored", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"1.2.3.4, 198.51.100.1"}}, "198.51.100.1", "10.1.2.3"},
		{"garbage hop stops at the proxy", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1, unknown"}}, "10.1.2.3", "10.1.2.3"},
		{"IPv6 by /64", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"2001:db8:1:2::77"}}, "2001:db8:1:2::/64", "10.1.2.3"},
		{"X-Forwarded-For with ports", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.7:5555, [2001:db8:9:9::1]:443"}}, "2001:db8:9:9::/64", "10.1.2.3"},
		{"X-Forwarded-For IPv6 in brackets", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"[2001:db8:9:8::1]"}}, "2001:db8:9:8::/64", "10.1.2.3"},
		{"Forwarded", "10.1.2.3:5000", http.Header{"Forwarded": {`for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"`}}, "10.1.2.3", "2001:db8:cafe::/64"},
		{"Forwarded with port", "10.1.2.3:5000", http.Header{"Forwarded": {`for="198.51.100.2:80"`}}, "10.1.2.3", "198.51.100.2"},
		{"Forwarded, name in other case", "10.1.2.3:5000", http.Header{"Forwarded": {`proto=https;For="198.51.100.2:80"`}}, "10.1.2.3", "198.51.100.2"},
		// The proxy writes Forwarded; the client adds its own X-Forwarded-For to choose its
		// address. Only the header the proxy was said to write counts.
		{"client's own header beside the proxy's", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.2"}}, "198.51.100.1", "198.51.100.2"},
		{"IPv6 trusted proxy", "[2001:db8:ffff::1]:443", http.Header{"X-Forwarded-For": {"198.51.100.3"}}, "198.51.100.3", "2001:db8:ffff::/64"},
		{"IPv6 peer", "[2001:db8:1:2::5]:443", nil, "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
	} {
		r := &http.Request{RemoteAddr: c.peer, Header: c.header}
		if got := xff.clientAddr(r); got != c.xff {
			t.Errorf("%s, X-Forwarded-For trusted: clientAddr = %q; want %q", c.name, got, c.xff)
		}
		if got := fwd.clientAddr(r); got != c.fwd {
			t.Errorf("%s, Forwarded trusted: clientAddr = %q; want %q", c.name, got, c.fwd)
		}
	}
	if _, err := New(Config{Store: store.NewMemory(), ClientAddressHeader: "X-Real-IP"}); err == nil {
		t.Fatal("an unknown client address header was accepted")
	}
}
