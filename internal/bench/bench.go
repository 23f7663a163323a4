package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/client"
)

// benchConfig is everything `svrpd bench` is configured with.
type benchConfig struct {
	url         string
	self        bool
	selfMemory  bool
	spawn       bool
	spawnMemory bool
	spawnBinary string
	allowRemote bool
	scenario    string
	duration    time.Duration
	requests    int64
	clients     int
	nodes       int
	ceilingTime time.Duration
	prefix      string
	logLevel    string
	jsonOnly    bool
	cpuProfile  string
}

// benchScenario is what a scenario sends and how it is sized unless told otherwise.
type benchScenario struct {
	name    string
	clients int
	nodes   int // nodes registered in setup; 0 when the scenario registers none
	// verifies is the number of Ed25519 verifications the registry makes per operation,
	// counted from its code: heartbeat, the node's signature; login, the credential's root
	// signature and the login signature; journey, initiate 1 (node) + resolve 0 + authorize
	// 2 (credential, authorization) + pending 1 (poll) + accept 4 (the whole chain).
	verifies int
}

var benchScenarios = []benchScenario{
	{name: "heartbeat", clients: 64, nodes: 10_000, verifies: 1},
	{name: "login", clients: 64, verifies: 2},
	{name: "nodes", clients: 16, nodes: 1_000},
	{name: "peers", clients: 16, nodes: 1_000},
	{name: "journey", clients: 16, verifies: 8},
}

// journeySteps name the requests of one binding journey, in order.
var journeySteps = []string{"initiate", "resolve", "authorize", "pending", "accept"}

const (
	// benchMaxDuration keeps a window inside the 300 s that signed timestamps and login
	// challenges stay valid, counted from when they were prepared.
	benchMaxDuration = 4 * time.Minute
	// Prepared logins and journeys are sized from a short calibration run; these caps bound
	// the memory they take in the generator.
	benchMaxLogins   = 200_000
	benchMaxJourneys = 20_000
	// benchMargin is how many times the calibrated need is prepared, so that a registry
	// faster once warm does not run out of prepared requests before the window ends.
	benchMargin = 2
)

// Main is "svrpd bench": it parses the flags, runs the chosen scenarios against an in-process,
// spawned or remote (loopback unless allowed) registry and reports them. It returns the exit
// code: 0 when every scenario ran, 1 on a failure, 2 on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c benchConfig
	fs := cmdflag.New("bench", stderr)
	fs.StringVar(&c.url, "url", "", "registry to measure, e.g. http://127.0.0.1:8080 (default: an in-process registry, as --self)")
	fs.BoolVar(&c.self, "self", false, "measure an in-process registry (svrpd serve on 127.0.0.1:0, Badger in a temporary directory); the default without --url or --spawn")
	fs.BoolVar(&c.selfMemory, "self-memory", false, "like --self with the memory store")
	fs.BoolVar(&c.spawn, "spawn", false, "measure svrpd serve started as a child process (127.0.0.1:0, Badger in a temporary directory), whose memory is reported apart from the generator's")
	fs.BoolVar(&c.spawnMemory, "spawn-memory", false, "like --spawn with the memory store")
	fs.StringVar(&c.spawnBinary, "spawn-binary", "", "the svrpd binary that --spawn and the restart scenario start (default: this executable)")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow a --url that is not loopback (127.0.0.0/8, ::1, localhost)")
	fs.StringVar(&c.scenario, "scenario", "all", "heartbeat, login, nodes, peers, journey, all (those five in turn) or restart (slow; run only when named)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "timed window of each scenario, at most "+benchMaxDuration.String())
	fs.Int64Var(&c.requests, "requests", 1_000_000, "most operations per scenario (journeys for journey); the window ends at whichever bound comes first")
	fs.IntVar(&c.clients, "clients", 0, "concurrent connections (default per scenario: 64 heartbeat and login, 16 nodes, peers and journey)")
	fs.IntVar(&c.nodes, "nodes", 0, "nodes registered for heartbeat, nodes and peers, or stored for restart (default 10000 for heartbeat, 1000 for nodes and peers, 1000000 for restart, which takes at most 5000000)")
	fs.DurationVar(&c.ceilingTime, "ceiling-time", 2*time.Second, "how long to measure the Ed25519 verify ceiling (0 skips it)")
	fs.StringVar(&c.prefix, "prefix", canonical.DefaultPrefix, "domain prefix of every signed message; must be the registry's")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level of the in-process registry, or the least level of a spawned daemon's log lines copied to stderr (svrpd serve logs at info by default, one line per binding step)")
	fs.BoolVar(&c.jsonOnly, "json", false, "print only the JSON line of each scenario")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed window to this file (with an in-process registry it covers the registry and the generator, otherwise the generator alone; read it with go tool pprof)")
	fs.Usage = func() { benchUsage(fs.Output(), fs) }
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "svrpd bench: %v\n", strings.ReplaceAll(err.Error(), "\n", "\nsvrpd bench: "))
		return 2
	}
	// A spawned daemon's log is copied to stderr from a goroutine of its own.
	stderr = &lockedWriter{w: stderr}
	b := &bench{cfg: c, stdout: stdout, stderr: stderr, text: stdout}
	if c.jsonOnly {
		b.text = io.Discard
	}
	if c.spawn || c.spawnMemory || c.scenario == "restart" {
		b.daemonBin = c.spawnBinary
		if b.daemonBin == "" {
			exe, err := os.Executable()
			if err != nil {
				fmt.Fprintf(stderr, "svrpd bench: finding this executable to spawn: %v\n", err)
				return 1
			}
			b.daemonBin = exe
		}
	}
	switch {
	case c.scenario == "restart":
		fmt.Fprintf(b.text, "target: svrpd serve (%s) as a child process, on a Badger store that bench fills first\n", b.daemonBin)
	case c.url != "":
		t, err := remoteTarget(c.url, c.allowRemote)
		if err != nil {
			fmt.Fprintf(stderr, "svrpd bench: %v\n", err)
			return 2
		}
		b.remote = t
		fmt.Fprintf(b.text, "target: %s\n", t.base)
		if !loopbackHost(t.hostname) {
			fmt.Fprintf(stderr, "svrpd bench: warning: %s is not a loopback address; this run loads another machine\n", t.hostname)
		}
	case c.spawn || c.spawnMemory:
		store := "Badger in a temporary directory"
		if c.spawnMemory {
			store = "memory store"
		}
		fmt.Fprintf(b.text, "target: svrpd serve (%s) as a child process on 127.0.0.1:0 (%s), a fresh one per scenario\n", b.daemonBin, store)
	default:
		store := "Badger in a temporary directory"
		if c.selfMemory {
			store = "memory store"
		}
		fmt.Fprintf(b.text, "target: in-process registry (svrpd serve on 127.0.0.1:0, %s), a fresh one per scenario\n", store)
	}
	b.loadBefore = loadAverage()
	if l := b.loadBefore; l != nil && *l >= 0.5 {
		fmt.Fprintf(b.text, "machine: load average %.2f on %d CPUs before the run; other work competes with the measurement\n", *l, runtime.NumCPU())
	}
	if c.scenario == "restart" {
		fmt.Fprintln(b.text)
		res, err := b.runRestart(ctx)
		if res != nil {
			b.reportRestart(res)
		}
		if err != nil {
			fmt.Fprintf(stderr, "svrpd bench: restart: %v\n", err)
			return 1
		}
		return 0
	}
	if c.ceilingTime > 0 {
		b.ceiling = measureCeiling(ctx, c.ceilingTime)
		n := runtime.NumCPU()
		fmt.Fprintf(b.text, "verify ceiling: %s Ed25519 verifies/s on %d CPUs (%s per core), measured for %s\n",
			group(b.ceiling), n, group(b.ceiling/float64(n)), c.ceilingTime)
	}
	code := 0
	for _, sc := range benchScenarios {
		if c.scenario != "all" && c.scenario != sc.name {
			continue
		}
		if ctx.Err() != nil {
			return 1
		}
		fmt.Fprintln(b.text)
		res, err := b.runScenario(ctx, sc)
		if err != nil {
			fmt.Fprintf(stderr, "svrpd bench: %s: %v\n", sc.name, err)
			code = 1
			continue
		}
		b.report(res)
		if res.Errors > 0 {
			code = 1
		}
	}
	if b.stopFailed {
		code = 1
	}
	return code
}

// lockedWriter serializes writes from several goroutines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func benchUsage(w io.Writer, fs interface{ PrintDefaults() }) {
	fmt.Fprint(w, `Usage: svrpd bench [flags]

Measures a registry: operations per second and p50/p99 latency of each scenario, next to the
machine's Ed25519 verify ceiling (one verifier per CPU, measured first; the best of four
slices of --ceiling-time), which bounds every endpoint that checks a signature.

Target. Without --url or --spawn, bench starts its own registry in this process for each
scenario, with svrpd serve's code on 127.0.0.1:0 (Badger in a temporary directory, removed
at the end; --self-memory for the memory store) and the per-address registration limit
raised so that setup can register many nodes from one address. That registry and the load
generator share one process and its CPUs, and the RSS it reports (VmRSS and VmHWM of
/proc/self/status, the resident figures after a forced garbage collection) is the whole
process: registry, store and the generator's prepared requests.

With --spawn (--spawn-memory for the memory store), bench starts svrpd serve as a child
process for each scenario instead: this executable, or --spawn-binary, on 127.0.0.1:0 with
Badger in a temporary directory and the per-address limits raised. It learns the address
from the daemon's "svrpd serving" log line, stops the daemon with SIGTERM at the end (and
kills it on any failure), and reports the daemon's own memory from /proc/<pid>/status:
VmRSS after setup, the peak of the timed window and VmRSS after it, and the growth while
serving (the window's peak less the RSS after setup). The peak is VmHWM reset as the
window begins (writing 5 to /proc/<pid>/clear_refs), so that setup's own peak does not
count; where the kernel refuses the reset it is the largest VmRSS sampled every 50 ms.
The generator keeps only the head of each answer, so a node list costs it no memory.
Lines of the daemon's log at --log-level or above are copied to stderr.

To measure a daemon started some other way, start it
(svrpd serve --register-address-limit 1000000 ...) and pass --url; bench refuses an address
that is not loopback unless --allow-remote is given. Nodes it registers there stay.

Scenarios. Every signature is made before the timed window, so signing never competes with
the registry for CPU while it is measured:
  heartbeat  registers --nodes nodes, signs one heartbeat per node, then each client cycles
             through its own share of the nodes (1 verify per operation)
  login      creates an operator (root and device keys, DeviceCredential), fetches one
             challenge per login and signs a device-login for each, then sends only
             device-logins, each challenge once (2 verifies)
  nodes      registers --nodes nodes, then GET /nodes (no verify)
  peers      registers --nodes nodes, then GET /peers (no verify)
  journey    binds a new node key per journey to one logged-in operator: initiate, resolve,
             authorize, pending, accept. All are built and signed beforehand, the acceptance
             over the digest of the authorization bench signed; only resolve is assembled
             in the window, around the short code initiate returns (8 verifies: initiate 1,
             authorize 2, pending 1, accept 4)
  restart    not part of all, since it is slow (a million nodes take one to one and a half
             minutes on two cores): fills a Badger store in a temporary directory with --nodes node
             records (default 1,000,000, at most 5,000,000) through the store API, in
             transactions of 1000 from 4 writers, then starts svrpd serve on it as with
             --spawn and times it: from exec to the "svrpd serving" line, until GET /health
             counts every node, and one GET /nodes, with the daemon's VmRSS and VmHWM at
             each step. It prints one JSON line of its own (populate_s, disk_mb, ready_s,
             health_s, daemon_rss_mb, daemon_hwm_mb, first_list_s, list_bytes,
             daemon_hwm_after_list_mb, ...) and removes the directory. It measures no
             verify ceiling and takes no --url or --self.
Login and journey first run short calibration batches to size what they prepare; if the
prepared requests run out before --duration, the window ends there and says so. Signed
timestamps and challenges are valid for 300 s, hence the limit on --duration. A window ends
at --duration or --requests, whichever comes first, plus the time the requests in flight
take to answer; duration_s is the window as it ran.

Output. Each scenario prints its figures and one JSON line (ops_per_s, p50_ms, p99_ms,
errors and errors_by_code, ceiling_verifies_per_s, fraction_of_ceiling: ops/s times verifies
per op over the ceiling, clients, nodes, duration_s; for an in-process registry rss_*_mb
and hwm_mb; with --spawn daemon_rss_ready_mb, daemon_hwm_setup_mb,
daemon_rss_peak_window_mb, daemon_rss_growth_mb, daemon_rss_end_mb, daemon_peak_source
and the generator's own generator_rss_mb and generator_hwm_mb); --json prints only the
JSON lines. An operation is one request, or one whole journey. The exit code is 1 when a
scenario could not run, any request failed, or a spawned daemon did not stop cleanly.

Every flag can also be set by an environment variable: SVRPD_ and its name in upper case,
'-' as '_' (SVRPD_URL, SVRPD_DURATION, ...). A flag on the command line wins.

Flags:
`)
	fs.PrintDefaults()
}

func (c benchConfig) validate() error {
	var errs []error
	targets := 0
	for _, given := range []bool{c.url != "", c.self || c.selfMemory, c.spawn || c.spawnMemory} {
		if given {
			targets++
		}
	}
	if targets > 1 {
		errs = append(errs, errors.New("--url, --self/--self-memory and --spawn/--spawn-memory name different targets; give one"))
	}
	if c.scenario == "restart" {
		if c.url != "" || c.self || c.selfMemory || c.spawnMemory {
			errs = append(errs, errors.New("--scenario restart starts its own daemon on a Badger store it fills; it takes no --url, --self, --self-memory or --spawn-memory"))
		}
		if c.nodes > restartMaxNodes {
			errs = append(errs, fmt.Errorf("--nodes %d: the restart scenario stores at most %d", c.nodes, restartMaxNodes))
		}
	} else if c.spawnBinary != "" && !c.spawn && !c.spawnMemory {
		errs = append(errs, errors.New("--spawn-binary is for --spawn, --spawn-memory and the restart scenario"))
	}
	known := c.scenario == "all" || c.scenario == "restart"
	for _, sc := range benchScenarios {
		known = known || c.scenario == sc.name
	}
	if !known {
		errs = append(errs, fmt.Errorf("--scenario %q: want heartbeat, login, nodes, peers, journey, all or restart", c.scenario))
	}
	if c.duration <= 0 || c.duration > benchMaxDuration {
		errs = append(errs, fmt.Errorf("--duration must be more than 0 and at most %s (signed timestamps last 300 s)", benchMaxDuration))
	}
	if c.requests < 1 {
		errs = append(errs, errors.New("--requests must be at least 1"))
	}
	if c.clients < 0 || c.clients > 4096 {
		errs = append(errs, errors.New("--clients must be from 1 to 4096 (0: the scenario's default)"))
	}
	if c.nodes < 0 || c.nodes > 10_000_000 {
		errs = append(errs, errors.New("--nodes must be from 1 to 10000000 (0: the scenario's default)"))
	}
	if c.ceilingTime < 0 {
		errs = append(errs, errors.New("--ceiling-time must not be negative"))
	}
	if err := canonical.CheckPrefix(c.prefix); err != nil {
		errs = append(errs, fmt.Errorf("--prefix: %w", err))
	}
	if _, err := daemon.ParseLevel(c.logLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// benchTarget is the registry a scenario talks to.
type benchTarget struct {
	label    string // "self-badger", "self-memory", "spawn-badger", "spawn-memory" or the URL, for the JSON line
	base     string // URL without a trailing slash
	addr     string // host:port to dial
	host     string // Host header
	hostname string
	path     string // path prefix of every endpoint, "" or "/..."
	self     bool
	daemon   *benchDaemon // the child process of --spawn
	stop     func()
}

func (t *benchTarget) endpoint(p string) string { return t.path + p }

// remoteTarget parses --url and refuses anything but loopback unless allowRemote.
func remoteTarget(raw string, allowRemote bool) (*benchTarget, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("--url %q: want http://host:port[/path]", raw)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("--url %q: bench speaks plain HTTP only (its client is part of what is kept cheap)", raw)
	}
	hostname := u.Hostname()
	if !allowRemote && !loopbackHost(hostname) {
		return nil, fmt.Errorf("--url %q is not a loopback address (127.0.0.0/8, ::1, localhost); bench loads its target hard, so pass --allow-remote to measure another machine", raw)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	return &benchTarget{
		label: strings.TrimRight(u.String(), "/"), base: strings.TrimRight(u.String(), "/"),
		addr: net.JoinHostPort(hostname, port), host: u.Host, hostname: hostname, path: path,
	}, nil
}

// loopbackHost reports whether a URL's host names this machine's loopback interface. Other
// names are refused even when they resolve to loopback: what is checked is what is typed.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// benchServeConfig is svrpd serve's configuration for an in-process registry: a free
// loopback port, and limits raised so that setup can register every node from one address.
func benchServeConfig(memory bool, dataDir, prefix, logLevel string) daemon.Config {
	return daemon.Config{
		Listen: "127.0.0.1:0", DataDir: dataDir, Memory: memory, Prefix: prefix,
		ResolveAddressLimit: 1 << 30, RegisterAddressLimit: 1 << 30,
		SweepEvery: time.Minute, LogLevel: logLevel, LogFormat: "text",
	}
}

// startSelf runs serve in this process until the returned target's stop is called.
func startSelf(ctx context.Context, memory bool, prefix, logLevel string, stderr io.Writer) (*benchTarget, error) {
	dir := ""
	label := "self-memory"
	if !memory {
		var err error
		if dir, err = os.MkdirTemp("", "svrpd-bench-"); err != nil {
			return nil, err
		}
		label = "self-badger"
	}
	cleanup := func() {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	c := benchServeConfig(memory, dir, prefix, logLevel)
	if err := c.Validate(); err != nil {
		cleanup()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- daemon.Run(sctx, c, daemon.NewLogger(stderr, logLevel, "text"), ready) }()
	select {
	case addr := <-ready:
		host, _, _ := net.SplitHostPort(addr)
		return &benchTarget{
			label: label, base: "http://" + addr, addr: addr, host: addr, hostname: host, self: true,
			stop: func() {
				cancel()
				<-done
				cleanup()
			},
		}, nil
	case err := <-done:
		cancel()
		cleanup()
		if err == nil {
			err = errors.New("the in-process registry stopped before serving")
		}
		return nil, err
	}
}

// measureCeiling runs one Ed25519 verifier per CPU for d and returns verifies per second:
// the best of four equal slices, since other work on the machine can only lower a slice's
// rate, never raise it.
func measureCeiling(ctx context.Context, d time.Duration) float64 {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return 0
	}
	// About the size of a heartbeat or login message.
	msg := []byte(strings.Repeat("service-node-heartbeat:v1\ndid:svrp:n:0123abcd\n1767225600\n", 3)[:150])
	sig := ed25519.Sign(priv, msg)
	n := runtime.NumCPU()
	const slices = 4
	best := 0.0
	for range slices {
		counts := make([]int64, n)
		var wg sync.WaitGroup
		start := time.Now()
		end := start.Add(d / slices)
		for g := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var c int64
				for ctx.Err() == nil {
					for range 32 {
						if !ed25519.Verify(pub, msg, sig) {
							return
						}
					}
					c += 32
					if time.Now().After(end) {
						break
					}
				}
				counts[g] = c
			}()
		}
		wg.Wait()
		var total int64
		for _, c := range counts {
			total += c
		}
		best = max(best, float64(total)/time.Since(start).Seconds())
	}
	return best
}

// bench runs scenarios and reports them.
type bench struct {
	cfg     benchConfig
	stdout  io.Writer
	stderr  io.Writer
	text    io.Writer // the readable report; io.Discard with --json
	remote  *benchTarget
	ceiling float64
	// loadBefore is the machine's load average before bench began; later readings would
	// count bench's own earlier scenarios.
	loadBefore *float64
	daemonBin  string // the svrpd binary --spawn and restart start
	stopFailed bool   // a spawned daemon did not stop cleanly
}

// benchStep is one step's latency in a journey.
type benchStep struct {
	Step  string  `json:"step"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// benchResult is one scenario's figures, and its JSON line.
type benchResult struct {
	Scenario            string           `json:"scenario"`
	Target              string           `json:"target"`
	OpsPerS             float64          `json:"ops_per_s"`
	Ops                 int64            `json:"ops"`
	RequestsPerS        float64          `json:"requests_per_s"`
	Requests            int64            `json:"requests"`
	P50ms               float64          `json:"p50_ms"`
	P99ms               float64          `json:"p99_ms"`
	Errors              int64            `json:"errors"`
	ErrorsByCode        map[string]int64 `json:"errors_by_code"`
	CeilingVerifiesPerS float64          `json:"ceiling_verifies_per_s"`
	VerifiesPerOp       int              `json:"verifies_per_op"`
	FractionOfCeiling   *float64         `json:"fraction_of_ceiling"`
	Clients             int              `json:"clients"`
	Nodes               int              `json:"nodes"`
	Listed              *int             `json:"listed,omitempty"`
	DurationS           float64          `json:"duration_s"`
	SetupS              float64          `json:"setup_s"`
	Prepared            int              `json:"prepared"`
	Stopped             string           `json:"stopped"`
	Steps               []benchStep      `json:"steps,omitempty"`
	// The daemon's memory with --spawn: its resident set after setup and the peak setup
	// reached, then the peak of the timed window and the resident set after it.
	DaemonRSSReadyMB      *float64 `json:"daemon_rss_ready_mb,omitempty"`
	DaemonHWMSetupMB      *float64 `json:"daemon_hwm_setup_mb,omitempty"`
	DaemonRSSPeakWindowMB *float64 `json:"daemon_rss_peak_window_mb,omitempty"`
	DaemonRSSGrowthMB     *float64 `json:"daemon_rss_growth_mb,omitempty"`
	DaemonRSSEndMB        *float64 `json:"daemon_rss_end_mb,omitempty"`
	// DaemonPeakSource is "vmhwm" when the window's peak is VmHWM reset at its start, or
	// "sampled" when the reset was refused and the peak is the largest VmRSS sampled.
	DaemonPeakSource      string   `json:"daemon_peak_source,omitempty"`
	DaemonRSSSampledMaxMB *float64 `json:"daemon_rss_sampled_max_mb,omitempty"`
	GeneratorRSSMB        *float64 `json:"generator_rss_mb,omitempty"`
	GeneratorHWMMB        *float64 `json:"generator_hwm_mb,omitempty"`
	RSSStartMB            *float64 `json:"rss_start_mb,omitempty"`
	RSSReadyMB            *float64 `json:"rss_ready_mb,omitempty"`
	RSSEndMB              *float64 `json:"rss_end_mb,omitempty"`
	HWMMB                 *float64 `json:"hwm_mb,omitempty"`
	CPUs                  int      `json:"cpus"`
	LoadBefore            *float64 `json:"load_avg_before,omitempty"`
}

// benchRun is one scenario in progress: its target, its connections and what it found.
type benchRun struct {
	b       *bench
	ctx     context.Context
	sc      benchScenario
	t       *benchTarget
	res     *benchResult
	workers []*worker
	say     func(format string, args ...any)
}

func (b *bench) runScenario(ctx context.Context, sc benchScenario) (*benchResult, error) {
	clients, nodes := sc.clients, sc.nodes
	if b.cfg.clients > 0 {
		clients = b.cfg.clients
	}
	if nodes > 0 && b.cfg.nodes > 0 {
		nodes = b.cfg.nodes
	}
	if sc.name == "heartbeat" && nodes < clients {
		// Each client heartbeats its own share of the nodes.
		clients = nodes
	}
	t := b.remote
	switch {
	case t != nil:
	case b.cfg.spawn || b.cfg.spawnMemory:
		var err error
		if t, err = b.startSpawned(ctx); err != nil {
			return nil, fmt.Errorf("starting the daemon: %w", err)
		}
		defer t.stop()
	default:
		var err error
		if t, err = startSelf(ctx, b.cfg.selfMemory, b.cfg.prefix, b.cfg.logLevel, b.stderr); err != nil {
			return nil, fmt.Errorf("starting the in-process registry: %w", err)
		}
		defer t.stop()
	}
	r := &benchRun{
		b: b, ctx: ctx, sc: sc, t: t,
		res: &benchResult{
			Scenario: sc.name, Target: t.label, ErrorsByCode: map[string]int64{},
			CeilingVerifiesPerS: math.Round(b.ceiling), VerifiesPerOp: sc.verifies,
			Clients: clients, Nodes: nodes, CPUs: runtime.NumCPU(), LoadBefore: b.loadBefore,
		},
		say: func(format string, args ...any) {
			fmt.Fprintf(b.text, sc.name+": "+format+"\n", args...)
		},
	}
	if t.self {
		r.say("target %s (in-process, %s)", t.base, strings.TrimPrefix(t.label, "self-"))
		r.res.RSSStartMB, _ = rssMB()
	}
	if t.daemon != nil {
		r.say("target %s (svrpd serve, pid %d, %s)", t.base, t.daemon.pid, strings.TrimPrefix(t.label, "spawn-"))
	}
	defer func() {
		for _, w := range r.workers {
			w.conn.close()
		}
	}()
	if err := r.dial(clients); err != nil {
		return nil, err
	}
	setupStart := time.Now()
	var op func(w *worker) bool
	var err error
	switch sc.name {
	case "heartbeat":
		op, err = r.heartbeat(nodes)
	case "login":
		op, err = r.login()
	case "nodes":
		op, err = r.listing(nodes, "/nodes")
	case "peers":
		op, err = r.listing(nodes, "/peers")
	case "journey":
		op, err = r.journey()
	}
	if err != nil {
		return nil, err
	}
	r.res.SetupS = round(time.Since(setupStart).Seconds(), 2)
	if t.self {
		r.res.RSSReadyMB, _ = rssMB()
	}
	var watch *peakWatch
	if t.daemon != nil {
		m, err := t.daemon.memory()
		if err != nil {
			return nil, err
		}
		r.res.DaemonRSSReadyMB, r.res.DaemonHWMSetupMB = &m.rss, &m.hwm
		watch = t.daemon.watchPeak(m)
	}
	err = r.window(op)
	if watch != nil {
		peak, now, source, sampled, werr := watch.finish()
		if werr != nil && err == nil {
			err = fmt.Errorf("the daemon after the run: %w%s", werr, t.daemon.tailText())
		}
		if werr == nil {
			growth := round(peak-*r.res.DaemonRSSReadyMB, 1)
			r.res.DaemonRSSPeakWindowMB, r.res.DaemonRSSEndMB, r.res.DaemonRSSGrowthMB = &peak, &now.rss, &growth
			r.res.DaemonPeakSource, r.res.DaemonRSSSampledMaxMB = source, &sampled
		}
		r.res.GeneratorRSSMB, r.res.GeneratorHWMMB = rssMB()
	}
	if err != nil {
		return nil, err
	}
	if t.self {
		var hwm *float64
		r.res.RSSEndMB, hwm = rssMB()
		r.res.HWMMB = hwm
	}
	return r.res, nil
}

// startSpawned starts svrpd serve as a child process until the returned target's stop is
// called.
func (b *bench) startSpawned(ctx context.Context) (*benchTarget, error) {
	memory := b.cfg.spawnMemory
	dir, label := "", "spawn-memory"
	if !memory {
		var err error
		if dir, err = os.MkdirTemp("", "svrpd-bench-"); err != nil {
			return nil, err
		}
		label = "spawn-badger"
	}
	cleanup := func() {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	level, _ := daemon.ParseLevel(b.cfg.logLevel)
	d, err := spawnDaemon(ctx, b.daemonBin, daemonArgs(memory, dir, b.cfg.prefix), b.stderr, level, daemonServeTimeout)
	if err != nil {
		cleanup()
		return nil, err
	}
	host, _, _ := net.SplitHostPort(d.addr)
	return &benchTarget{
		label: label, base: "http://" + d.addr, addr: d.addr, host: d.addr, hostname: host, daemon: d,
		stop: func() {
			if err := d.stop(); err != nil {
				fmt.Fprintf(b.stderr, "svrpd bench: %v\n", err)
				b.stopFailed = true
			}
			cleanup()
		},
	}, nil
}

// dial opens one connection per client.
func (r *benchRun) dial(n int) error {
	r.workers = make([]*worker, n)
	for i := range r.workers {
		c, err := dialBench(r.t.addr)
		if err != nil {
			for _, w := range r.workers[:i] {
				w.conn.close()
			}
			r.workers = nil
			return fmt.Errorf("connecting to %s: %w", r.t.base, err)
		}
		r.workers[i] = &worker{id: i, conn: c, stats: newWorkerStats(len(journeySteps))}
	}
	return nil
}

// window runs op on every client until the duration, the request budget or the prepared
// requests end, then gathers the figures.
func (r *benchRun) window(op func(w *worker) bool) error {
	for _, w := range r.workers {
		// Connections idle through the preparation may have been closed by the server;
		// fresh ones keep that from counting as failures.
		if err := w.conn.redial(); err != nil {
			return fmt.Errorf("connecting to %s: %w", r.t.base, err)
		}
		w.stats = newWorkerStats(len(journeySteps))
	}
	var stop, exhausted, budgetSpent atomic.Bool
	var left atomic.Int64
	left.Store(r.b.cfg.requests)
	timer := time.AfterFunc(r.b.cfg.duration, func() { stop.Store(true) })
	defer timer.Stop()
	unwatch := context.AfterFunc(r.ctx, func() { stop.Store(true) })
	defer unwatch()
	stopProfile, err := r.b.startProfile()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	start := time.Now()
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if left.Add(-1) < 0 {
					budgetSpent.Store(true)
					return
				}
				if !op(w) {
					exhausted.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProfile()

	res := r.res
	switch {
	case r.ctx.Err() != nil:
		res.Stopped = "interrupted"
	case exhausted.Load():
		res.Stopped = "prepared"
	case budgetSpent.Load():
		res.Stopped = "requests"
	default:
		res.Stopped = "duration"
	}
	total := newWorkerStats(len(journeySteps))
	for _, w := range r.workers {
		total.add(&w.stats)
	}
	secs := elapsed.Seconds()
	res.DurationS = round(secs, 3)
	res.Ops, res.Requests = total.ok, total.requests
	res.OpsPerS = round(float64(total.ok)/secs, 1)
	res.RequestsPerS = round(float64(total.requests)/secs, 1)
	res.P50ms = ms(total.hist.quantile(0.50))
	res.P99ms = ms(total.hist.quantile(0.99))
	for code, n := range total.errs {
		res.Errors += n
		res.ErrorsByCode[code] = n
	}
	if r.sc.name == "journey" {
		for i, name := range journeySteps {
			h := &total.steps[i]
			res.Steps = append(res.Steps, benchStep{Step: name, P50ms: ms(h.quantile(0.50)), P99ms: ms(h.quantile(0.99))})
		}
	}
	if r.sc.verifies > 0 && r.b.ceiling > 0 {
		f := round(res.OpsPerS*float64(r.sc.verifies)/r.b.ceiling, 3)
		res.FractionOfCeiling = &f
	}
	return nil
}

// worker is one client: a connection, a scratch buffer and its own tallies, so the timed
// loop shares nothing with other clients but the stop flag and the budget.
type worker struct {
	id    int
	conn  *benchConn
	buf   []byte
	next  int
	stats workerStats
}

type workerStats struct {
	hist     histogram
	steps    []histogram
	ok       int64
	requests int64
	errs     map[string]int64
}

func newWorkerStats(steps int) workerStats {
	return workerStats{steps: make([]histogram, steps), errs: map[string]int64{}}
}

func (s *workerStats) add(o *workerStats) {
	s.hist.add(&o.hist)
	for i := range s.steps {
		s.steps[i].add(&o.steps[i])
	}
	s.ok += o.ok
	s.requests += o.requests
	for k, v := range o.errs {
		s.errs[k] += v
	}
}

// send makes one request and records its latency in h when it succeeds; a failure is
// tallied by status and code instead.
func (w *worker) send(req []byte, h *histogram) bool {
	t0 := time.Now()
	status, err := w.conn.roundTrip(req, t0)
	w.stats.requests++
	if err != nil {
		w.stats.errs[transportKind(err)]++
		// A registry that went away would otherwise be hammered with dials.
		time.Sleep(5 * time.Millisecond)
		return false
	}
	if status < 200 || status > 299 {
		w.stats.errs[answerCode(status, w.conn.body)]++
		return false
	}
	if h != nil {
		h.record(time.Since(t0))
	}
	return true
}

func transportKind(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "transport: timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "transport: connection closed"
	case errors.Is(err, errMalformedAnswer):
		return "transport: malformed answer"
	}
	return "transport: " + err.Error()
}

// parallel runs fn(g, i) for every i in [0, n) on the given number of goroutines, g
// numbering the goroutine so that each can use a connection of its own. It stops at the
// first error and returns it.
func parallel(ctx context.Context, n, goroutines int, fn func(g, i int) error) error {
	if goroutines < 1 {
		goroutines = 1
	}
	var next atomic.Int64
	var failed atomic.Bool
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				err := ctx.Err()
				if err == nil {
					err = fn(g, i)
				}
				if err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// setupConcurrency is the fewest connections setup uses, whatever --clients says, so that
// registering many nodes for a run with few clients does not wait on one write at a time.
const setupConcurrency = 32

// setupWorkers returns the run's workers, and more when there are fewer than
// setupConcurrency; done closes the extra ones.
func (r *benchRun) setupWorkers() ([]*worker, func(), error) {
	ws := append([]*worker(nil), r.workers...)
	closeExtra := func() {
		for _, w := range ws[len(r.workers):] {
			w.conn.close()
		}
	}
	for len(ws) < setupConcurrency {
		c, err := dialBench(r.t.addr)
		if err != nil {
			closeExtra()
			return nil, nil, fmt.Errorf("connecting to %s: %w", r.t.base, err)
		}
		ws = append(ws, &worker{id: len(ws), conn: c})
	}
	return ws, closeExtra, nil
}

// benchNode is a node the bench registered: its key and the DID it registered under.
type benchNode struct {
	priv ed25519.PrivateKey
	key  didkey.PublicKey
	did  string
}

func newBenchNode() (benchNode, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return benchNode{}, err
	}
	k, err := didkey.KeyFromEd25519(pub)
	if err != nil {
		return benchNode{}, err
	}
	d, err := didkey.NodeDID(k, didkey.FormShort)
	if err != nil {
		return benchNode{}, err
	}
	return benchNode{priv: priv, key: k, did: d.String()}, nil
}

// registerNodes registers n new nodes, signed, over the run's connections.
func (r *benchRun) registerNodes(n int) ([]benchNode, error) {
	start := time.Now()
	nodes := make([]benchNode, n)
	ws, done, err := r.setupWorkers()
	if err != nil {
		return nil, err
	}
	defer done()
	err = parallel(r.ctx, n, len(ws), func(g, i int) error {
		nd, err := newBenchNode()
		if err != nil {
			return err
		}
		if err := r.register(ws[g], &nd, i); err != nil {
			return err
		}
		nodes[i] = nd
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.note("registered %s nodes in %.1fs", group(float64(n)), time.Since(start).Seconds())
	return nodes, nil
}

func (r *benchRun) register(w *worker, nd *benchNode, i int) error {
	endpoint := fmt.Sprintf("10.%d.%d.%d:9000", i>>16&0xff, i>>8&0xff, i&0xff)
	caps := []string{"inference"}
	for attempt := 0; ; attempt++ {
		sig, err := canonical.Sign(nd.priv, r.b.cfg.prefix, canonical.Register{
			DID: nd.did, PublicKey: nd.key.Base58(), Endpoint: endpoint, Capabilities: caps, Region: "bench",
		})
		if err != nil {
			return err
		}
		body, err := json.Marshal(registry.RegisterRequest{
			DID: nd.did, PublicKey: nd.key.Hex(), Endpoint: endpoint, Capabilities: caps, Region: "bench", Signature: &sig,
		})
		if err != nil {
			return err
		}
		w.buf = appendRequest(w.buf[:0], "POST", r.t.host, r.t.endpoint("/api/v1/register"), "", body)
		status, err := w.conn.roundTrip(w.buf, time.Now())
		if err != nil {
			return fmt.Errorf("registering a node: %w", err)
		}
		code := answerCode(status, w.conn.body)
		switch {
		case status == http.StatusOK && !bytes.Contains(w.conn.body, []byte(`"signed":true`)):
			return errors.New("the registry recorded a registration without verifying its signature: is --prefix the registry's?")
		case status == http.StatusOK:
			return nil
		case code == "409 DID_COLLISION" && attempt == 0:
			// Another key holds this short body: the node takes its 10-hex form, as the
			// profile tells a colliding node to.
			d, err := didkey.NodeDID(nd.key, didkey.FormFallback)
			if err != nil {
				return err
			}
			nd.did = d.String()
		case status == http.StatusTooManyRequests:
			return fmt.Errorf("registering a node: %s: the registry limits new node keys per client address; start it with a larger --register-address-limit, or run bench without --url", code)
		default:
			return fmt.Errorf("registering a node: %s", code)
		}
	}
}

// heartbeat prepares one signed heartbeat per node; client i cycles through nodes i, i+C,
// i+2C, ... so no two clients heartbeat one node at once.
func (r *benchRun) heartbeat(n int) (func(w *worker) bool, error) {
	nodes, err := r.registerNodes(n)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ts := time.Now().Unix()
	reqs := make([][]byte, n)
	err = parallel(r.ctx, n, runtime.NumCPU(), func(_, i int) error {
		nd := nodes[i]
		sig, err := canonical.Sign(nd.priv, r.b.cfg.prefix, canonical.Heartbeat{DID: nd.did, TS: ts})
		if err != nil {
			return err
		}
		pub := nd.key.Hex()
		body, err := json.Marshal(registry.HeartbeatRequest{DID: nd.did, TS: ts, Signature: sig, PublicKey: &pub})
		if err != nil {
			return err
		}
		reqs[i] = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/api/v1/heartbeat"), "", body)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.note("signed %s heartbeats in %.1fs", group(float64(n)), time.Since(start).Seconds())
	r.res.Prepared = n
	c := len(r.workers)
	return func(w *worker) bool {
		i := w.id + w.next*c
		if i >= n {
			w.next, i = 0, w.id
		}
		w.next++
		if w.send(reqs[i], &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}, nil
}

// benchOperator is an operator identity made for the run.
type benchOperator struct {
	device ed25519.PrivateKey
	cred   authn.DeviceCredential
	credJS []byte
}

func newBenchOperator(prefix string) (benchOperator, error) {
	_, root, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return benchOperator{}, err
	}
	devPub, dev, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return benchOperator{}, err
	}
	dc, err := client.IssueDeviceCredential(root, devPub, client.CredentialOptions{Prefix: prefix})
	if err != nil {
		return benchOperator{}, err
	}
	js, err := json.Marshal(dc)
	if err != nil {
		return benchOperator{}, err
	}
	return benchOperator{device: dev, cred: dc, credJS: js}, nil
}

// preparedLogin is one device-login: the challenge and the signature over it. The rest of
// the body is the same for every login and is assembled into the client's buffer.
type preparedLogin struct {
	challenge, signature string
}

// login prepares device-logins, each on its own challenge.
func (r *benchRun) login() (func(w *worker) bool, error) {
	op, err := newBenchOperator(r.b.cfg.prefix)
	if err != nil {
		return nil, err
	}
	issued := canonical.FormatTime(time.Now().UTC())
	path := r.t.endpoint("/v1/auth/device-login")
	head := []byte(`{"device_credential":` + string(op.credJS) + `,"challenge":"`)
	mid := []byte(`","issued_at":"` + issued + `","signature":"`)
	tail := []byte(`"}`)
	prepare := func(k int) ([]preparedLogin, error) {
		chs, err := r.challenges(k)
		if err != nil {
			return nil, err
		}
		out := make([]preparedLogin, k)
		err = parallel(r.ctx, k, runtime.NumCPU(), func(_, i int) error {
			sig, err := canonical.Sign(op.device, r.b.cfg.prefix, canonical.Login{
				OperatorDID: op.cred.OperatorDID, DevicePublicKey: op.cred.DevicePublicKey, Challenge: chs[i], IssuedAt: issued,
			})
			out[i] = preparedLogin{challenge: chs[i], signature: sig}
			return err
		})
		return out, err
	}
	var logins []preparedLogin
	var next atomic.Int64
	send := func(w *worker) bool {
		i := int(next.Add(1) - 1)
		if i >= len(logins) {
			return false
		}
		l := logins[i]
		n := len(head) + len(l.challenge) + len(mid) + len(l.signature) + len(tail)
		w.buf = appendHead(w.buf[:0], "POST", r.t.host, path, "", n)
		w.buf = append(w.buf, head...)
		w.buf = append(w.buf, l.challenge...)
		w.buf = append(w.buf, mid...)
		w.buf = append(w.buf, l.signature...)
		w.buf = append(w.buf, tail...)
		if w.send(w.buf, &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}
	err = r.calibrate(8, benchMaxLogins, func(k int) error {
		logins, err = prepare(k)
		next.Store(0)
		return err
	}, send, "fetched %s challenges and signed a device-login for each in %.1fs")
	if err != nil {
		return nil, err
	}
	return send, nil
}

// challenges fetches k login challenges over the run's connections.
func (r *benchRun) challenges(k int) ([]string, error) {
	req := appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/auth/challenge"), "", nil)
	out := make([]string, k)
	ws, done, err := r.setupWorkers()
	if err != nil {
		return nil, err
	}
	defer done()
	err = parallel(r.ctx, k, len(ws), func(g, i int) error {
		w := ws[g]
		status, err := w.conn.roundTrip(req, time.Now())
		if err != nil {
			return fmt.Errorf("fetching a challenge: %w", err)
		}
		ch, ok := jsonStringField(w.conn.body, "challenge")
		if status != http.StatusOK || !ok {
			return fmt.Errorf("fetching a challenge: %s", answerCode(status, w.conn.body))
		}
		out[i] = string(ch)
		return nil
	})
	return out, err
}

// calibrate sizes what a scenario prepares for its window, then prepares it. It prepares a
// batch (perClient per client), runs it untimed, and repeats with a batch sized to take
// calibrationTime at the rate just seen, until a batch after the first takes that long: a
// cold registry is slower than a warm one, and the window is sized from the warm rate. It
// then prepares the rate over the duration, with a margin, within the request budget and
// limit, and reports it with what (a format taking the count and the seconds it took). The
// batches also warm the registry up.
func (r *benchRun) calibrate(perClient, limit int, prepare func(k int) error, op func(w *worker) bool, what string) error {
	const calibrationTime = 300 * time.Millisecond
	budget := min(r.b.cfg.requests, int64(limit))
	batch := min(max(int64(perClient*len(r.workers)), 32), budget)
	var rate float64
	var ran int64
	for round := 0; ; round++ {
		if err := prepare(int(batch)); err != nil {
			return err
		}
		ok, elapsed, err := r.untimed(op)
		if err != nil {
			return fmt.Errorf("calibration: %w", err)
		}
		rate, ran = float64(ok)/elapsed.Seconds(), ok
		// The first round is taken cold; a later one decides.
		if (round > 0 && elapsed >= calibrationTime) || batch >= budget || round == 3 {
			break
		}
		next := int64(rate * calibrationTime.Seconds() * 1.2)
		batch = min(max(next, 2*batch), budget)
	}
	need := int64(rate*r.b.cfg.duration.Seconds()*benchMargin) + int64(16*len(r.workers))
	k := int(min(need, budget))
	r.note("calibrated at %s ops/s on %s operations", group(rate), group(float64(ran)))
	start := time.Now()
	if err := prepare(k); err != nil {
		return err
	}
	r.note(what, group(float64(k)), time.Since(start).Seconds())
	r.res.Prepared = k
	return nil
}

// untimed runs op on every client until it reports nothing left, and fails if any
// operation did.
func (r *benchRun) untimed(op func(w *worker) bool) (int64, time.Duration, error) {
	for _, w := range r.workers {
		w.stats = newWorkerStats(len(journeySteps))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.ctx.Err() == nil && op(w) {
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := newWorkerStats(len(journeySteps))
	for _, w := range r.workers {
		total.add(&w.stats)
	}
	if err := r.ctx.Err(); err != nil {
		return 0, 0, err
	}
	if len(total.errs) > 0 {
		var failed int64
		for _, n := range total.errs {
			failed += n
		}
		return 0, 0, fmt.Errorf("%d operations failed (%s)", failed, errorText(total.errs))
	}
	return total.ok, elapsed, nil
}

// listing registers n nodes and lists them with GET path.
func (r *benchRun) listing(n int, path string) (func(w *worker) bool, error) {
	if _, err := r.registerNodes(n); err != nil {
		return nil, err
	}
	listed, err := r.count(path)
	if err != nil {
		return nil, err
	}
	r.res.Listed = &listed
	r.note("GET %s lists %s nodes", path, group(float64(listed)))
	r.res.Prepared = 1
	req := appendRequest(nil, "GET", r.t.host, r.t.endpoint(path), "", nil)
	return func(w *worker) bool {
		if w.send(req, &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}, nil
}

// count reads one listing and counts its nodes, so the figures say how big the answers
// were (an existing registry may hold more than bench registered). It reads the answer as
// the timed requests do, keeping only its head, so a listing of any size is never held
// whole by the generator.
func (r *benchRun) count(path string) (int, error) {
	c, err := dialBench(r.t.addr)
	if err != nil {
		return 0, fmt.Errorf("connecting to %s: %w", r.t.base, err)
	}
	defer c.close()
	c.countLines = path == "/peers"
	req := appendRequest(nil, "GET", r.t.host, r.t.endpoint(path), "", nil)
	status, err := c.roundTrip(req, time.Now())
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", path, answerCode(status, c.body))
	}
	if c.countLines {
		return int(c.lines), nil
	}
	n, ok := jsonIntField(c.body, "count")
	if !ok {
		return 0, fmt.Errorf("GET %s: no count at the head of the answer", path)
	}
	return int(n), nil
}

// preparedJourney is one binding journey, signed but for resolve, which needs the short
// code initiate returns.
type preparedJourney struct {
	initiate, authorize, pending, accept []byte
}

// journey prepares binding journeys, each with a new node key, for one logged-in operator.
// The acceptance is signed beforehand too: its authorization_digest is the SHA-256 of the
// authorization bench itself signed.
func (r *benchRun) journey() (func(w *worker) bool, error) {
	op, err := newBenchOperator(r.b.cfg.prefix)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(r.t.base, client.WithPrefix(r.b.cfg.prefix))
	if err != nil {
		return nil, err
	}
	session, err := cl.Login(r.ctx, op.device, op.cred)
	if err != nil {
		return nil, fmt.Errorf("logging the operator in: %w", err)
	}
	token := session.Token
	var idBytes [6]byte
	if _, err := rand.Read(idBytes[:]); err != nil {
		return nil, err
	}
	runID := hex.EncodeToString(idBytes[:])
	single, grantSingle, grantDaily := 10.0, 5.0, 50.0
	tasks := []string{"inference"}
	prefix := r.b.cfg.prefix
	var seq atomic.Int64
	build := func(now time.Time) (preparedJourney, error) {
		var pj preparedJourney
		nd, err := newBenchNode()
		if err != nil {
			return pj, err
		}
		id := fmt.Sprintf("bench-%s-%d", runID, seq.Add(1))
		at := canonical.FormatTime(now)
		ini := binding.InitiateRequest{BindingSession: canonical.BindingSession{
			BindingSessionID: id, NodeDID: nd.did, NodePublicKey: nd.key.Base58(),
			DeviceSummary: "bench", OS: "linux", Region: "bench",
			RequestedTaskTypes: tasks, RequestedSingleLimit: &single,
			Nonce: "nonce-" + id, CreatedAt: at, ExpiresAt: canonical.FormatTime(now.Add(client.MaxSessionTTL)),
		}}
		if ini.NodeSignature, err = canonical.Sign(nd.priv, prefix, ini.BindingSession); err != nil {
			return pj, err
		}
		az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
			BindingSessionID: id, NodeDID: nd.did, OperatorDID: op.cred.OperatorDID,
			TaskTypes: tasks, SingleLimit: &grantSingle, DailyLimit: &grantDaily,
			RevocationID: "rev-" + id, IssuedAt: at, ExpiresAt: canonical.FormatTime(now.Add(time.Hour)),
		}}
		if az.Signature, err = canonical.Sign(op.device, prefix, az.Authorization); err != nil {
			return pj, err
		}
		poll := registry.PendingRequest{NodeDID: nd.did, NodePublicKey: nd.key.Base58(), TS: now.Unix()}
		if poll.Signature, err = canonical.Sign(nd.priv, prefix, canonical.Poll{NodeDID: nd.did, TS: poll.TS}); err != nil {
			return pj, err
		}
		digest, err := az.Digest(prefix)
		if err != nil {
			return pj, err
		}
		acc := binding.Acceptance{Acceptance: canonical.Acceptance{
			BindingSessionID: id, NodeDID: nd.did, OperatorDID: op.cred.OperatorDID,
			AuthorizationDigest: digest, Accepted: true, IssuedAt: at,
		}}
		if acc.Signature, err = canonical.Sign(nd.priv, prefix, acc.Acceptance); err != nil {
			return pj, err
		}
		bodies := make([][]byte, 4)
		for i, v := range []any{ini, registry.AuthorizeRequest{BindingSessionID: id, DeviceCredential: op.cred, AuthorizationCredential: az}, poll, registry.AcceptanceRequest{Acceptance: acc}} {
			if bodies[i], err = json.Marshal(v); err != nil {
				return pj, err
			}
		}
		pj.initiate = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/bindings/initiate"), "", bodies[0])
		pj.authorize = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/bindings/authorize"), token, bodies[1])
		pj.pending = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/node/bindings/pending"), "", bodies[2])
		pj.accept = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/node/bindings/"+url.PathEscape(id)+"/accept"), "", bodies[3])
		return pj, nil
	}
	prepare := func(k int) ([]preparedJourney, error) {
		now := time.Now().UTC().Truncate(time.Second)
		out := make([]preparedJourney, k)
		err := parallel(r.ctx, k, runtime.NumCPU(), func(_, i int) error {
			var err error
			out[i], err = build(now)
			return err
		})
		return out, err
	}

	resolvePath := r.t.endpoint("/v1/bindings/resolve")
	var journeys []preparedJourney
	var next atomic.Int64
	send := func(w *worker) bool {
		i := int(next.Add(1) - 1)
		if i >= len(journeys) {
			return false
		}
		pj := &journeys[i]
		steps := w.stats.steps
		start := time.Now()
		if !w.send(pj.initiate, &steps[0]) {
			return true
		}
		code, ok := jsonStringField(w.conn.body, "short_code")
		if !ok {
			w.stats.errs["200 initiate answer without short_code"]++
			return true
		}
		w.buf = appendHead(w.buf[:0], "POST", r.t.host, resolvePath, token, len(`{"short_code":""}`)+len(code))
		w.buf = append(w.buf, `{"short_code":"`...)
		w.buf = append(w.buf, code...)
		w.buf = append(w.buf, `"}`...)
		if !w.send(w.buf, &steps[1]) || !w.send(pj.authorize, &steps[2]) ||
			!w.send(pj.pending, &steps[3]) || !w.send(pj.accept, &steps[4]) {
			return true
		}
		w.stats.hist.record(time.Since(start))
		w.stats.ok++
		return true
	}
	err = r.calibrate(4, benchMaxJourneys, func(k int) error {
		journeys, err = prepare(k)
		next.Store(0)
		return err
	}, send, "signed %s journeys (a node key, initiate, authorization, poll and acceptance each) in %.1fs")
	if err != nil {
		return nil, err
	}
	return send, nil
}

// note reports a setup step as it completes, since setup can take longer than the window.
func (r *benchRun) note(format string, args ...any) {
	r.say(format, args...)
}

// report prints a scenario's figures as text, unless --json, and as one JSON line.
func (b *bench) report(res *benchResult) {
	say := func(format string, args ...any) {
		fmt.Fprintf(b.text, res.Scenario+": "+format+"\n", args...)
	}
	say("setup took %.1fs", res.SetupS)
	stopped := map[string]string{
		"duration":    "",
		"requests":    " (stopped at --requests)",
		"prepared":    " (stopped early: every prepared request was used; the calibration underestimated the rate)",
		"interrupted": " (interrupted)",
	}[res.Stopped]
	clients := "clients"
	if res.Clients == 1 {
		clients = "client"
	}
	say("%s ops/s for %.1fs with %d %s%s", group(res.OpsPerS), res.DurationS, res.Clients, clients, stopped)
	if res.Scenario == "journey" {
		say("%s journeys, %s requests (%s requests/s)", group(float64(res.Ops)), group(float64(res.Requests)), group(res.RequestsPerS))
	} else {
		say("%s ok of %s requests", group(float64(res.Ops)), group(float64(res.Requests)))
	}
	say("latency p50 %.2f ms, p99 %.2f ms", res.P50ms, res.P99ms)
	for _, s := range res.Steps {
		say("  %-10s p50 %.2f ms, p99 %.2f ms", s.Step, s.P50ms, s.P99ms)
	}
	if res.Errors == 0 {
		say("errors: none")
	} else {
		say("errors: %d (%s)", res.Errors, errorText(res.ErrorsByCode))
	}
	switch {
	case res.VerifiesPerOp == 0:
		say("fraction of the verify ceiling: n/a (no signature to verify)")
	case res.FractionOfCeiling == nil:
		say("fraction of the verify ceiling: not measured (--ceiling-time 0)")
	default:
		unit := "verifies"
		if res.VerifiesPerOp == 1 {
			unit = "verify"
		}
		say("%s ops/s = %.2f of the verify ceiling (%s verifies/s; %d %s per op)",
			group(res.OpsPerS), *res.FractionOfCeiling, group(res.CeilingVerifiesPerS), res.VerifiesPerOp, unit)
	}
	if res.DaemonRSSReadyMB != nil && res.DaemonHWMSetupMB != nil && res.DaemonRSSPeakWindowMB != nil && res.DaemonRSSEndMB != nil && res.DaemonRSSGrowthMB != nil {
		how := "VmHWM, reset as the window began"
		if res.DaemonPeakSource == "sampled" {
			how = "the largest VmRSS sampled every 50 ms; the kernel refused to reset VmHWM"
		}
		say("daemon RSS %.0f MB after setup (setup peaked at %.0f MB), %.0f MB after the run", *res.DaemonRSSReadyMB, *res.DaemonHWMSetupMB, *res.DaemonRSSEndMB)
		say("daemon RSS peak in the window %.0f MB (%s): grew %.0f MB while serving", *res.DaemonRSSPeakWindowMB, how, *res.DaemonRSSGrowthMB)
	}
	if res.GeneratorRSSMB != nil && res.GeneratorHWMMB != nil {
		say("generator RSS %.0f MB, peak %.0f MB (bench's own process)", *res.GeneratorRSSMB, *res.GeneratorHWMMB)
	}
	if res.RSSStartMB != nil && res.RSSReadyMB != nil && res.RSSEndMB != nil && res.HWMMB != nil {
		say("RSS %.0f MB at start, %.0f MB after setup, %.0f MB after the run, peak %.0f MB (the whole process: registry, store and generator)",
			*res.RSSStartMB, *res.RSSReadyMB, *res.RSSEndMB, *res.HWMMB)
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(b.stderr, "svrpd bench: encoding the result: %v\n", err)
		return
	}
	fmt.Fprintf(b.stdout, "%s\n", line)
}

func errorText(errs map[string]int64) string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return errs[keys[i]] > errs[keys[j]] || (errs[keys[i]] == errs[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, errs[k])
	}
	return strings.Join(parts, ", ")
}

// rssMB returns this process's resident set and its peak, in MB, after returning free
// memory to the system, so the resident figure is memory in use rather than garbage that
// has not been collected yet. It returns nils where /proc is not available.
func rssMB() (rss, hwm *float64) {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, nil
	}
	return parseStatus(b)
}

// loadAverage returns the machine's one-minute load average, or nil where /proc is not
// available: a busy machine lowers both the ceiling and the scenario figures.
func loadAverage() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	first, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return nil
	}
	return &v
}

// histogram records latencies in buckets of about 1.6 % width: exact below 128 ns, then 64
// buckets per power of two. Recording is an index computation and an increment.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

const (
	histSub     = 64
	histBuckets = 2*histSub + 57*histSub
)

func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - 7
	return 2*histSub + (shift-1)*histSub + int(v>>shift) - histSub
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	k := i - 2*histSub
	shift := k/histSub + 1
	m := int64(k%histSub + histSub)
	return m<<shift + (int64(1)<<shift)/2
}

func (h *histogram) record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(uint64(v))]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

func (h *histogram) add(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return time.Duration(min(histValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// group writes a number rounded to an integer with thousands separators.
func group(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// startProfile starts the CPU profile of one timed window when --cpuprofile asks for it.
// With several scenarios each window overwrites the file, so it holds the last one.
func (b *bench) startProfile() (stop func(), err error) {
	if b.cfg.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(b.cfg.cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
