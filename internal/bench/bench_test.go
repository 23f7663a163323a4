package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/svrpdtest"
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
			code := Main(t.Context(), []string{
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
	code := Main(t.Context(), []string{
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
	code := Main(t.Context(), []string{"--url", "http://192.0.2.1:8080", "--ceiling-time", "0"}, &stdout, &stderr)
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
		{"--url", "http://127.0.0.1:8080", "--spawn"},
		{"--self-memory", "--spawn-memory"},
		{"--spawn-binary", "svrpd"},
		{"--scenario", "restart", "--nodes", "5000001"},
		{"--scenario", "restart", "--spawn-memory"},
		{"--scenario", "restart", "--url", "http://127.0.0.1:8080"},
		{"--scenario", "abuse", "--url", "http://127.0.0.1:8080"},
		{"--scenario", "abuse", "--self-memory"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(t.Context(), args, &stdout, &stderr); code != 2 {
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

// --spawn measures a daemon in a process of its own, and the restart scenario times one
// that starts on a store bench filled; both need the real binary, built here, since the
// test binary cannot serve.
func TestBenchSpawnsTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds svrpd and runs the load generator")
	}
	bin := svrpdtest.Binary(t)
	profile := filepath.Join(t.TempDir(), "daemon.prof")
	tmp := t.TempDir()
	// Temporary directories go here, so the test can see that each is removed.
	t.Setenv("TMPDIR", tmp)

	t.Run("heartbeat", func(t *testing.T) {
		start := time.Now()
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), []string{
			"--spawn", "--spawn-binary", bin, "--scenario", "heartbeat", "--nodes", "50", "--clients", "4",
			"--duration", "300ms", "--ceiling-time", "100ms", "--json", "--cpuprofile", profile,
		}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		}
		var res benchResult
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("the result line is not JSON: %v\n%s", err, stdout.String())
		}
		if res.Target != "spawn-badger" || res.Ops <= 0 || res.Errors != 0 {
			t.Errorf("target %q, ops %d, errors %d %v; want spawn-badger, some ops and no error", res.Target, res.Ops, res.Errors, res.ErrorsByCode)
		}
		for name, v := range map[string]*float64{
			"daemon_rss_ready_mb": res.DaemonRSSReadyMB, "daemon_hwm_setup_mb": res.DaemonHWMSetupMB,
			"daemon_rss_peak_window_mb": res.DaemonRSSPeakWindowMB, "daemon_rss_end_mb": res.DaemonRSSEndMB,
			"generator_hwm_mb": res.GeneratorHWMMB,
		} {
			if v == nil || *v <= 0 {
				t.Errorf("%s = %v, want more than 0", name, v)
			}
		}
		if res.DaemonRSSGrowthMB == nil || res.DaemonPeakSource == "" {
			t.Errorf("growth %v, peak source %q", res.DaemonRSSGrowthMB, res.DaemonPeakSource)
		}
		if res.RSSReadyMB != nil || res.HWMMB != nil {
			t.Error("the in-process RSS fields are set for a spawned daemon")
		}
		// The daemon's CPU in the window, per heartbeat and against one verify.
		if res.ServerCPUS == nil || res.ServerCPUUsPerOp == nil || res.VerifyUs == nil || res.CPUVsVerify == nil {
			t.Fatalf("server CPU %v s, %v µs per op, verify %v µs, ratio %v; want all four", res.ServerCPUS, res.ServerCPUUsPerOp, res.VerifyUs, res.CPUVsVerify)
		}
		if perOp := *res.ServerCPUS * 1e6 / float64(res.Ops); *res.ServerCPUS <= 0 || *res.ServerCPUS > 2*res.DurationS*float64(res.CPUs) ||
			*res.ServerCPUUsPerOp < 0.9*perOp || *res.ServerCPUUsPerOp > 1.1*perOp {
			t.Errorf("server CPU %.3f s in a %.3f s window, %.1f µs per op of %d", *res.ServerCPUS, res.DurationS, *res.ServerCPUUsPerOp, res.Ops)
		}
		if want := *res.ServerCPUUsPerOp / *res.VerifyUs; *res.CPUVsVerify < 0.95*want || *res.CPUVsVerify > 1.05*want {
			t.Errorf("cpu_vs_verify %.2f, want %.2f (%.1f µs per op over one verify of %.1f µs)", *res.CPUVsVerify, want, *res.ServerCPUUsPerOp, *res.VerifyUs)
		}
		// The profile is the daemon's: gzipped, and naming the registry's heartbeat handler,
		// which the generator never runs.
		raw, err := os.ReadFile(profile)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("the profile is not gzipped: %v", err)
		}
		pb, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(pb, []byte("github.com/svrp/svrp/registry.")) {
			t.Errorf("the profile (%d bytes) names no function of the registry", len(pb))
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("took %s", d)
		}
		wantNoTempDirs(t, tmp)
	})

	t.Run("restart", func(t *testing.T) {
		start := time.Now()
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), []string{
			"--scenario", "restart", "--nodes", "2000", "--spawn-binary", bin, "--json",
		}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		}
		var res restartResult
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("the result line is not JSON: %v\n%s", err, stdout.String())
		}
		if res.Scenario != "restart" || res.Nodes != 2000 || res.HealthCount != 2000 || res.Listed != 2000 {
			t.Errorf("scenario %q nodes %d, health counted %d, listed %d; want restart and 2000 each", res.Scenario, res.Nodes, res.HealthCount, res.Listed)
		}
		if res.ReadyS <= 0 || res.HealthS < res.ReadyS || res.TableLoadS == nil || *res.TableLoadS > res.ReadyS {
			t.Errorf("ready %.3fs, health %.3fs, table loaded in %v; want 0 < table load <= ready <= health", res.ReadyS, res.HealthS, res.TableLoadS)
		}
		if res.PopulateS <= 0 || res.DiskMB <= 0 || res.ListBytes < 2000*200 || res.FirstListS <= 0 {
			t.Errorf("populate %.2fs, disk %.1f MB, list %d bytes in %.3fs", res.PopulateS, res.DiskMB, res.ListBytes, res.FirstListS)
		}
		if res.DaemonRSSMB <= 0 || res.DaemonHWMMB < res.DaemonRSSMB || res.DaemonHWMAfterListMB < res.DaemonHWMMB {
			t.Errorf("daemon RSS %.1f MB, peak %.1f MB, peak after the list %.1f MB", res.DaemonRSSMB, res.DaemonHWMMB, res.DaemonHWMAfterListMB)
		}
		if d := time.Since(start); d > 60*time.Second {
			t.Errorf("took %s", d)
		}
		wantNoTempDirs(t, tmp)
	})
}

// A daemon that fails to start is reported at once, with the end of its log.
func TestBenchSpawnFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	sh := shellOrSkip(t)
	script := filepath.Join(t.TempDir(), "svrpd")
	if err := os.WriteFile(script, []byte("#!"+sh+"\necho 'level=ERROR msg=\"cannot serve\"' >&2\nexit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(t.Context(), []string{"--spawn-memory", "--spawn-binary", script, "--scenario", "nodes", "--ceiling-time", "0"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "exited before serving") || !strings.Contains(stderr.String(), "cannot serve") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1, and the daemon's exit and log", code, stderr.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

// A daemon that never says it serves is killed at the bound, and one that does is stopped
// with SIGTERM; neither outlives the call.
func TestBenchDaemonIsNeverLeftRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sh := shellOrSkip(t)
	dir := t.TempDir()
	silent := filepath.Join(dir, "silent")
	if err := os.WriteFile(silent, []byte("#!"+sh+"\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := spawnDaemon(t.Context(), (*exec.Cmd).Start, silent, nil, io.Discard, slog.LevelWarn, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "killed it") {
		t.Errorf("a daemon that never serves: %v", err)
	}

	serving := filepath.Join(dir, "serving")
	script := "#!" + sh + `
trap 'echo "level=INFO msg=closing" >&2; exit 0' TERM
echo 'time=x level=INFO msg="node table loaded" nodes=7 took=12ms' >&2
echo 'time=x level=WARN msg="svrpd serving" addr=http://127.0.0.1:9 store=memory' >&2
while :; do sleep 0.05; done
`
	if err := os.WriteFile(serving, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	var relay bytes.Buffer
	logs := lockedWriter{w: &relay}
	d, err := spawnDaemon(t.Context(), (*exec.Cmd).Start, serving, nil, &logs, slog.LevelWarn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if d.addr != "127.0.0.1:9" || d.tableNodes != 7 || d.tableLoad != 12*time.Millisecond {
		t.Errorf("addr %q, table of %d nodes loaded in %s", d.addr, d.tableNodes, d.tableLoad)
	}
	if m, err := d.memory(); err != nil || m.rss <= 0 || m.hwm < m.rss {
		t.Errorf("memory %+v, %v", m, err)
	}
	if err := d.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if p, err := os.FindProcess(d.pid); err == nil {
		if err := p.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("the daemon is still there after stop: %v", err)
		}
	}
	<-d.logDone
	logs.mu.Lock()
	relayed := relay.String()
	logs.mu.Unlock()
	if !strings.Contains(relayed, "svrpd serving") || strings.Contains(relayed, "node table loaded") || strings.Contains(relayed, "closing") {
		t.Errorf("relayed at warn and above:\n%s", relayed)
	}
}

// A listing's body passes through the connection's buffers: only its head is kept, while
// its bytes and, when asked, its lines are counted.
func TestBenchConnKeepsOnlyTheHeadOfALargeBody(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n"
	body := `{"count":12345,"nodes":[` + strings.Repeat(line, 20000)
	for _, answer := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body,
	} {
		c := &benchConn{body: make([]byte, 0, benchKeep), countLines: true}
		c.br = bufio.NewReaderSize(strings.NewReader(answer), benchReadBuffer)
		status, err := c.readAnswer()
		if err != nil || status != 200 {
			t.Fatalf("status %d, %v", status, err)
		}
		if c.bodyLen != int64(len(body)) || c.lines != 20000 || cap(c.body) != benchKeep {
			t.Errorf("body of %d bytes, %d lines, kept buffer %d; want %d, 20000, %d", c.bodyLen, c.lines, cap(c.body), len(body), benchKeep)
		}
		if n, ok := jsonIntField(c.body, "count"); !ok || n != 12345 {
			t.Errorf("count %d, %v", n, ok)
		}
	}
	truncated := "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + strings.Repeat("y", 9000)
	c := &benchConn{body: make([]byte, 0, benchKeep)}
	c.br = bufioReader(truncated)
	if _, err := c.readAnswer(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body cut short: %v, want unexpected EOF", err)
	}
}

// The store filled for the restart scenario is the same on every run, and each of its DIDs
// is held by one key, as the registry would have assigned them.
func TestRestartNodes(t *testing.T) {
	const n = 200_000
	fallback := shortCollisions(n)
	// 200,000 keys are expected to share about n²/2/2³² ≈ 5 short bodies.
	if len(fallback) == 0 || len(fallback) > 20 {
		t.Errorf("%d fallback DIDs among %d nodes", len(fallback), n)
	}
	seen := make(map[string]int, n)
	for i := range n {
		form := didkey.FormShort
		if fallback[i] {
			form = didkey.FormFallback
		}
		did, err := didkey.NodeDID(restartKey(i), form)
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := seen[did.String()]; dup {
			t.Fatalf("nodes %d and %d share %s", j, i, did)
		}
		seen[did.String()] = i
	}
	now := time.Now()
	for i := 0; i < n; i += 9973 {
		a, err := restartNode(i, fallback[i], now)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := restartNode(i, fallback[i], now)
		if a.Key != b.Key || a.DID != b.DID || *a.Signature != *b.Signature || a.Endpoint != b.Endpoint {
			t.Fatalf("node %d differs between two derivations", i)
		}
		if seen[a.DID] != i || len(*a.Signature) < 86 || !a.SignatureVerified {
			t.Errorf("node %d: DID %q, signature %q", i, a.DID, *a.Signature)
		}
	}
}

// shellOrSkip returns the path of sh, which stands in for a daemon in these tests.
func shellOrSkip(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/sh", "/usr/bin/sh"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no sh to stand in for a daemon")
	return ""
}

// wantNoTempDirs fails when bench left a directory of its own under dir.
func wantNoTempDirs(t *testing.T, dir string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(dir, "svrpd-bench-*"))
	if len(left) > 0 {
		t.Errorf("bench left %v behind", left)
	}
}
