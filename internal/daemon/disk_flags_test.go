package daemon

import (
	"bytes"
	"strings"
	"testing"

	"github.com/svrp/svrp/store"
)

func TestParseDiskReserve(t *testing.T) {
	for _, tc := range []struct {
		in      string
		bytes   uint64
		percent float64
		bad     bool
	}{
		{in: "auto"}, {in: ""},
		{in: "512MiB", bytes: 512 << 20}, {in: "2GiB", bytes: 2 << 30}, {in: "300MB", bytes: 300e6},
		{in: "4096", bytes: 4096}, {in: "10 MiB", bytes: 10 << 20},
		{in: "10%", percent: 10}, {in: "2.5%", percent: 2.5},
		{in: "0", bad: true}, {in: "0%", bad: true}, {in: "100%", bad: true}, {in: "-1GiB", bad: true},
		{in: "lots", bad: true}, {in: "1.5GiB", bad: true}, {in: "99999999999TiB", bad: true},
	} {
		r, err := ParseDiskReserve(tc.in)
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: accepted as %+v", tc.in, r)
		case !tc.bad && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case !tc.bad && (r.Bytes != tc.bytes || r.Percent != tc.percent):
			t.Errorf("%q: %+v, want %d bytes, %v%%", tc.in, r, tc.bytes, tc.percent)
		}
	}
}

// TestTraceLevel checks that --log-level trace exists, shows Badger's own messages under a
// TRACE label, and that debug does not.
func TestTraceLevel(t *testing.T) {
	for _, level := range []string{"trace", "debug"} {
		var out bytes.Buffer
		NewLogger(&out, level, "text").With("component", "badger").Log(t.Context(), store.LevelTrace, "compaction")
		shown := strings.Contains(out.String(), "level=TRACE msg=compaction component=badger")
		if shown != (level == "trace") {
			t.Errorf("--log-level %s: %q", level, out.String())
		}
	}
}
