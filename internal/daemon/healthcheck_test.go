package daemon

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
)

// svrpd healthcheck exits 0 when the daemon at --listen answers 200, over HTTP or over TLS
// as serve's flags say, and 1 when nothing answers.
func TestHealthcheck(t *testing.T) {
	plain := strings.TrimPrefix(serve(t, serveConfig(t)), "http://")
	dir := t.TempDir()
	writeCert(t, dir, 1)
	c := tlsConfig(t, dir)
	secure := strings.TrimPrefix(serve(t, c), "http://")
	_, port, _ := strings.Cut(plain, ":")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"plain", []string{"--listen", plain}, nil, 0},
		{"plain, every interface", []string{"--listen", ":" + port}, nil, 0},
		{"ready", []string{"--listen", plain, "--path", "/ready"}, nil, 0},
		{"from serve's variables", nil, map[string]string{"SVRPD_LISTEN": plain}, 0},
		{"TLS from serve's variables", nil, map[string]string{"SVRPD_LISTEN": secure, "SVRPD_TLS_CERT": c.TLSCert}, 0},
		{"TLS not said", []string{"--listen", secure}, nil, 1},
		{"nothing listening", []string{"--listen", testkit.FreeAddr(t)}, nil, 1},
		{"unknown path", []string{"--listen", plain, "--path", "/nope"}, nil, 1},
		{"not an address", []string{"--listen", "8080"}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if got := Healthcheck(context.Background(), tc.args, &stdout, &stderr); got != tc.want {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", got, tc.want, stdout.String(), stderr.String())
			}
		})
	}
}
