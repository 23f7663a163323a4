package daemon

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			t.Chdir(dir)
			var stdout, stderr bytes.Buffer
			if code := Main(context.Background(), tc.args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestCheckOriginAccepts(t *testing.T) {
	for _, o := range []string{"https://console.example.net", "http://localhost:3000", "http://127.0.0.1:8081", "https://[::1]:8443"} {
		if err := checkOrigin(o); err != nil {
			t.Errorf("checkOrigin(%q) = %v, want nil", o, err)
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
