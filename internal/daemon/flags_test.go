package daemon

import (
	"bytes"
	"context"
	"flag"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store/badger"
)

// Usage errors stop serve before anything is opened, with exit code 2 and a message that
// names what to change.
func TestServeUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"memory and data", []string{"--memory", "--data", "./x"}, nil, "--data cannot be used with it"},
		{"memory and data from the environment", []string{"--memory"}, map[string]string{"SVRPD_DATA": "./x"}, "--data cannot be used with it"},
		{"memory from the environment and data", []string{"--data", "./x"}, map[string]string{"SVRPD_MEMORY": "1"}, "--data cannot be used with it"},
		{"memory not a boolean", nil, map[string]string{"SVRPD_MEMORY": "yes"}, `SVRPD_MEMORY="yes": want true or false`},
		{"sweep without unit", nil, map[string]string{"SVRPD_SWEEP_EVERY": "10"}, `SVRPD_SWEEP_EVERY="10": want a duration`},
		{"origin with a path", []string{"--memory", "--cors-origin", "https://console.example/app"}, nil, `--cors-origin "https://console.example/app": want scheme://host[:port]`},
		{"origin without scheme", []string{"--memory", "--cors-origin", "console.example"}, nil, `--cors-origin "console.example"`},
		{"origin wildcard", []string{"--memory", "--cors-origin", "*"}, nil, `--cors-origin "*"`},
		{"negative pool size", []string{"--memory", "--postgres-pool-size", "-1"}, nil, "--postgres-pool-size and --postgres-statement-timeout must not be negative"},
		{"postgres and memory", []string{"--postgres", "postgres://127.0.0.1/x", "--memory"}, nil, "--memory, --data and --postgres are mutually exclusive"},
		{"postgres and data", []string{"--postgres", "postgres://127.0.0.1/x", "--data", "./x"}, nil, "--memory, --data and --postgres are mutually exclusive"},
		{"postgres from the environment and data", []string{"--data", "./x"}, map[string]string{"SVRPD_POSTGRES": "postgres://127.0.0.1/x"}, "--memory, --data and --postgres are mutually exclusive"},
		// A proxy writes only X-Forwarded-For or Forwarded; the edge bounds start at one.
		{"client address header of no proxy", []string{"--memory", "--listen", "127.0.0.1:0", "--client-address-header", "X-Real-IP"}, nil, "--client-address-header"},
		{"negative address block factor", []string{"--memory", "--listen", "127.0.0.1:0", "--address-block-factor", "-1"}, nil, "--address-block-factor"},
		{"negative bound node expiry", []string{"--memory", "--listen", "127.0.0.1:0", "--bound-node-expiry", "-1h"}, nil, "--bound-node-expiry must not be negative"},
		{"bound node expiry without unit", nil, map[string]string{"SVRPD_BOUND_NODE_EXPIRY": "720"}, `SVRPD_BOUND_NODE_EXPIRY="720": want a duration`},
		{"negative node expiry", []string{"--memory", "--listen", "127.0.0.1:0", "--node-expiry-hours", "-1"}, nil, "--node-expiry-hours must be at least 1"},
		{"node expiry with a unit", nil, map[string]string{"SVRPD_NODE_EXPIRY_HOURS": "2h"}, `SVRPD_NODE_EXPIRY_HOURS="2h": want a whole number`},
		{"zero register limit", []string{"--memory", "--listen", "127.0.0.1:0", "--register-address-limit", "0"}, nil, "--register-address-limit must be at least 1"},
		{"negative tracked clients", []string{"--memory", "--listen", "127.0.0.1:0", "--max-tracked-clients", "-5"}, nil, "--max-tracked-clients"},
		{"negative request grace", []string{"--memory", "--listen", "127.0.0.1:0", "--request-grace", "-1s"}, nil, "--request-grace"},
		{"log origin with a space", []string{"--memory", "--log-origin", "registry example"}, nil, `--log-origin "registry example"`},
		{"negative refusal delay", []string{"--memory", "--listen", "127.0.0.1:0", "--refusal-delay", "-1s"}, nil, "--refusal-delay"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantUsageError(t, tc.args, tc.env, tc.want) })
	}
}

// wantUsageError runs serve with args and env in an empty directory and checks that it
// stops with exit code 2 and a message that contains want.
func wantUsageError(t *testing.T, args []string, env map[string]string, want string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), args, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2; stderr %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr = %q, want it to contain %q", stderr.String(), want)
	}
}

func TestCheckOriginAccepts(t *testing.T) {
	for _, o := range []string{"https://console.example.net", "http://localhost:3000", "http://127.0.0.1:8081", "https://[::1]:8443"} {
		if err := checkOrigin(o); err != nil {
			t.Errorf("checkOrigin(%q) = %v, want nil", o, err)
		}
	}
}

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
		NewLogger(&out, level, "text").With("component", "badger").Log(t.Context(), badger.LevelTrace, "compaction")
		shown := strings.Contains(out.String(), "level=TRACE msg=compaction component=badger")
		if shown != (level == "trace") {
			t.Errorf("--log-level %s: %q", level, out.String())
		}
	}
}

func TestTrustedProxyFlag(t *testing.T) {
	var got []netip.Prefix
	l := prefixList{&got}
	for _, v := range []string{"10.0.0.0/8", "192.0.2.1, 2001:db8::/32", "10.1.2.3/8"} {
		if err := l.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("prefixes %v; want %v", got, want)
	}
	for _, bad := range []string{"", "proxy.example", "10.0.0.0/33", "10.0.0.0/8,"} {
		var p []netip.Prefix
		if err := (prefixList{&p}).Set(bad); err == nil {
			t.Errorf("Set(%q) accepted %v", bad, p)
		}
	}
}

// Every field of limits.Limits has its flag, with the registry's default (zero for a
// table's quota per group, a share of its cap), and the flags left alone give the defaults.
func TestLimitFlags(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var l limits.Limits
	limitFlags(fs, &l)
	def := limits.DefaultLimits()
	for _, b := range limits.Bounds() {
		f := fs.Lookup(b.Flag)
		if f == nil {
			t.Errorf("%s has no flag --%s", b.Field, b.Flag)
			continue
		}
		if want := flagDefault(b, def); f.DefValue != want {
			t.Errorf("--%s defaults to %s, want %s", b.Flag, f.DefValue, want)
		}
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got := l.OrDefaults(); got != def {
		t.Errorf("the flags left alone give %+v, want the defaults %+v", got, def)
	}
}

// flagDefault is how a bound's default reads as its flag's: zero for a share, a whole number
// of its unit for a flag that takes one.
func flagDefault(b limits.Bound, def limits.Limits) string {
	switch {
	case b.Share:
		return "0"
	case b.Int(&def) != nil:
		return strconv.Itoa(*b.Int(&def))
	case b.Unit > 0:
		return strconv.FormatInt(int64(*b.Duration(&def)/b.Unit), 10)
	}
	return b.Duration(&def).String()
}

// The flags that took a number of hours before their fields were durations still do, and a
// number too large for a duration, given to mean never, is the longest duration.
func TestLimitFlagsInHours(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var l limits.Limits
	limitFlags(fs, &l)
	if err := fs.Parse([]string{"--node-expiry-hours", "48", "--revocation-ttl-hours", "1073741824000"}); err != nil {
		t.Fatal(err)
	}
	if l.NodeExpiry != 48*time.Hour || l.RevocationTTL != math.MaxInt64 {
		t.Errorf("node expiry %v, revocation TTL %v; want 48h and the longest duration", l.NodeExpiry, l.RevocationTTL)
	}
	for _, bad := range []string{"2h", "1.5", ""} {
		if err := fs.Set("node-expiry-hours", bad); err == nil {
			t.Errorf("--node-expiry-hours %q accepted", bad)
		}
	}
}

// The README's table of flags has a row for every limit's flag, giving the flag's default.
func TestLimitFlagsInREADME(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, flags, ok := strings.Cut(string(b), "\n### Flags\n")
	if !ok {
		t.Fatal("README has no Flags section")
	}
	flags, _, _ = strings.Cut(flags, "\n## ")
	def := limits.DefaultLimits()
	for _, bd := range limits.Bounds() {
		row := "\n| `--" + bd.Flag + "` | `"
		i := strings.Index(flags, row)
		if i < 0 {
			t.Errorf("the README's flags have no row for --%s", bd.Flag)
			continue
		}
		want := strings.TrimSuffix(strings.TrimSuffix(flagDefault(bd, def), "0s"), "0m")
		if got, _, _ := strings.Cut(flags[i+len(row):], "`"); got != want {
			t.Errorf("the README gives --%s the default %s, want %s", bd.Flag, got, want)
		}
	}
}
