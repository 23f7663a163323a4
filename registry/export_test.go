package registry

import (
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// LogRegistrationsOff leaves s's registrations unlogged, for the benchmark that measures the
// log's cost.
func LogRegistrationsOff(s *Service) { s.logState.registrationsOff = true }

// Endpoints returns the endpoint table as method and path template.
func Endpoints() [][2]string {
	out := make([][2]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = [2]string{e.method, e.path}
	}
	return out
}

// OpenAPI returns the OpenAPI document NewHandler serves.
func OpenAPI() []byte { return openAPI }

// Statuses returns the HTTP status of every protocol code the API sends.
func Statuses() map[string]int {
	out := make(map[string]int, len(statusOf))
	for c, s := range statusOf {
		out[string(c)] = s
	}
	return out
}

// NodeViewOf is the view of a node record that the listings serve.
func NodeViewOf(n store.Node) api.NodeView { return nodeView(n) }
