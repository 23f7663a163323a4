package httpapi

import (
	"net/http"
	"net/netip"
	"testing"
)

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
	handlerWith := func(header string) *handler {
		t.Helper()
		o, err := WithClientAddress(header, proxies...)
		if err != nil {
			t.Fatal(err)
		}
		h := &handler{opts: options{addressHeader: HeaderXForwardedFor}}
		o(&h.opts)
		return h
	}
	xff, fwd := handlerWith(""), handlerWith("forwarded")
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
	if _, err := WithClientAddress("X-Real-IP", proxies...); err == nil {
		t.Fatal("an unknown client address header was accepted")
	}
}
