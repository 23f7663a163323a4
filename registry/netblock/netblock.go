// Package netblock groups client addresses the way the registry counts them: by the client
// (an IPv4 address, an IPv6 /64) and by the wider blocks one party commonly holds, so that a
// budget or a quota can hold at every level of the address hierarchy.
//
// It is address arithmetic only: it knows nothing of budgets, tables or HTTP, and never
// fails. A string it cannot read is a group of its own at every level, spelled so that it
// equals no group of a real address.
package netblock

import (
	"net/netip"
	"strings"
)

// Level is a step of the address hierarchy, from the narrowest.
type Level int

const (
	// Client is one client: an IPv4 address (/32), an IPv6 /64. One IPv6 client commonly
	// holds a whole /64, and could otherwise count as millions of clients.
	Client Level = iota
	// Block is an IPv4 /24, an IPv6 /48: a cloud account's or a hosting customer's share,
	// an IPv6 site.
	Block
	// Network is an IPv4 /16, an IPv6 /32: a provider's or a cloud region's allocation.
	// Spreading over many blocks of one network buys nothing at this level.
	Network
)

// Levels is the number of levels; Level values run from 0 to Levels-1.
const Levels = 3

// All lists the levels from the narrowest.
var All = [Levels]Level{Client, Block, Network}

// String names the level as limits and metrics do: "client", "block", "network".
func (l Level) String() string {
	switch l {
	case Client:
		return "client"
	case Block:
		return "block"
	case Network:
		return "network"
	}
	return "level?"
}

// Bits is the prefix length of the level for one address family.
func (l Level) Bits(v4 bool) int {
	if v4 {
		return [Levels]int{32, 24, 16}[l]
	}
	return [Levels]int{64, 48, 32}[l]
}

// Describe spells the level's prefixes, "IPv4 /24, IPv6 /48", for docs and messages.
func (l Level) Describe() string {
	return "IPv4 /" + itoa(l.Bits(true)) + ", IPv6 /" + itoa(l.Bits(false))
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// ClientOf is the client group of an address as a peer or a proxy reports it: an IPv4
// address as itself, an IPv6 address as its /64 ("2001:db8:1:2::/64"), and an IPv4-mapped
// IPv6 address as the IPv4 address. Anything unparsable is returned as is.
func ClientOf(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// Of is the group at level l of group, which may be a client group (as ClientOf returns
// it), an address, or a wider prefix such as a block recorded by an earlier release: a
// prefix already wider than the level is its own group there. Anything else is its own
// group at every level, spelled so that it is no address's group ("text/*").
func Of(group string, l Level) string {
	// Every request counts against its groups, so the common spellings are parsed without
	// building an error first: an IPv6 group has a prefix length, an IPv4 one has none.
	var p netip.Prefix
	if strings.IndexByte(group, '/') >= 0 {
		var err error
		if p, err = netip.ParsePrefix(group); err != nil {
			return group + "/*"
		}
	} else {
		a, err := netip.ParseAddr(group)
		if err != nil {
			return group + "/*"
		}
		a = a.Unmap().WithZone("")
		p = netip.PrefixFrom(a, a.BitLen())
	}
	a := p.Addr().Unmap().WithZone("")
	q, _ := a.Prefix(min(l.Bits(a.Is4()), p.Bits()))
	if l == Client && q.Bits() == 32 && a.Is4() {
		return a.String()
	}
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte
	return string(q.AppendTo(buf[:0]))
}

// BlockOf is Of(group, Block), the group most per-address budgets aggregate over.
func BlockOf(group string) string { return Of(group, Block) }

// Groups is group at every level, from the narrowest.
func Groups(group string) [Levels]string {
	var g [Levels]string
	for _, l := range All {
		g[l] = Of(group, l)
	}
	return g
}
