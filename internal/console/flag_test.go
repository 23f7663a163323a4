package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/internal/testkit"
)

var servingLine = regexp.MustCompile(`msg="svrpd serving" addr=(http://127\.0\.0\.1:\d+) .* console=(\S+)`)

// serve runs `svrpd serve` with args and returns its base URL and the console the log names.
func serve(t *testing.T, args ...string) (base, consoleURL string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.Buffer
	done := make(chan int, 1)
	go func() {
		done <- daemon.Main(ctx, append([]string{"--memory", "--listen", "127.0.0.1:0"}, args...), io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("svrpd exit %d:\n%s", code, stderr.String())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := servingLine.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], m[2]
		}
	}
	t.Fatalf("svrpd did not start:\n%s", stderr.String())
	return "", ""
}

func TestConsoleFlag(t *testing.T) {
	base, where := serve(t)
	if where != base+"/console/" {
		t.Errorf("by default the log names the console %q, want %s/console/", where, base)
	}
	res, err := http.Get(base + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /console/ by default: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}

	base, where = serve(t, "--console=false")
	if where != "off" {
		t.Errorf("with --console=false the log says console=%s", where)
	}
	res, err = http.Get(base + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct{ Code string }
	json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusNotFound || body.Code != "NOT_FOUND" {
		t.Errorf("GET /console/ with --console=false: %d %q, want 404 NOT_FOUND from the API", res.StatusCode, body.Code)
	}
}
