// Package httpapi serves a [registry.Service] as the registry's HTTP API (docs/protocol.md
// section 5): [New] returns it as an http.Handler that svrpd or another Go service mounts.
//
// # What it does
//
// One table of endpoints is the router: a request's method and path pick the entry that
// serves it, and the Allow header, the choice of 404 or 405 and the route a request is
// counted under come from the same table. A handler reads the request (its body within
// [MaxBodyBytes], decoded strictly before any other check), calls one method of the
// service, and writes the answer; an error becomes its HTTP status in one table, the only
// place where errors meet HTTP. It also finds the client's address behind trusted proxies
// ([WithClientAddress]), answers CORS preflights ([WithCORSOrigins]), sends the cached
// answers of package registry/answers with their entity tags and gzip forms, logs one line
// per request and hands each exchange to an observer ([WithObserver]).
//
// # What it does not do
//
// It decides nothing of the protocol: every check, budget and refusal is the service's, and
// this package only carries requests to it and answers back. It holds no state beyond the
// bursts of its error log and whether the store was last seen refusing, opens no listener
// and starts no goroutine but the one that asks, during an outage, whether the store is back.
package httpapi
