package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every scenario, run briefly against an in-process registry, completes operations without
// a single failed request and ends with a JSON line that carries its figures.
func TestBenchScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the load generator")
	}
	for _, sc := range benchScenarios {
		t.Run(sc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runBench(t.Context(), []string{
				"--self-memory", "--scenario", sc.name, "--duration", "300ms", "--ceiling-time", "100ms",
				"--nodes", "40", "--clients", "4", "--json",
			}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("--json printed %d lines, want one JSON line:\n%s", len(lines), stdout.String())
			}
			var res benchResult
			if err := json.Unmarshal([]byte(lines[0]), &res); err != nil {
				t.Fatalf("the result line is not JSON: %v\n%s", err, lines[0])
			}
			if res.Scenario != sc.name || res.Target != "self-memory" {
				t.Errorf("scenario %q target %q, want %q self-memory", res.Scenario, res.Target, sc.name)
			}
			if res.Ops <= 0 || res.OpsPerS <= 0 || res.Requests < res.Ops {
				t.Errorf("ops %d (%.1f/s) of %d requests; want some", res.Ops, res.OpsPerS, res.Requests)
			}
			if res.Errors != 0 || len(res.ErrorsByCode) != 0 {
				t.Errorf("errors %d: %v", res.Errors, res.ErrorsByCode)
			}
			if res.P50ms <= 0 || res.P99ms < res.P50ms {
				t.Errorf("p50 %.3f ms, p99 %.3f ms", res.P50ms, res.P99ms)
			}
			if res.CeilingVerifiesPerS <= 0 || res.Clients != 4 || res.DurationS <= 0 {
				t.Errorf("ceiling %.0f, clients %d, duration %.3f", res.CeilingVerifiesPerS, res.Clients, res.DurationS)
			}
			if (res.FractionOfCeiling == nil) != (sc.verifies == 0) {
				t.Errorf("fraction of ceiling %v with %d verifies per op", res.FractionOfCeiling, sc.verifies)
			}
			switch sc.name {
			case "nodes", "peers":
				if res.Listed == nil || *res.Listed != 40 {
					t.Errorf("listed %v, want the 40 registered nodes", res.Listed)
				}
			case "journey":
				if len(res.Steps) != len(journeySteps) {
					t.Errorf("steps %+v, want one per journey step", res.Steps)
				}
			}
		})
	}
}

// Without --json the figures come as text, then the same JSON line.
func TestBenchText(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the load generator")
	}
	var stdout, stderr bytes.Buffer
	code := runBench(t.Context(), []string{
		"--self-memory", "--scenario", "heartbeat", "--duration", "200ms", "--ceiling-time", "100ms",
		"--nodes", "20", "--clients", "2", "--requests", "50",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"target: in-process registry", "verify ceiling:", "heartbeat: registered 20 nodes",
		"of the verify ceiling", "heartbeat: errors: none", "heartbeat: RSS", "stopped at --requests"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res benchResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("the last line is not the JSON result: %v\n%s", err, out)
	}
	if res.Ops != 50 || res.Stopped != "requests" {
		t.Errorf("ops %d, stopped %q; want 50 and requests", res.Ops, res.Stopped)
	}
}

func TestBenchRefusesRemoteTargets(t *testing.T) {
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := runBench(t.Context(), []string{"--url", "http://192.0.2.1:8080", "--ceiling-time", "0"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--allow-remote") {
		t.Errorf("exit %d, stderr %q; want 2 and a mention of --allow-remote", code, stderr.String())
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("refusing took %s: it should not try the address", time.Since(start))
	}

	for _, tc := range []struct {
		url    string
		remote bool
		ok     bool
	}{
		{"http://127.0.0.1:8080", false, true},
		{"http://127.3.2.1:9000/base/", false, true},
		{"http://[::1]:8080", false, true},
		{"http://localhost:8080", false, true},
		{"http://LOCALHOST", false, true},
		{"http://[::ffff:127.0.0.1]:8080", false, true},
		{"http://192.0.2.1:8080", false, false},
		{"http://192.0.2.1:8080", true, true},
		{"http://example.com:8080", false, false},
		{"http://127.0.0.1.example.com", false, false},
		{"http://0.0.0.0:8080", false, false},
		{"https://127.0.0.1:8443", false, false},
		{"127.0.0.1:8080", false, false},
	} {
		_, err := remoteTarget(tc.url, tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("remoteTarget(%q, allowRemote=%v): %v; want ok=%v", tc.url, tc.remote, err, tc.ok)
		}
	}
	tgt, err := remoteTarget("http://127.0.0.1:8080/base/", false)
	if err != nil || tgt.addr != "127.0.0.1:8080" || tgt.endpoint("/nodes") != "/base/nodes" {
		t.Errorf("target %+v, %v", tgt, err)
	}
}

func TestBenchFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "fly"},
		{"--duration", "5m"},
		{"--requests", "0"},
		{"--url", "http://127.0.0.1:8080", "--self"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runBench(t.Context(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, stderr.String())
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.quantile(tc.q)
		if diff := float64(got-tc.want) / float64(tc.want); diff < -0.02 || diff > 0.02 {
			t.Errorf("quantile(%v) = %s, want %s within 2%%", tc.q, got, tc.want)
		}
	}
	for v := uint64(0); v < 1<<40; v = v*3/2 + 1 {
		i := histIndex(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, outside the buckets", v, i)
		}
		if mid := histValue(i); float64(mid) < float64(v)*0.97 || float64(mid) > float64(v)*1.03+1 {
			t.Fatalf("value %d lands in bucket %d, whose middle is %d", v, i, mid)
		}
	}
}

func TestBenchConnReadsChunkedAndLengthAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, answer, body string
		status             int
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", 200},
		{"chunked", "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: 1\r\n\r\n", "abcde", 404},
		{"to close", "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nrest", "rest", 200},
	} {
		c := &benchConn{body: make([]byte, 0, benchKeep)}
		c.br = bufioReader(tc.answer)
		status, err := c.readAnswer()
		if err != nil || status != tc.status || string(c.body) != tc.body {
			t.Errorf("%s: status %d, body %q, %v; want %d %q", tc.name, status, c.body, err, tc.status, tc.body)
		}
	}
	if code := answerCode(401, []byte(`{"code":"BAD_SIGNATURE","error":"x"}`)); code != "401 BAD_SIGNATURE" {
		t.Errorf("answerCode = %q", code)
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// cannedConn answers every request with the same bytes, so the client's own cost can be
// measured without a server.
type cannedConn struct {
	net.Conn
	answer []byte
	r      bytes.Reader
}

func (c *cannedConn) Write(p []byte) (int, error) {
	c.r.Reset(c.answer)
	return len(p), nil
}
func (c *cannedConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *cannedConn) SetDeadline(time.Time) error { return nil }
func (c *cannedConn) Close() error                { return nil }

// The generator shares the machine with the server it measures: a request in the timed
// window must not allocate.
func TestBenchConnDoesNotAllocate(t *testing.T) {
	body := "{\"ok\":true,\"last_seen\":\"2026-01-01T00:00:00Z\"}\n"
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	nc := &cannedConn{answer: answer}
	c := &benchConn{nc: nc, br: bufio.NewReaderSize(nc, benchReadBuffer), body: make([]byte, 0, benchKeep)}
	w := &worker{conn: c, stats: newWorkerStats(len(journeySteps))}
	req := appendRequest(nil, "POST", "127.0.0.1:8080", "/api/v1/heartbeat", "", []byte(`{"did":"x"}`))
	allocs := testing.AllocsPerRun(1000, func() {
		if !w.send(req, &w.stats.hist) {
			t.Fatalf("send failed: %v", w.stats.errs)
		}
	})
	if allocs != 0 {
		t.Errorf("a request allocates %.1f times, want 0", allocs)
	}
	if w.stats.hist.n != 1001 || string(c.body) != body {
		t.Errorf("recorded %d latencies, kept body %q", w.stats.hist.n, c.body)
	}
}
