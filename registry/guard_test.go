package registry

import (
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

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

func TestClientAddr(t *testing.T) {
	s, err := New(Config{Store: store.NewMemory(), TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		header     http.Header
		want       string
	}{
		{"no proxy", "192.0.2.1:5000", nil, "192.0.2.1"},
		{"untrusted peer's header ignored", "192.0.2.1:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "192.0.2.1"},
		{"trusted peer, no header", "10.1.2.3:5000", nil, "10.1.2.3"},
		{"trusted peer", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"nearest untrusted hop wins", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.9, 198.51.100.1, 10.9.9.9"}}, "198.51.100.1"},
		{"several header lines", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.9", "198.51.100.1"}}, "198.51.100.1"},
		{"spoofed left part ignored", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"1.2.3.4, 198.51.100.1"}}, "198.51.100.1"},
		{"garbage hop stops at the proxy", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1, unknown"}}, "10.1.2.3"},
		{"IPv6 by /64", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"2001:db8:1:2::77"}}, "2001:db8:1:2::/64"},
		{"Forwarded", "10.1.2.3:5000", http.Header{"Forwarded": {`for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::/64"},
		{"Forwarded with port", "10.1.2.3:5000", http.Header{"Forwarded": {`for="198.51.100.2:80"`}}, "198.51.100.2"},
		{"X-Forwarded-For before Forwarded", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.2"}}, "198.51.100.1"},
		{"IPv6 trusted proxy", "[2001:db8:ffff::1]:443", http.Header{"X-Forwarded-For": {"198.51.100.3"}}, "198.51.100.3"},
		{"IPv6 peer", "[2001:db8:1:2::5]:443", nil, "2001:db8:1:2::/64"},
	} {
		r := &http.Request{RemoteAddr: c.peer, Header: c.header}
		if got := s.clientAddr(r); got != c.want {
			t.Errorf("%s: clientAddr = %q; want %q", c.name, got, c.want)
		}
	}
}

func TestExpirySet(t *testing.T) {
	s := newExpirySet()
	t0 := time.Unix(1e9, 0)
	if !s.reserve("a", t0.Add(time.Minute), 2, t0) || !s.reserve("b", t0.Add(2*time.Minute), 2, t0) {
		t.Fatal("reserve under the limit failed")
	}
	if s.reserve("c", t0.Add(time.Minute), 2, t0) {
		t.Fatal("reserve over the limit succeeded")
	}
	s.remove("a")
	if !s.reserve("c", t0.Add(time.Minute), 2, t0) {
		t.Fatal("reserve after a removal failed")
	}
	if n := s.live(t0.Add(time.Minute)); n != 1 {
		t.Fatalf("live after c's end: %d; want 1 (b)", n)
	}
	// Many reserve/remove rounds keep the heap compacted.
	for i := range 10_000 {
		id := strconv.Itoa(i)
		s.reserve(id, t0.Add(time.Hour), 1<<20, t0)
		s.remove(id)
	}
	if len(s.order) > 2*len(s.m)+1024+1 {
		t.Fatalf("heap holds %d entries for %d live ids", len(s.order), len(s.m))
	}
}
