// Package api is the wire form of the svrp registry's HTTP API: the request and response
// bodies of every endpoint, the query of the node listings, the reachability class of a
// node's endpoint, and the strict decoders the registry reads request bodies with. The
// registry (the server) and registry/client both import it, and it imports neither a store
// nor the server, so a program that only talks to a registry builds without them. The protocol error codes are in package proto.
package api

// ErrorBody is the body of every error answer: the protocol code (see package proto) and a
// text for people.
type ErrorBody struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}
