package daemon

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
)

// --debug-listen serves the profiler on its own loopback listener, named in the "svrpd
// serving" line, and nowhere else.
func TestDebugListenServesTheProfiler(t *testing.T) {
	c := serveConfig(t)
	c.DebugListen = "127.0.0.1:0"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, NewLogger(&logs, "info", "text"), ready) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	debugURL := ""
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `msg="svrpd serving"`) {
			if _, v, ok := strings.Cut(line, " pprof="); ok {
				debugURL, _, _ = strings.Cut(strings.TrimSpace(v), " ")
			}
		}
	}
	if !strings.HasPrefix(debugURL, "http://127.0.0.1:") || !strings.HasSuffix(debugURL, "/debug/pprof/") || strings.Contains(debugURL, addr) {
		t.Fatalf("the serving line names the profiler at %q; want its own loopback port, apart from %s:\n%s", debugURL, addr, logs.String())
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, body := testkit.Get(t, url)
		return resp.StatusCode, string(body)
	}
	if status, body := get(debugURL); status != http.StatusOK || !strings.Contains(body, "goroutine") || !strings.Contains(body, "profile") {
		t.Errorf("GET %s: %d, want the profiler's index:\n%.300s", debugURL, status, body)
	}
	if status, body := get(debugURL + "goroutine?debug=1"); status != http.StatusOK || !strings.Contains(body, "daemon.Run") {
		t.Errorf("goroutine profile: %d, want the daemon's goroutines:\n%.300s", status, body)
	}
	if status, body := get(debugURL + "profile?seconds=1"); status != http.StatusOK || !bytes.HasPrefix([]byte(body), []byte{0x1f, 0x8b}) {
		t.Errorf("CPU profile: %d, %d bytes; want a gzipped profile", status, len(body))
	}
	if status, _ := get(debugURL + "cmdline"); status != http.StatusNotFound {
		t.Errorf("cmdline: %d, want 404: the command line may carry a database password", status)
	}
	if status, _ := get("http://" + addr + "/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("the API's listener answers /debug/pprof/ with %d, want 404", status)
	}
}

// Only a loopback address is taken: the profiler lets whoever reaches it spend the daemon's
// CPU and read its stacks.
func TestDebugListenLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:6060", "127.9.9.9:0", "[::1]:6060", "localhost:6060", "LOCALHOST:0"} {
		if err := checkDebugListen(ok); err != nil {
			t.Errorf("checkDebugListen(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "192.0.2.1:6060", "[::ffff:192.0.2.1]:6060", "example.com:6060", "localhost.example.com:6060", "127.0.0.1"} {
		if err := checkDebugListen(bad); err == nil {
			t.Errorf("checkDebugListen(%q) accepted it", bad)
		}
	}
	for _, args := range [][]string{
		{"--memory", "--debug-listen", "0.0.0.0:6060"},
		{"--memory", "--debug-listen", ":6060"},
	} {
		t.Chdir(t.TempDir())
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Fatalf("%v: exit %d, want 2; stderr %s", args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "--debug-listen") || !strings.Contains(stderr.String(), "loopback only") {
			t.Errorf("%v: stderr = %q, want the flag named and loopback asked for", args, stderr.String())
		}
	}
}
