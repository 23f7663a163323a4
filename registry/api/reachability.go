package api

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Reachability classes of an endpoint (docs/protocol.md §4.1).
const (
	ReachPublic     = "public"
	ReachPrivate    = "private"
	ReachUnroutable = "unroutable"
)

var privatePrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
}

// Reachability classifies an endpoint as public, private or unroutable from its text alone;
// the registry never probes it.
func Reachability(endpoint string) string {
	host, ok := endpointHost(endpoint)
	if !ok {
		return ReachUnroutable
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		// A zone names an interface, not a network: fe80::1%eth0 is still link-local, and
		// netip.Prefix.Contains never matches a zoned address.
		ip = ip.WithZone("").Unmap()
		switch {
		case ip.IsMulticast():
			return ReachUnroutable
		case slices.ContainsFunc(privatePrefixes, func(p netip.Prefix) bool { return p.Contains(ip) }):
			return ReachPrivate
		}
		return ReachPublic
	}
	if strings.EqualFold(host, "localhost") || !strings.Contains(host, ".") {
		return ReachPrivate
	}
	return ReachPublic
}

// endpointHost takes the host of host:port (port 1–65535), [v6]:port, or an http(s) URL.
func endpointHost(endpoint string) (string, bool) {
	if strings.HasPrefix(endpoint, "http://") || strings.HasPrefix(endpoint, "https://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Hostname() == "" {
			return "", false
		}
		return u.Hostname(), true
	}
	i := strings.LastIndexByte(endpoint, ':')
	if i <= 0 {
		return "", false
	}
	host, port := endpoint[:i], endpoint[i+1:]
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || port[0] == '+' {
		return "", false
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
		if _, err := netip.ParseAddr(host); err != nil {
			return "", false
		}
		return host, true
	}
	if host == "" || strings.ContainsAny(host, ":/[]@") {
		return "", false
	}
	return host, true
}
