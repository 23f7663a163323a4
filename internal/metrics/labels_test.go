package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/budget"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/httpapi"
)

// TestMadeUpLabelsAreOther feeds the observer exchanges whose method, route, code, limit and
// status a client could have chosen: however many distinct ones arrive, the series stay
// those of the known values plus one other.
func TestMadeUpLabelsAreOther(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	for i := range 10_000 {
		m.Observe(httpapi.Exchange{
			Method: fmt.Sprintf("M%05d", i), Route: fmt.Sprintf("/made/up/%d", i), Status: 1000 + i,
			Code: proto.Code(fmt.Sprintf("CODE_%d", i)), Limit: fmt.Sprintf("limit_%d", i), Duration: time.Millisecond,
		})
	}
	m.Observe(httpapi.Exchange{Method: "GET", Route: "/nodes", Status: 200, Duration: time.Millisecond})
	m.Observe(httpapi.Exchange{Method: "POST", Route: "/v1/auth/device-login", Status: 429,
		Code: proto.RateLimited, Limit: budget.LimitLoginsPerAddress, Duration: time.Millisecond})

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[string]bool{}
	series := map[string]int{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), namespace+"_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			series[f.GetName()]++
			for _, l := range mt.GetLabel() {
				if seen[l.GetName()] == nil {
					seen[l.GetName()] = map[string]bool{}
				}
				seen[l.GetName()][l.GetValue()] = true
			}
		}
	}
	want := map[string][]string{
		"method": {"GET", "POST", otherLabel},
		"route":  {"/nodes", "/v1/auth/device-login", otherLabel},
		"status": {"200", "429", otherLabel},
		"code":   {string(proto.RateLimited), otherLabel},
	}
	for label, values := range want {
		if len(seen[label]) != len(values) {
			t.Errorf("label %s has %d values, want %d (%v)", label, len(seen[label]), len(values), values)
		}
		for _, v := range values {
			if !seen[label][v] {
				t.Errorf("label %s lacks %q", label, v)
			}
		}
	}
	if n := len(seen["limit"]); n != len(budget.Names())+1 {
		t.Errorf("limit label has %d values, want the %d limits and other", n, len(budget.Names()))
	}
	if n := series[namespace+"_http_requests_total"]; n != 3 {
		t.Errorf("http_requests_total has %d series, want 3", n)
	}
}

// TestKnownLabelsPassThrough: every route and code the registry can name is its own label.
func TestKnownLabelsPassThrough(t *testing.T) {
	for _, r := range httpapi.Routes() {
		if got := knownRoutes.of(r); got != r {
			t.Errorf("route %q labelled %q", r, got)
		}
	}
	for _, c := range httpapi.Codes() {
		if got := knownCodes.of(string(c)); got != string(c) {
			t.Errorf("code %q labelled %q", c, got)
		}
	}
	for _, m := range []string{"GET", "HEAD", "POST", "OPTIONS", "DELETE"} {
		if got := knownMethods.of(m); got != m {
			t.Errorf("method %q labelled %q", m, got)
		}
	}
	for _, m := range []string{"get", "BREW", "", strings.Repeat("X", 1000)} {
		if got := knownMethods.of(m); got != otherLabel {
			t.Errorf("method %q labelled %q, want other", m, got)
		}
	}
}
