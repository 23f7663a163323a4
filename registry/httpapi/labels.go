package httpapi

import (
	"slices"

	"github.com/svrp/svrp/proto"
)

// Routes returns every route an [Exchange] can name: the endpoints' path templates and
// [RouteUnknown]. An observer that labels by route can hold its labels to this set.
func Routes() []string {
	out := []string{RouteUnknown}
	for _, e := range endpoints {
		if !slices.Contains(out, e.path) {
			out = append(out, e.path)
		}
	}
	return out
}

// Codes returns every protocol code an answer of the API can carry.
func Codes() []proto.Code {
	out := make([]proto.Code, 0, len(statusOf))
	for c := range statusOf {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Operation is one endpoint of the API: a method on a path template.
type Operation struct{ Method, Path string }

// Operations returns every endpoint of the API, in the order the router tries them. A test
// holds them to the OpenAPI document and to docs/protocol.md.
func Operations() []Operation {
	out := make([]Operation, len(endpoints))
	for i, e := range endpoints {
		out[i] = Operation{e.method, e.path}
	}
	return out
}

// OpenAPI returns the OpenAPI document of the API, as [New] serves it at GET /openapi.json.
func OpenAPI() []byte { return slices.Clone(openAPI) }
