package metrics

import (
	"net/http"
	"strconv"

	"github.com/svrp/svrp/registry/budget"

	"github.com/svrp/svrp/registry/httpapi"
)

// otherLabel stands for every label value outside a known set. A request's method is the
// client's to choose, so a label taken from it as sent would let any client add series
// without end; every label is therefore one of a set fixed when the daemon starts.
const otherLabel = "other"

// labelSet is a fixed set of label values.
type labelSet map[string]bool

func setOf[S ~string](values ...S) labelSet {
	s := make(labelSet, len(values))
	for _, v := range values {
		s[string(v)] = true
	}
	return s
}

// of returns v when it is in the set, else otherLabel.
func (s labelSet) of(v string) string {
	if s[v] {
		return v
	}
	return otherLabel
}

var (
	knownMethods = setOf(http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace)
	knownRoutes = setOf(httpapi.Routes()...)
	knownCodes  = setOf(httpapi.Codes()...)
	knownLimits = setOf(budget.Names()...)
)

// statusLabel is a status code as its label: the codes HTTP defines (100–599), else other.
func statusLabel(status int) string {
	if status < 100 || status > 599 {
		return otherLabel
	}
	return strconv.Itoa(status)
}
