package hints

import (
	"strings"
	"testing"

	"github.com/svrp/svrp/proto"
)

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		code          proto.Code
		dir, registry string
		want          string
		ok            bool
	}{
		{proto.NoSession, "/ops", "http://r", "run: svrpd operator login --dir /ops", true},
		{proto.NoSession, "", "http://r", "run: svrpd operator login --dir DIR", true},
		{proto.TransportError, "", "http://r:1", "is a registry running at http://r:1? start one with: svrpd serve (or set --registry / SVRPD_REGISTRY)", true},
		{proto.Code("NO_SUCH_CODE"), "", "", "", false},
	} {
		got, ok := For(tc.code, tc.dir, tc.registry)
		if got != tc.want || ok != tc.ok {
			t.Errorf("For(%s) = %q, %v; want %q, %v", tc.code, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAllIsACopy(t *testing.T) {
	all := All()
	if len(all) != len(text) {
		t.Fatalf("All has %d hints, the table %d", len(all), len(text))
	}
	for code, h := range all {
		if h == "" || strings.Contains(h, "\n") {
			t.Errorf("hint for %s is empty or has a line break: %q", code, h)
		}
	}
	all[string(proto.NoSession)] = "changed"
	if h, _ := For(proto.NoSession, "d", ""); h == "changed" {
		t.Error("changing All's map changed the table")
	}
}
