package cmdflag_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/cmdflag"
)

func TestEnvironmentErrorsSayWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		env, value, want string
	}{
		{"SVRPD_MEMORY", "yes", `SVRPD_MEMORY="yes": want true or false`},
		{"SVRPD_SWEEP_EVERY", "10", `SVRPD_SWEEP_EVERY="10": want a duration with its unit, such as 10s`},
		{"SVRPD_LIMIT", "ten", `SVRPD_LIMIT="ten": want a whole number`},
		{"SVRPD_LIMIT", "99999999999999999999", `want a whole number`},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			var stderr bytes.Buffer
			fs := cmdflag.New("serve", &stderr)
			fs.Bool("memory", false, "")
			fs.Duration("sweep-every", time.Minute, "")
			fs.Int("limit", 1, "")
			code, ok := cmdflag.Parse(fs, nil)
			if ok || code != 2 {
				t.Fatalf("Parse = %d, %t; want 2, false", code, ok)
			}
			if got := stderr.String(); !strings.Contains(got, tc.want) || strings.Contains(got, "parse error") {
				t.Errorf("stderr = %q, want it to contain %q and not 'parse error'", got, tc.want)
			}
		})
	}
}

func TestEnvironmentSetsAndCountsAsSet(t *testing.T) {
	t.Setenv("SVRPD_DATA", "/tmp/x")
	t.Setenv("SVRPD_MEMORY", "true")
	var stderr bytes.Buffer
	fs := cmdflag.New("serve", &stderr)
	data := fs.String("data", "./d", "")
	memory := fs.Bool("memory", false, "")
	listen := fs.String("listen", "a:1", "")
	if _, ok := cmdflag.Parse(fs, []string{"--listen", "b:2"}); !ok {
		t.Fatalf("Parse failed: %s", stderr.String())
	}
	if *data != "/tmp/x" || !*memory || *listen != "b:2" {
		t.Errorf("data %q memory %t listen %q; want /tmp/x true b:2", *data, *memory, *listen)
	}
	for name, want := range map[string]bool{"data": true, "memory": true, "listen": true} {
		if cmdflag.IsSet(fs, name) != want {
			t.Errorf("IsSet(%s) = %t, want %t", name, !want, want)
		}
	}
	fs2 := cmdflag.New("serve", &stderr)
	fs2.String("other", "", "")
	if _, ok := cmdflag.Parse(fs2, nil); !ok || cmdflag.IsSet(fs2, "other") {
		t.Errorf("a flag neither the command line nor the environment set counts as set")
	}
}
