package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/svrp/svrp/registry/netblock"
)

// The client address headers a trusted proxy may write ([WithClientAddress]).
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded"
)

// clientAddr is the client group of r (see package registry/limits): of the TCP peer, or, when the peer is
// one of the trusted proxies, of the nearest address that the proxies report in the header
// the registry was told to trust and that is not itself a trusted proxy. The other header is
// ignored, so a client cannot name itself in the header its proxy does not write; a peer that
// is not trusted cannot choose its address with either.
func (h *handler) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !h.trusted(peer) {
		return netblock.ClientOf(host)
	}
	hops := forwardedFor(r.Header, h.opts.addressHeader)
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			// A hop the proxies wrote that is no address (an obfuscated name): the client
			// is unknown beyond the last trusted proxy, so count against that proxy.
			break
		}
		if !h.trusted(a) {
			return netblock.ClientOf(a.String())
		}
		peer = a
	}
	return netblock.ClientOf(peer.String())
}

func (h *handler) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range h.opts.trustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor returns the client addresses that proxies appended to header, nearest last:
// every X-Forwarded-For entry, or the for= parameters of Forwarded (RFC 7239), as written.
func forwardedFor(h http.Header, header string) []string {
	var out []string
	if header == HeaderForwarded {
		for _, line := range h.Values(HeaderForwarded) {
			for _, elem := range strings.Split(line, ",") {
				for _, pair := range strings.Split(elem, ";") {
					name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
						out = append(out, value)
					}
				}
			}
		}
		return out
	}
	for _, line := range h.Values(HeaderXForwardedFor) {
		for _, part := range strings.Split(line, ",") {
			out = append(out, part)
		}
	}
	return out
}

// parseHop reads one hop a proxy wrote: an address, with or without a port, IPv6 with or
// without brackets, quoted or not ("192.0.2.1", "192.0.2.1:4711", "2001:db8::1",
// "[2001:db8::1]", "\"[2001:db8::1]:4711\"").
func parseHop(v string) (netip.Addr, bool) {
	v = strings.Trim(strings.TrimSpace(v), `"`)
	if a, err := netip.ParseAddr(v); err == nil {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr(), true
	}
	if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		if a, err := netip.ParseAddr(v[1 : len(v)-1]); err == nil {
			return a, true
		}
	}
	if host, _, err := net.SplitHostPort(v); err == nil {
		// "[2001:db8::1]:" or a port that is no number: the address still stands.
		if a, err := netip.ParseAddr(host); err == nil {
			return a, true
		}
	}
	return netip.Addr{}, false
}
