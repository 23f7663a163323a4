package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
)

// run runs svrpd bench with args and returns its exit code, its JSON lines and its stderr.
func run(t *testing.T, args ...string) (int, []result, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), args, &stdout, &stderr)
	var out []result
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("a JSON line that does not parse: %v\n%s", err, line)
		}
		out = append(out, r)
	}
	return code, out, stderr.String()
}

// Every scenario, run briefly against a spawned daemon, answers every request as asked and
// reports the daemon's CPU per operation; the signing ones against one verify's.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds svrpd and runs the load generator")
	}
	bin := svrpdtest.Binary(t)
	t.Setenv("TMPDIR", t.TempDir())
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			code, res, stderr := run(t, "--spawn-binary", bin, "--scenario", sc.name, "--duration", "500ms",
				"--verify-time", "100ms", "--nodes", "60", "--clients", "4", "--requests", "2000", "--json")
			if len(res) != 1 {
				t.Fatalf("exit %d, %d results; stderr:\n%s", code, len(res), stderr)
			}
			r := res[0]
			if r.Scenario != sc.name || r.Target != "spawn" || r.VerifyUs <= 0 || r.Figures["daemon_rss_mb"] <= 0 {
				t.Errorf("scenario %q target %q, verify %.1f µs, daemon RSS %.1f MB", r.Scenario, r.Target, r.VerifyUs, r.Figures["daemon_rss_mb"])
			}
			failed := false
			for _, p := range r.Phases {
				switch {
				case strings.HasPrefix(p.Name, "GET /v1/network/stats") && p.failures() == p.Failed["404 NOT_FOUND"]:
					// A daemon without the stats page yet answers 404, and that is reported.
				case p.failures() > 0:
					t.Errorf("%s: failed %v", p.Name, p.Failed)
				case p.Ops <= 0 || p.P99ms < p.P50ms || p.BytesPerOp <= 0:
					t.Errorf("%s: %d ops, p50 %.3f ms, p99 %.3f ms, %.0f bytes per op", p.Name, p.Ops, p.P50ms, p.P99ms, p.BytesPerOp)
				}
				failed = failed || p.failures() > 0
				if p.CPUUsPerOp == nil || (p.Verifies > 0) != (p.CPUVsVerify != nil) {
					t.Errorf("%s: CPU per op %v, against %d verifies %v", p.Name, p.CPUUsPerOp, p.Verifies, p.CPUVsVerify)
				}
			}
			if (code != 0) != failed {
				t.Errorf("exit %d with failures %v; stderr:\n%s", code, failed, stderr)
			}
			switch sc.name {
			case "watcher":
				if len(r.Phases) != 2 || r.Figures["heartbeats_sent"] <= 0 || r.Figures["heartbeats_failed"] != 0 {
					t.Errorf("phases %d, heartbeats sent %v, failed %v", len(r.Phases), r.Figures["heartbeats_sent"], r.Figures["heartbeats_failed"])
				}
			case "stats":
				if len(r.Phases) != 4 || r.Figures["bytes_stats_over_health"] <= 0 || r.Figures["bytes_stats_gzip_over_health"] <= 0 {
					t.Errorf("phases %d, figures %v", len(r.Phases), r.Figures)
				}
				for _, f := range []string{"cpu_stats_over_health", "cpu_stats_gzip_over_health", "cpu_stats_polls_over_health"} {
					if low, high := r.Figures[f+"_low"], r.Figures[f+"_high"]; low > high {
						t.Errorf("%s: the rounds' lowest ratio %v is above their highest %v", f, low, high)
					}
				}
				// The console's polls carry the counts and a few steps, not the history.
				if polls := r.Figures["bytes_stats_polls_over_health"]; polls <= 0 || polls*4 > r.Figures["bytes_stats_over_health"] {
					t.Errorf("the polls receive %v times /health's bytes, the whole page %v", polls, r.Figures["bytes_stats_over_health"])
				}
			}
		})
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) > 0 {
		t.Errorf("temporary directories left behind: %v", left)
	}
}

// --daemon-arg reaches svrpd serve after bench's own arguments: a store flag replaces the
// temporary Badger directory, and a flag serve does not know stops it from starting.
func TestDaemonArgs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds svrpd and spawns it")
	}
	bin := svrpdtest.Binary(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, res, stderr := run(t, "--spawn-binary", bin, "--daemon-arg=--memory", "--scenario", "nodes", "--nodes", "10",
		"--clients", "2", "--duration", "200ms", "--verify-time", "0", "--cpuprofile", filepath.Join(tmp, "prof"))
	if code != 0 || len(res) != 1 || res[0].Phases[0].Ops == 0 {
		t.Fatalf("exit %d, %+v\n%s", code, res, stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 1 || left[0].Name() != "prof" {
		t.Errorf("with --memory bench made %v in TMPDIR, want only the profile", left)
	}
	code, _, stderr = run(t, "--spawn-binary", bin, "--daemon-arg", "--no-such-flag", "--scenario", "nodes", "--verify-time", "0")
	if code != 1 || !strings.Contains(stderr, "no-such-flag") || !strings.Contains(stderr, "exited before serving") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and serve's complaint", code, stderr)
	}
}

// The abuse scenario runs a row against a daemon with its default limits and reports the
// honest clients' p99 without and under the attack, and the attack's answers.
func TestAbuseRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an abuse row for 10 s")
	}
	bin := svrpdtest.Binary(t)
	honestBinary = bin
	defer func() { honestBinary = "" }()
	code, res, stderr := run(t, "--spawn-binary", bin, "--scenario", "abuse", "--abuse-rows", "8", "--json")
	if code != 0 || len(res) != 1 {
		t.Fatalf("exit %d, %d results\n%s", code, len(res), stderr)
	}
	r := res[0]
	if len(r.Phases) != 5 || r.Figures["login_p99_ratio"] <= 0 || r.Figures["heartbeat_p99_ratio"] <= 0 || r.Figures["daemon_peak_mb"] <= 0 {
		t.Fatalf("%+v", r)
	}
	for _, p := range r.Phases[:4] {
		if p.Ops == 0 || p.failures() > 0 {
			t.Errorf("%s: %d ops, failed %v", p.Name, p.Ops, p.Failed)
		}
	}
	// A replayed heartbeat is answered with the stored record, and changes nothing.
	if attack := r.Phases[4]; attack.Ops == 0 {
		t.Errorf("attack: %d answered 200, the rest %v", attack.Ops, attack.Failed)
	}
}

// A row whose attack speaks HTTP/2 is served over TLS with a certificate bench makes, which
// the honest clients, speaking HTTP/2 too, trust.
func TestAbuseRowOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an abuse row for 10 s")
	}
	bin := svrpdtest.Binary(t)
	honestBinary = bin
	defer func() { honestBinary = "" }()
	code, res, stderr := run(t, "--spawn-binary", bin, "--scenario", "abuse", "--abuse-rows", "17", "--json")
	if code != 0 || len(res) != 1 {
		t.Fatalf("exit %d, %d results\n%s", code, len(res), stderr)
	}
	r := res[0]
	if len(r.Phases) != 5 || r.Figures["daemon_peak_mb"] <= 0 {
		t.Fatalf("%+v", r)
	}
	for _, p := range r.Phases[:4] {
		if p.Ops == 0 || p.failures() > 0 {
			t.Errorf("%s: %d ops, failed %v", p.Name, p.Ops, p.Failed)
		}
	}
	// The attack's answers are its connections, each made over TLS.
	if attack := r.Phases[4]; attack.Ops == 0 {
		t.Errorf("attack: %d connections made, the rest %v", attack.Ops, attack.Failed)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "nope"},
		{"--duration", "5m"},
		{"--requests", "0"},
		{"--clients", "-1"},
		{"--log-level", "loud"},
		{"--prefix", "bad prefix"},
		{"--abuse-rows", "1"},
		{"--scenario", "abuse", "--abuse-rows", "99"},
		{"--url", "http://127.0.0.1:8080", "--daemon-arg", "--memory"},
		{"--url", "http://127.0.0.1:8080", "--scenario", "abuse"},
		{"--url", "ftp://127.0.0.1"},
		{"--spawn=false"},
		{"--scenario", "abuse", "--cpuprofile", "x"},
	} {
		code, _, stderr := run(t, args...)
		if code != 2 || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a reason", args, code, stderr)
		}
	}
}

func TestURLMustBeLoopback(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://127.9.9.9": true, "http://[::1]:80": true, "http://LOCALHOST:1": true,
		"https://127.0.0.1/registry": true, "http://192.0.2.1:8080": false, "http://example.org": false,
		"http://[::ffff:127.0.0.1]:1": true,
	} {
		if err := checkURL(raw, false); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
		if err := checkURL(raw, true); err != nil {
			t.Errorf("%s with --allow-remote: %v", raw, err)
		}
	}
	start := time.Now()
	code, _, stderr := run(t, "--url", "http://192.0.2.1:8080")
	if code != 2 || !strings.Contains(stderr, "--allow-remote") || time.Since(start) > 5*time.Second {
		t.Errorf("exit %d, stderr %q; want 2 at once, naming --allow-remote", code, stderr)
	}
}

func TestNamesStore(t *testing.T) {
	for arg, want := range map[string]bool{
		"--memory": true, "-memory": true, "--data=/x": true, "--data": true, "--postgres=postgres://h/d": true,
		"--max-nodes": false, "memory": false, "/data": false, "--database": false,
	} {
		if got := namesStore(arg); got != want {
			t.Errorf("namesStore(%q) = %v", arg, got)
		}
	}
}

func TestLogLines(t *testing.T) {
	line := `time=x level=WARN msg="svrpd serving" addr=http://127.0.0.1:9 pprof=http://127.0.0.1:7/debug/pprof/`
	if logField(line, "addr") != "http://127.0.0.1:9" || logField(line, "time") != "x" || logField(line, "nope") != "" {
		t.Errorf("fields of %q", line)
	}
	if logLevelOf(line) != slog.LevelWarn || logLevelOf("panic: boom") != slog.LevelError {
		t.Error("levels")
	}
}

func shellOrSkip(t *testing.T) string {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to stand in for svrpd")
	}
	return sh
}

// A daemon that fails to start is reported with the end of its log; one that never says it
// serves is killed when the run is cancelled; one that serves is stopped with SIGTERM, and
// its warnings are relayed. None outlives the call.
func TestSpawn(t *testing.T) {
	sh := shellOrSkip(t)
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!"+sh+"\n"+body), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	failing := script("failing", "echo 'level=ERROR msg=\"cannot serve\"' >&2\nexit 3\n")
	if _, err := spawn(t.Context(), failing, nil, io.Discard, slog.LevelWarn); err == nil || !strings.Contains(err.Error(), "cannot serve") {
		t.Errorf("a daemon that exits: %v", err)
	}
	silent := script("silent", "exec sleep 60\n")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := spawn(ctx, silent, nil, io.Discard, slog.LevelWarn); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a daemon that never serves: %v", err)
	}
	serving := script("serving", `trap 'echo "level=INFO msg=closing" >&2; exit 0' TERM
echo 'time=x level=INFO msg="node table loaded" nodes=7' >&2
echo 'time=x level=WARN msg="svrpd serving" addr=http://127.0.0.1:9 store=memory' >&2
while :; do sleep 0.05; done
`)
	var relay testkit.Buffer
	d, err := spawn(t.Context(), serving, nil, &relay, slog.LevelWarn)
	if err != nil {
		t.Fatal(err)
	}
	if d.addr != "127.0.0.1:9" {
		t.Errorf("addr %q", d.addr)
	}
	if rss, peak, err := d.memory(); err != nil || rss <= 0 || peak < rss {
		t.Errorf("memory %v %v, %v", rss, peak, err)
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
	relayed := relay.String()
	if !strings.Contains(relayed, "svrpd serving") || strings.Contains(relayed, "node table loaded") || strings.Contains(relayed, "closing") {
		t.Errorf("relayed at warn and above:\n%s", relayed)
	}
	if left, _ := os.ReadDir(dir); len(left) != 3 {
		t.Errorf("TMPDIR holds %d entries after the daemons stopped, want the 3 scripts", len(left))
	}
}

func TestNextLink(t *testing.T) {
	tg := &target{base: "http://127.0.0.1:8080/registry"}
	for header, want := range map[string]string{
		`</registry/nodes?cursor=abc&limit=5>; rel="next"`:              "/nodes?cursor=abc&limit=5",
		`<nodes?cursor=x>; rel="prev", <nodes?cursor=y>; rel="next"`:    "/nodes?cursor=y",
		`<http://127.0.0.1:8080/registry/nodes?cursor=z>; rel = "next"`: "/nodes?cursor=z",
		`<https://elsewhere.example/nodes?cursor=z>; rel="next"`:        "https://elsewhere.example/nodes?cursor=z",
		`</registry/nodes?cursor=abc>; rel="last"`:                      "",
	} {
		h := http.Header{"Link": {header}}
		got := nextLink(h)
		if got != "" {
			got = tg.resolve(got)
		}
		if got != want {
			t.Errorf("Link %s: next %q, want %q", header, got, want)
		}
	}
}
