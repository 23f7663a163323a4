package daemon

import (
	"net/netip"
	"slices"
	"testing"
)

func TestTrustedProxyFlag(t *testing.T) {
	var got []netip.Prefix
	l := prefixList{&got}
	for _, v := range []string{"10.0.0.0/8", "192.0.2.1, 2001:db8::/32", "10.1.2.3/8"} {
		if err := l.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("prefixes %v; want %v", got, want)
	}
	for _, bad := range []string{"", "proxy.example", "10.0.0.0/33", "10.0.0.0/8,"} {
		var p []netip.Prefix
		if err := (prefixList{&p}).Set(bad); err == nil {
			t.Errorf("Set(%q) accepted %v", bad, p)
		}
	}
}
