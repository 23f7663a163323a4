package daemon

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/limits"
)

// serveConfig is a daemon configuration for tests: loopback, any free port, Badger in a
// fresh directory.
func serveConfig(t *testing.T) Config {
	return Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Prefix: canonical.DefaultPrefix,
		Limits: limits.DefaultLimits(), SweepEvery: time.Minute, LogLevel: "info", LogFormat: "text", MetricsListen: MetricsOnMain,
	}.WithDefaults()
}

// serve runs the daemon with c until the test ends and returns its base URL.
func serve(t *testing.T, c Config) string {
	t.Helper()
	return serveLogged(t, c, slog.New(slog.DiscardHandler))
}

// serveLogged is serve with the daemon's log going to log.
func serveLogged(t *testing.T, c Config, log *slog.Logger) string {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, log, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("serve stopped before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	return ""
}

// TestMetricsCount scrapes /metrics after a known sequence of requests: each request is
// counted under its route and status, each error under its code, and the node gauges and
// the rate-limit refusals say what happened.
func TestMetricsCount(t *testing.T) {
	c := serveConfig(t)
	c.Limits.RegisterAddressLimit = 2
	url := serve(t, c)
	cl := newCrashClient(url)
	a, b, refused := newCrashNode(), newCrashNode(), newCrashNode()
	register := func(path string, n crashNode) (int, string) {
		req := api.RegisterRequest{DID: n.did, PublicKey: n.key.Hex(), Endpoint: "203.0.113.1:7000", Capabilities: []string{}}
		sig := crashSign(n.priv, canonical.Register{DID: n.did, PublicKey: n.key.Base58(), Endpoint: req.Endpoint, Capabilities: req.Capabilities})
		req.Signature = &sig
		status, code, err := cl.call("POST", path, req, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return status, code
	}
	steps := []struct {
		do         func() (int, string)
		wantStatus int
		wantCode   string
	}{
		{func() (int, string) { return register("/api/v1/register", a) }, 200, ""},
		{func() (int, string) { return register("/register", b) }, 200, ""},
		{func() (int, string) { return register("/api/v1/register", refused) }, 429, "RATE_LIMITED"},
		{func() (int, string) {
			ts := time.Now().Unix()
			s, code, err := cl.call("POST", "/api/v1/heartbeat", api.HeartbeatRequest{DID: a.did, TS: ts, Signature: crashSign(a.priv, canonical.Heartbeat{DID: a.did, TS: ts})}, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			return s, code
		}, 200, ""},
		{func() (int, string) {
			s, code, _ := cl.call("POST", "/api/v1/heartbeat", map[string]any{}, "", nil)
			return s, code
		}, 400, "BAD_REQUEST"},
		{func() (int, string) { s, code, _ := cl.call("GET", "/v1/nope/abc123", nil, "", nil); return s, code }, 404, "NOT_FOUND"},
		{func() (int, string) { s, code, _ := cl.call("GET", "/nodes", nil, "", nil); return s, code }, 200, ""},
		{func() (int, string) { s, code, _ := cl.call("GET", "/nodes", nil, "", nil); return s, code }, 200, ""},
		{func() (int, string) {
			s, code, _ := cl.call("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ABCD-EFGH"}, "", nil)
			return s, code
		}, 401, "NO_SESSION"},
		{func() (int, string) {
			s, code, _ := cl.call("GET", "/v1/bindings/bs-none/status", nil, "", nil)
			return s, code
		}, 404, "NOT_FOUND"},
	}
	for i, s := range steps {
		if status, code := s.do(); status != s.wantStatus || code != s.wantCode {
			t.Fatalf("step %d: %d %s, want %d %s", i, status, code, s.wantStatus, s.wantCode)
		}
	}

	// Heartbeat times are flushed once a second; wait for a flush to be counted.
	var text string
	for deadline := time.Now().Add(testkit.WaitBound); ; {
		text = scrape(t, url+"/metrics")
		if v, _ := sample(text, "svrpd_heartbeat_flush_duration_seconds_count", nil); v >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, w := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"svrpd_http_requests_total", map[string]string{"route": "/api/v1/register", "method": "POST", "status": "200"}, 1},
		{"svrpd_http_requests_total", map[string]string{"route": "/api/v1/register", "method": "POST", "status": "429"}, 1},
		{"svrpd_http_requests_total", map[string]string{"route": "/register", "method": "POST", "status": "200"}, 1},
		{"svrpd_http_requests_total", map[string]string{"route": "/api/v1/heartbeat", "method": "POST", "status": "200"}, 1},
		{"svrpd_http_requests_total", map[string]string{"route": "/api/v1/heartbeat", "method": "POST", "status": "400"}, 1},
		{"svrpd_http_requests_total", map[string]string{"route": "unknown", "method": "GET", "status": "404"}, 1},
		{"svrpd_http_requests_total", map[string]string{"route": "/nodes", "method": "GET", "status": "200"}, 2},
		{"svrpd_http_requests_total", map[string]string{"route": "/v1/bindings/{id}/status", "method": "GET", "status": "404"}, 1},
		{"svrpd_http_request_duration_seconds_count", map[string]string{"route": "/nodes"}, 2},
		{"svrpd_protocol_errors_total", map[string]string{"code": "BAD_REQUEST"}, 1},
		{"svrpd_protocol_errors_total", map[string]string{"code": "NOT_FOUND"}, 2},
		{"svrpd_protocol_errors_total", map[string]string{"code": "NO_SESSION"}, 1},
		{"svrpd_protocol_errors_total", map[string]string{"code": "RATE_LIMITED"}, 1},
		{"svrpd_rate_limit_refusals_total", map[string]string{"limit": "register_per_address"}, 1},
		{"svrpd_rate_limit_refusals_total", map[string]string{"limit": "resolve_per_code"}, 0},
		{"svrpd_nodes", nil, 2},
		{"svrpd_nodes_online", nil, 2},
		{"svrpd_binding_sessions_open", map[string]string{"state": "INITIATED"}, 0},
		{"svrpd_bearer_sessions", nil, 0},
		{"svrpd_login_challenges_used", nil, 0},
		{"svrpd_store_healthy", nil, 1},
		{"svrpd_store_state", map[string]string{"state": "ok"}, 1},
		{"svrpd_store_state", map[string]string{"state": "low_space"}, 0},
		{"svrpd_census_ok", nil, 1},
	} {
		got, ok := sample(text, w.name, w.labels)
		if !ok || got != w.want {
			t.Errorf("%s%v = %v (present %t), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	for _, name := range []string{"svrpd_store_commit_group_size_count", "svrpd_store_commit_duration_seconds_count", "svrpd_heartbeat_flush_duration_seconds_count", "svrpd_login_challenges_used_capacity"} {
		if got, ok := sample(text, name, nil); !ok || got < 1 {
			t.Errorf("%s = %v (present %t), want at least 1", name, got, ok)
		}
	}
	// No path with an id reaches a label: routes are templates.
	if strings.Contains(text, "bs-none") || strings.Contains(text, "/v1/nope") {
		t.Error("a request path reached a metric label")
	}
}

// --metrics-listen moves /metrics to an address of its own, and "" turns it off; the API's
// /metrics then answers NOT_FOUND.
func TestMetricsListen(t *testing.T) {
	c := serveConfig(t)
	c.MetricsListen = testkit.FreeAddr(t)
	url := serve(t, c)
	if status, code, err := newCrashClient(url).call("GET", "/metrics", nil, "", nil); err != nil || status != 404 || code != "NOT_FOUND" {
		t.Errorf("API's /metrics with --metrics-listen: %d %s %v, want 404 NOT_FOUND", status, code, err)
	}
	text := scrape(t, "http://"+c.MetricsListen+"/metrics")
	if _, ok := sample(text, "svrpd_nodes", nil); !ok {
		t.Errorf("the metrics listener serves no svrpd_nodes:\n%s", text)
	}

	off := serveConfig(t)
	off.MetricsListen = ""
	url = serve(t, off)
	if status, code, err := newCrashClient(url).call("GET", "/metrics", nil, "", nil); err != nil || status != 404 || code != "NOT_FOUND" {
		t.Errorf("/metrics with metrics off: %d %s %v, want 404 NOT_FOUND", status, code, err)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, b := testkit.Get(t, url)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return string(b)
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// sample returns the value of the series name whose labels include labels, from the
// Prometheus text format.
func sample(text, name string, labels map[string]string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		got := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
			got[m[1]] = m[2]
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			f, err := strconv.ParseFloat(value, 64)
			return f, err == nil
		}
	}
	return 0, false
}
