package daemon

import "testing"

// TestEdgeDefaults: a Config with no edge settings takes every default, and "forwarded"
// names the Forwarded header.
func TestEdgeDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	e := c.Edge
	if e.ClientAddressHeader != "X-Forwarded-For" || c.Limits.AddressBlockFactor != 16 || c.Limits.MaxTrackedClients != 1<<16 || e.RequestGrace != DefaultRequestGrace {
		t.Fatalf("defaults: %+v %+v", e, c.Limits)
	}
	if errs := (Edge{ClientAddressHeader: "forwarded"}).validate(); len(errs) != 0 {
		t.Fatalf("forwarded: %v", errs)
	}
}
