package daemon

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestEdgeFlagUsageErrors: a header other than the two a proxy writes, and bounds below
// one, are usage errors (exit 2) that name the flag.
func TestEdgeFlagUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--client-address-header", "X-Real-IP"}, "--client-address-header"},
		{[]string{"--address-block-factor", "-1"}, "--address-block-factor"},
		{[]string{"--max-tracked-clients", "-5"}, "--max-tracked-clients"},
		{[]string{"--request-grace", "-1s"}, "--request-grace"},
		{[]string{"--refusal-delay", "-1s"}, "--refusal-delay"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"--memory", "--listen", "127.0.0.1:0"}, c.args...)
		if code := Main(context.Background(), args, io.Discard, &stderr); code != 2 {
			t.Errorf("%v: exit %d; want 2", c.args, code)
		}
		if !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("%v: the error does not name %s: %s", c.args, c.flag, stderr.String())
		}
	}
}

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
