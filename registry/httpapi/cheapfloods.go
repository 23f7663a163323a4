package httpapi

import "github.com/svrp/svrp/proto"

// meteredAsMalformed reports whether the answer sw holds counts against its sender's budget
// of malformed requests (§8.1). Besides the 400s and 413s, it counts the refusals that cost
// the registry nothing but a lookup and that no honest client repeats: a path that names no
// endpoint, a DID no node is registered under (UNKNOWN_DID: a node told so registers again
// before its next heartbeat), and a ts outside the window or older than the node's last
// (STALE_TS: a node whose clock is off by minutes is refused either way). Unmetered, a flood
// of them is answered at full speed from any number of connections.
func meteredAsMalformed(sw *statusWriter) bool {
	switch sw.code {
	case proto.BadRequest, proto.PayloadTooLarge, proto.UnknownDID, proto.StaleTS:
		return true
	case proto.NotFound:
		return sw.route == ""
	}
	return false
}
