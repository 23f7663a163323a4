// Package bench is "svrpd bench": a load tool that measures a registry on this machine. It
// prepares and signs every request before its timed window, measures the raw Ed25519 verify
// ceiling in the same run, and reports each scenario's throughput as a fraction of it.
//
// Files by concern: bench.go (flags, configuration, targets), scenarios.go (what each
// scenario prepares and sends), window.go (the timed window and its workers), http.go (the
// generator's own HTTP/1.1), spawn.go (the daemon as its own process), restart.go (the
// restart scenario), report.go (figures, text and JSON). It reaches the daemon only through
// daemon.Config and daemon.Run, as svrpd serve does.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/internal/daemon"
)

// benchConfig is everything `svrpd bench` is configured with.
type benchConfig struct {
	url         string
	self        bool
	selfMemory  bool
	postgres    string // also measure on this PostgreSQL database
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
	abuseRows   string // the abuse rows to run, comma-separated; all when empty
	abuseNice   int    // the attack's nice value; 0 runs it at the daemon's priority
	daemonArgs  []string
}

// benchScenario is what a scenario sends and how it is sized unless told otherwise.
type benchScenario struct {
	name    string
	clients int
	nodes   int // nodes registered in setup; 0 when the scenario registers none
	// verifies is the number of Ed25519 verifications the registry makes per operation,
	// counted from its code: heartbeat, the node's signature; login, the credential's root
	// signature and the login signature; journey, initiate 1 (node) + resolve 0 + authorize
	// 2 (credential, authorization) + pending 1 (poll) + accept 4 (the whole chain); accept,
	// the whole chain: the session's node signature, the credential's root signature, the
	// authorization and the acceptance.
	verifies int
	// alone marks a scenario that all leaves out: it is run only when named.
	alone bool
}

var benchScenarios = []benchScenario{
	{name: "heartbeat", clients: 64, nodes: 10_000, verifies: 1},
	{name: "login", clients: 64, verifies: 2},
	{name: "nodes", clients: 16, nodes: 1_000},
	{name: "peers", clients: 16, nodes: 1_000},
	{name: "journey", clients: 16, verifies: 8},
	// Its setup carries each session through initiate, resolve and authorize, which takes
	// longer than the window it prepares for; the journey scenario already times accepts
	// among the other steps.
	{name: "accept", clients: 16, verifies: 4, alone: true},
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
	benchMaxAccepts  = 50_000
	// Heartbeat rounds are signed one second of ts apart, from benchHeartbeatLead seconds
	// in the past to at most benchHeartbeatAhead in the future, so every ts stays inside the
	// registry's 300 s window while it is sent.
	benchHeartbeatLead  = 240
	benchHeartbeatAhead = 280
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
	fs.StringVar(&c.postgres, "postgres", "", "PostgreSQL URL: run each scenario on the in-process registry on Badger, then on this database, then on two svrpd serve processes sharing this database with the clients split between them (a schema of its own per run, dropped after), and compare; heartbeat reports the database statements per heartbeat")
	fs.BoolVar(&c.spawn, "spawn", false, "measure svrpd serve started as a child process (127.0.0.1:0, Badger in a temporary directory), whose memory is reported apart from the generator's")
	fs.BoolVar(&c.spawnMemory, "spawn-memory", false, "like --spawn with the memory store")
	fs.StringVar(&c.spawnBinary, "spawn-binary", "", "the svrpd binary that --spawn, --postgres's two daemons and the restart scenario start (default: this executable)")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow a --url that is not loopback (127.0.0.0/8, ::1, localhost)")
	fs.StringVar(&c.scenario, "scenario", "all", "heartbeat, login, nodes, peers, journey, all (those five in turn), accept, restart or abuse (run only when named)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "timed window of each scenario, at most "+benchMaxDuration.String())
	fs.Int64Var(&c.requests, "requests", 1_000_000, "most operations per scenario (journeys for journey); the window ends at whichever bound comes first")
	fs.IntVar(&c.clients, "clients", 0, "concurrent connections (default per scenario: 64 heartbeat and login, 16 nodes, peers, journey and accept)")
	fs.IntVar(&c.nodes, "nodes", 0, "nodes registered for heartbeat, nodes and peers, or stored for restart (default 10000 for heartbeat, 1000 for nodes and peers, 1000000 for restart, which takes at most 5000000)")
	fs.DurationVar(&c.ceilingTime, "ceiling-time", 2*time.Second, "how long to measure the Ed25519 verify ceiling (0 skips it)")
	fs.StringVar(&c.prefix, "prefix", canonical.DefaultPrefix, "domain prefix of every signed message; must be the registry's")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level of the in-process registry, or the least level of a spawned daemon's log lines copied to stderr (svrpd serve logs at info by default, one line per binding step)")
	fs.BoolVar(&c.jsonOnly, "json", false, "print only the JSON line of each scenario")
	fs.StringVar(&c.abuseRows, "abuse-rows", "", "with --scenario abuse, the rows to run, comma-separated (default all)")
	fs.IntVar(&c.abuseNice, "abuse-nice", 10, "with --scenario abuse, the nice value bench's own threads, and so the attack, run at, below the daemon and the honest clients (0 to 19; 0 shares the CPU evenly)")
	honest := fs.Bool("abuse-honest", false, "run the honest clients of one abuse phase, from the JSON spec on standard input (the abuse scenario starts itself so)")
	fs.Func("daemon-arg", "with --spawn or --spawn-memory, one more argument for svrpd serve, after bench's own (--daemon-arg=--batch-verify=false); repeatable", func(a string) error {
		c.daemonArgs = append(c.daemonArgs, a)
		return nil
	})
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed window to this file: with --spawn or --spawn-memory the daemon's (served by its --debug-listen), with an in-process registry the registry's and the generator's, otherwise the generator's alone; read it with go tool pprof")
	fs.Usage = func() { benchUsage(fs.Output(), fs) }
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	if *honest {
		return runHonest(ctx, os.Stdin, stdout, stderr)
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "svrpd bench: %v\n", strings.ReplaceAll(err.Error(), "\n", "\nsvrpd bench: "))
		return 2
	}
	// A spawned daemon's log is copied to stderr from a goroutine of its own.
	stderr = &lockedWriter{w: stderr}
	b := &bench{cfg: c, stdout: stdout, stderr: stderr, text: stdout, start: (*exec.Cmd).Start}
	if c.jsonOnly {
		b.text = io.Discard
	}
	if c.spawn || c.spawnMemory || c.postgres != "" || c.scenario == "restart" || c.scenario == "abuse" {
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
	case c.scenario == "abuse":
		fmt.Fprintf(b.text, "target: svrpd serve (%s) as a child process with its default limits, Badger in a temporary directory, a fresh one per row\n", b.daemonBin)
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
	if c.scenario == "abuse" {
		if c.abuseNice > 0 {
			start, err := lowerSelf(c.abuseNice)
			if err != nil {
				fmt.Fprintf(stderr, "svrpd bench: abuse: the attack runs at the daemon's priority: %v\n", err)
			} else {
				b.start = start
				fmt.Fprintf(b.text, "attack: at nice %d, below the daemon and the honest clients (--abuse-nice)\n", c.abuseNice)
			}
		}
		if _, err := b.runAbuse(ctx); err != nil {
			fmt.Fprintf(stderr, "svrpd bench: abuse: %v\n", err)
			return 1
		}
		if b.stopFailed {
			return 1
		}
		return 0
	}
	if c.ceilingTime > 0 {
		var cpuPerVerify time.Duration
		b.ceiling, cpuPerVerify = measureCeiling(ctx, c.ceilingTime)
		n := runtime.NumCPU()
		fmt.Fprintf(b.text, "verify ceiling: %s Ed25519 verifies/s on %d CPUs (%s per core), measured for %s\n",
			group(b.ceiling), n, group(b.ceiling/float64(n)), c.ceilingTime)
		switch {
		case cpuPerVerify > 0:
			b.verifyUs = round(float64(cpuPerVerify)/float64(time.Microsecond), 2)
			fmt.Fprintf(b.text, "verify time: %.1f µs of CPU per verify while the ceiling was measured\n", b.verifyUs)
		case b.ceiling > 0:
			// Wall time per verify on one core: other work on the machine inflates it.
			b.verifyUs = round(1e6*float64(n)/b.ceiling, 2)
			fmt.Fprintf(b.text, "verify time: %.1f µs per verify on one core, from the ceiling's rate (this system does not give the CPU time)\n", b.verifyUs)
		}
	}
	code := 0
	for _, sc := range benchScenarios {
		if c.scenario != sc.name && (c.scenario != "all" || sc.alone) {
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
		if c.postgres == "" {
			continue
		}
		fmt.Fprintln(b.text)
		for _, daemons := range []int{1, 2} {
			fmt.Fprintln(b.text)
			b.pgDaemons = daemons
			pres, err := b.runScenario(ctx, sc)
			b.pgDaemons = 0
			on := "PostgreSQL"
			if daemons > 1 {
				on = fmt.Sprintf("PostgreSQL with %d daemons", daemons)
			}
			if err != nil {
				fmt.Fprintf(stderr, "svrpd bench: %s on %s: %v\n", sc.name, on, err)
				code = 1
				continue
			}
			b.report(pres)
			if pres.Errors > 0 {
				code = 1
			}
			if res.OpsPerS > 0 {
				fmt.Fprintf(b.text, "%s: %s at %.0f%% of Badger's rate (%s against %s ops/s)\n", sc.name, on, 100*pres.OpsPerS/res.OpsPerS, group(pres.OpsPerS), group(res.OpsPerS))
			}
			if pres.StatementsPerOp != nil {
				fmt.Fprintf(b.text, "%s: %.5f database statements per operation in the timed window on %s\n", sc.name, *pres.StatementsPerOp, on)
			}
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
Lines of the daemon's log at --log-level or above are copied to stderr. The daemon's CPU
time (utime and stime of /proc/<pid>/stat, to 10 ms) is read as the window begins and ends:
server CPU per operation, and that over the time of the operation's verifies, one verify's
time being the CPU time bench's own verifies took while the ceiling was measured (where
that cannot be read, the ceiling's rate per CPU turned around, which other work on the
machine inflates). With --cpuprofile the daemon is started with
--debug-listen 127.0.0.1:0, and the file is its CPU profile, fetched from
/debug/pprof/profile for the whole seconds that cover the window.

With --postgres URL, each scenario runs three times: on the in-process registry on Badger,
on the in-process registry on PostgreSQL, and on two svrpd serve processes (as with --spawn)
sharing the database, the clients split between them, each run in a schema of its own that
is dropped after. Setup registers through both daemons and waits until each lists every
node; statements per operation are svrpd_store_statements_total of each daemon's /metrics,
and the two daemons' CPU is reported as with --spawn (PostgreSQL's own is not counted).

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
  accept     not part of all, since its setup takes longer than its window: binds like
             journey, but setup carries each session through initiate, resolve and
             authorize, and the window sends only the signed acceptances (4 verifies: the
             node's session signature, the credential, the authorization, the acceptance)
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
  abuse      not part of all: for each row of the abuse suite (1 huge-signature
             registrations and many-valued listings, 2 initiate floods, 3 a key with a long
             history, 4 idle connections, 5 garbage logins, 6 resolve guessing, 7 copied
             registrations, 8 replayed heartbeats, 9 many registrations, 10 nothing), starts
             svrpd serve with its default limits as with --spawn, and measures honest logins
             and heartbeats (4 clients, from many 127.2.x.y addresses, in a process of their
             own so that they do not share bench's Go scheduler with the attack) for 5 s alone
             and 5 s while the row's attack runs from 127.1.x.y addresses, with the daemon's
             peak RSS during the attack. The attack is sent from bench's own threads at
             nice 10 (--abuse-nice; 0 shares the CPU evenly), the daemon and the honest
             clients at normal priority: in the field the attack's sending costs its own
             machines, and the daemon still does all the work it makes. --abuse-rows 1,3
             runs some rows; --cpuprofile FILE writes the daemon's profile of each row's
             attack to FILE.rowN. For rows 1, 2 and 9 a second daemon then holds as many
             honest records as the attack got accepted, and its peak is the reference. Row 10 also
             measures the idle daemon's CPU over 10 s. Requests are signed as they are sent,
             by the Go client. One JSON line per row (login_*/heartbeat_* p50/p99 without and
             under attack, their p99 ratios, attack_answers, daemon_rss_peak_mb,
             reference_rss_peak_mb, idle_cpu_percent).
Login, journey and accept first run short calibration batches to size what they prepare; if the
prepared requests run out before --duration, the window ends there and says so. Signed
timestamps and challenges are valid for 300 s, hence the limit on --duration. A window ends
at --duration or --requests, whichever comes first, plus the time the requests in flight
take to answer; duration_s is the window as it ran.

Output. Each scenario prints its figures and one JSON line (ops_per_s, p50_ms, p99_ms,
errors and errors_by_code, ceiling_verifies_per_s, fraction_of_ceiling: ops/s times verifies
per op over the ceiling, clients, nodes, duration_s; for an in-process registry rss_*_mb
and hwm_mb; with --spawn daemon_rss_ready_mb, daemon_hwm_setup_mb,
daemon_rss_peak_window_mb, daemon_rss_growth_mb, daemon_rss_end_mb, daemon_peak_source,
the generator's own generator_rss_mb and generator_hwm_mb, and server_cpu_s,
server_cpu_us_per_op, verify_us and cpu_vs_verify); --json prints only the
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
	} else if c.spawnBinary != "" && !c.spawn && !c.spawnMemory && c.postgres == "" {
		errs = append(errs, errors.New("--spawn-binary is for --spawn, --spawn-memory, --postgres and the restart scenario"))
	}
	if c.postgres != "" && (c.url != "" || c.selfMemory || c.spawn || c.spawnMemory || c.scenario == "restart" || c.scenario == "abuse") {
		errs = append(errs, errors.New("--postgres compares the in-process registry on Badger and on PostgreSQL: it takes no --url, --self-memory, --spawn or --spawn-memory, nor the restart and abuse scenarios"))
	}
	if c.scenario == "abuse" && (c.url != "" || c.self || c.selfMemory || c.spawnMemory) {
		errs = append(errs, errors.New("--scenario abuse starts its own daemons with their default limits; it takes no --url, --self, --self-memory or --spawn-memory"))
	}
	if c.abuseNice < 0 || c.abuseNice > 19 {
		errs = append(errs, fmt.Errorf("--abuse-nice %d: want 0 to 19", c.abuseNice))
	}
	known := c.scenario == "all" || c.scenario == "restart" || c.scenario == "abuse"
	for _, sc := range benchScenarios {
		known = known || c.scenario == sc.name
	}
	if !known {
		errs = append(errs, fmt.Errorf("--scenario %q: want heartbeat, login, nodes, peers, journey, all, accept, restart or abuse", c.scenario))
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
	// daemons are every child process serving the target, whose CPU time is measured.
	daemons []*benchDaemon
	// addrs, when there are several daemons behind one database, are their host:ports:
	// client i connects to addrs[i%len(addrs)].
	addrs []string
	// statements, on PostgreSQL, counts the statements the target's daemons have sent.
	statements func() (uint64, error)
	stop       func()
}

func (t *benchTarget) endpoint(p string) string { return t.path + p }

// dialAddr is where client i connects.
func (t *benchTarget) dialAddr(i int) string {
	if len(t.addrs) == 0 {
		return t.addr
	}
	return t.addrs[i%len(t.addrs)]
}

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
// loopback port, and limits raised so that setup can register every node, and the load can
// log in and bind, from one address.
func benchServeConfig(memory bool, dataDir, prefix, logLevel string) daemon.Config {
	const unbounded = 1 << 30
	return daemon.Config{
		Listen: "127.0.0.1:0", DataDir: dataDir, Memory: memory, Prefix: prefix,
		ResolveAddressLimit: unbounded, RegisterAddressLimit: unbounded, MaxNodes: unbounded,
		InitiateAddressLimit: unbounded, MaxBindingSessions: unbounded, MaxBearerSessions: unbounded,
		LoginAddressLimit: unbounded, LoginFailureAddressLimit: unbounded, LoginFailureOperatorLimit: unbounded,
		ResolveOperatorLimit: unbounded, ResolveGlobalLimit: unbounded, MalformedAddressLimit: unbounded, InitiateKeyLimit: unbounded,
		MaxConnections: DefaultBenchMaxConnections, MaxConnectionsPerAddress: DefaultBenchMaxConnections,
		SweepEvery: time.Minute, LogLevel: logLevel, LogFormat: "text",
	}
}

// DefaultBenchMaxConnections is the connection cap of a registry the bench starts: all of
// the bench's clients share one address.
const DefaultBenchMaxConnections = 1 << 16

// startSelf runs serve in this process until the returned target's stop is called.
func startSelf(ctx context.Context, memory bool, postgres, prefix, logLevel string, stderr io.Writer) (*benchTarget, error) {
	if postgres != "" {
		return startSelfPostgres(ctx, postgres, prefix, logLevel, stderr)
	}
	if memory {
		return runSelf(ctx, benchServeConfig(true, "", prefix, logLevel), "self-memory", stderr, func() {})
	}
	dir, err := os.MkdirTemp("", "svrpd-bench-")
	if err != nil {
		return nil, err
	}
	return runSelf(ctx, benchServeConfig(false, dir, prefix, logLevel), "self-badger", stderr, func() { os.RemoveAll(dir) })
}

// runSelf runs the daemon with c in this process until the returned target's stop is called;
// cleanup runs once the daemon has stopped, or at once when it cannot start.
func runSelf(ctx context.Context, c daemon.Config, label string, stderr io.Writer, cleanup func()) (*benchTarget, error) {
	if err := c.Validate(); err != nil {
		cleanup()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- daemon.Run(sctx, c, daemon.NewLogger(stderr, c.LogLevel, "text"), ready) }()
	select {
	case addr := <-ready:
		host, _, _ := net.SplitHostPort(addr)
		return &benchTarget{
			label: label, base: "http://" + addr, addr: addr, host: addr, hostname: host, self: true,
			stop: func() {
				cancel()
				<-done // daemon.Run ends within its shutdown bound
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
