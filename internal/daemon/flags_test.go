package daemon

import (
	"net/netip"
	"slices"
	"testing"
)

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

// --postgres takes the place of --data and --memory: one store, however it is given.
func TestServePostgresExclusive(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"postgres and memory", []string{"--postgres", "postgres://127.0.0.1/x", "--memory"}, nil},
		{"postgres and data", []string{"--postgres", "postgres://127.0.0.1/x", "--data", "./x"}, nil},
		{"postgres from the environment and data", []string{"--data", "./x"}, map[string]string{"SVRPD_POSTGRES": "postgres://127.0.0.1/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Chdir(t.TempDir())
			var stdout, stderr bytes.Buffer
			if code := Main(context.Background(), tc.args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "--memory, --data and --postgres are mutually exclusive") {
				t.Errorf("stderr = %q, want the three stores named as exclusive", stderr.String())
			}
		})
	}
}
