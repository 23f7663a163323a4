package daemon

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

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
