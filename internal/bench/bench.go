// Package bench is "svrpd bench", the load tool: it measures a registry on this machine,
// a svrpd serve it spawns (this executable by default) or one it is pointed at, over HTTP as
// any client would. It prepares and signs what each timed window sends before the window,
// and reports what each operation cost the daemon's CPU against one Ed25519 verification
// measured in the same run. It is not a test harness: the abuse scenario's attacks and the
// bounds they check are the abuse suite's (package attack).
//
// Files by concern: bench.go (flags and the run), load.go (the timed window and HTTP),
// scenarios.go (what the signing scenarios prepare), watch.go (watchers and the stats page),
// abuse.go (the abuse scenario), daemon.go (the spawned daemon), report.go (figures).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/cmdflag"
)

// config is everything `svrpd bench` is configured with.
type config struct {
	url         string
	allowRemote bool
	binary      string   // the svrpd that is spawned
	daemonArgs  []string // added to svrpd serve's arguments
	scenario    string
	duration    time.Duration
	requests    int64
	clients     int
	nodes       int
	verifyTime  time.Duration
	prefix      string
	logLevel    slog.Level
	jsonOnly    bool
	cpuProfile  string
	abuseRows   string
	beatRate    int
	pollEvery   time.Duration
	pageLimit   int
}

// scenario is what a scenario measures and how it is sized unless told otherwise.
type scenario struct {
	name           string
	clients, nodes int
	// alone marks a scenario that all leaves out: it is run only when named.
	alone bool
	run   func(b *bench, ctx context.Context, t *target, clients, nodes int) (*result, error)
}

var scenarios = []scenario{
	{name: "heartbeat", clients: 64, nodes: 10_000, run: func(b *bench, ctx context.Context, t *target, clients, n int) (*result, error) {
		nodes, err := b.registerNodes(ctx, t, n)
		if err != nil {
			return nil, err
		}
		reqs, err := b.heartbeats(ctx, t, nodes, clients)
		return b.one(ctx, t, "heartbeat", clients, 1, reqs, err)
	}},
	{name: "login", clients: 64, run: func(b *bench, ctx context.Context, t *target, clients, _ int) (*result, error) {
		reqs, err := b.logins(ctx, t, clients)
		// A device-login verifies the credential's root signature and the login's.
		return b.one(ctx, t, "device-login", clients, 2, reqs, err)
	}},
	{name: "nodes", clients: 16, nodes: 1_000, run: func(b *bench, ctx context.Context, t *target, clients, n int) (*result, error) {
		if _, err := b.registerNodes(ctx, t, n); err != nil {
			return nil, err
		}
		p, err := b.window(ctx, t, "GET /nodes", clients, 0, t.repeated(request{method: "GET", path: "/nodes"}))
		return &result{Phases: []phase{p}}, err
	}},
	// Not part of all: its setup carries each session through initiate, resolve and
	// authorize, which takes longer than the window it prepares for.
	{name: "accept", clients: 16, alone: true, run: func(b *bench, ctx context.Context, t *target, clients, _ int) (*result, error) {
		reqs, err := b.accepts(ctx, t, clients)
		// The whole chain: the session's node signature, the credential's root signature,
		// the authorization and the acceptance.
		return b.one(ctx, t, "accept", clients, 4, reqs, err)
	}},
	{name: "watcher", clients: 64, nodes: 100_000, alone: true, run: (*bench).watcher},
	{name: "stats", clients: 16, nodes: 100_000, alone: true, run: (*bench).stats},
}

// one is a scenario of one window that sends reqs, each costing verifies verifications.
func (b *bench) one(ctx context.Context, t *target, name string, clients, verifies int, reqs []request, err error) (*result, error) {
	if err != nil {
		return nil, err
	}
	p, err := b.window(ctx, t, name, clients, verifies, t.prepared(reqs))
	return &result{Phases: []phase{p}}, err
}

// bench is one run of svrpd bench.
type bench struct {
	cfg      config
	stdout   io.Writer
	stderr   io.Writer
	text     io.Writer // the readable report; io.Discard with --json
	verifyUs float64   // one verify's CPU time in µs; 0 when not measured
	profiles int       // CPU profiles written so far
	failed   bool      // something failed that does not stop the run
}

func (b *bench) note(format string, args ...any) { fmt.Fprintf(b.text, format+"\n", args...) }

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Main is "svrpd bench": it parses the flags, runs the chosen scenarios and reports them. It
// returns the exit code: 0 when every scenario ran without a failed request, 1 otherwise, 2
// on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c config
	var daemonArgs stringList
	fs := cmdflag.New("bench", stderr)
	fs.StringVar(&c.url, "url", "", "measure the registry at this URL instead of spawning one, e.g. http://127.0.0.1:8080")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow a --url that is not loopback (127.0.0.0/8, ::1, localhost)")
	spawnFlag := fs.Bool("spawn", true, "spawn svrpd serve as a child process for each scenario (the default without --url)")
	fs.StringVar(&c.binary, "spawn-binary", "", "the svrpd binary to spawn (default: this executable)")
	fs.Var(&daemonArgs, "daemon-arg", "an argument added to the spawned svrpd serve's, after bench's own (repeatable): --daemon-arg=--memory, --daemon-arg=--postgres=URL")
	fs.StringVar(&c.scenario, "scenario", "all", "heartbeat, login, nodes, all (those three in turn), or one run only when named: accept, watcher, stats, abuse")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "timed window of each phase, at most 4m (signed timestamps last 300 s)")
	fs.Int64Var(&c.requests, "requests", 1_000_000, "most operations per window; a window ends at whichever bound comes first")
	fs.IntVar(&c.clients, "clients", 0, "concurrent clients (default per scenario: 64 heartbeat, login and watcher; 16 nodes, accept and stats)")
	fs.IntVar(&c.nodes, "nodes", 0, "nodes registered in setup (default 10000 heartbeat, 1000 nodes, 100000 watcher and stats)")
	fs.DurationVar(&c.verifyTime, "verify-time", 2*time.Second, "how long to measure one Ed25519 verify's CPU time (0 skips it)")
	fs.StringVar(&c.prefix, "prefix", canonical.DefaultPrefix, "domain prefix of every signed message; must be the registry's")
	logLevel := fs.String("log-level", "warn", "the least level of a spawned daemon's log lines copied to stderr")
	fs.BoolVar(&c.jsonOnly, "json", false, "print only the JSON line of each scenario")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the spawned daemon's CPU profile of each timed window to this file (FILE, FILE.2, ...); read it with go tool pprof")
	fs.IntVar(&c.beatRate, "beats-per-second", 1000, "with --scenario watcher, heartbeats sent per second while the watchers poll (at most half the nodes)")
	fs.DurationVar(&c.pollEvery, "poll-every", time.Second, "with --scenario watcher, how often each watcher polls (back to back when a poll takes longer)")
	fs.IntVar(&c.pageLimit, "page-limit", 0, "with --scenario watcher, the conditional polls read the listing in pages of this many nodes (?limit=), following Link rel=\"next\" (0: one answer)")
	fs.StringVar(&c.abuseRows, "abuse-rows", "", "with --scenario abuse, the rows to run, comma-separated (default all)")
	honest := fs.Bool("abuse-honest", false, "run the honest clients of one abuse phase, from the JSON spec on standard input (the abuse scenario starts itself so)")
	fs.Usage = func() { usage(fs.Output(), fs) }
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	if *honest {
		return runHonest(ctx, os.Stdin, stdout, stderr)
	}
	c.daemonArgs = daemonArgs
	err := c.validate(*logLevel, cmdflag.IsSet(fs, "spawn"), *spawnFlag)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd bench: %v\n", strings.ReplaceAll(err.Error(), "\n", "\nsvrpd bench: "))
		return 2
	}
	b := &bench{cfg: c, stdout: stdout, stderr: &lockedWriter{w: stderr}, text: stdout}
	if c.jsonOnly {
		b.text = io.Discard
	}
	if c.url == "" && c.binary == "" {
		if b.cfg.binary, err = os.Executable(); err != nil {
			fmt.Fprintf(stderr, "svrpd bench: finding this executable to spawn: %v\n", err)
			return 1
		}
	}
	if c.url != "" {
		fmt.Fprintf(b.text, "target: %s\n", c.url)
	} else {
		fmt.Fprintf(b.text, "target: svrpd serve (%s) as a child process, a fresh one per scenario\n", strings.Join(append([]string{b.cfg.binary}, c.daemonArgs...), " "))
	}
	if c.scenario == "abuse" {
		if err := b.abuse(ctx); err != nil {
			fmt.Fprintf(stderr, "svrpd bench: abuse: %v\n", err)
			return 1
		}
		return b.code()
	}
	if c.verifyTime > 0 {
		v := verifyTime(ctx, c.verifyTime)
		b.verifyUs = round(float64(v)/float64(time.Microsecond), 2)
		fmt.Fprintf(b.text, "verify: %.1f µs of CPU per Ed25519 verify on one core, measured for %s\n", b.verifyUs, c.verifyTime)
	}
	for _, sc := range scenarios {
		if c.scenario != sc.name && (c.scenario != "all" || sc.alone) {
			continue
		}
		if ctx.Err() != nil {
			return 1
		}
		fmt.Fprintln(b.text)
		if err := b.runScenario(ctx, sc); err != nil {
			fmt.Fprintf(stderr, "svrpd bench: %s: %v\n", sc.name, err)
			b.failed = true
		}
	}
	return b.code()
}

func (b *bench) code() int {
	if b.failed {
		return 1
	}
	return 0
}

// runScenario runs sc on a fresh target and reports it.
func (b *bench) runScenario(ctx context.Context, sc scenario) error {
	clients, nodes := sc.clients, sc.nodes
	if b.cfg.clients > 0 {
		clients = b.cfg.clients
	}
	if nodes > 0 && b.cfg.nodes > 0 {
		nodes = b.cfg.nodes
	}
	if sc.name == "heartbeat" {
		// A node's heartbeats leave in ts order when it has many others between them.
		clients = max(min(clients, nodes/2), 1)
	}
	t, err := b.target(ctx, clients, unboundedLimits())
	if err != nil {
		return err
	}
	defer t.stop()
	res, err := sc.run(b, ctx, t, clients, nodes)
	if err != nil {
		return err
	}
	res.Scenario, res.Target, res.Clients, res.Nodes, res.VerifyUs = sc.name, t.label, clients, nodes, b.verifyUs
	if t.d != nil {
		if rss, peak, err := t.d.memory(); err == nil {
			if res.Figures == nil {
				res.Figures = map[string]float64{}
			}
			res.Figures["daemon_rss_mb"], res.Figures["daemon_peak_mb"] = rss, peak
		}
	}
	b.print(res)
	for _, p := range res.Phases {
		if p.failures() > 0 {
			b.failed = true
		}
	}
	return nil
}

// target is the --url registry, or a spawned svrpd serve with args before --daemon-arg's,
// for clients at once.
func (b *bench) target(ctx context.Context, clients int, args []string) (*target, error) {
	if b.cfg.url != "" {
		return &target{label: b.cfg.url, base: strings.TrimRight(b.cfg.url, "/"), http: newHTTP(clients), stop: func() {}}, nil
	}
	if b.cfg.cpuProfile != "" {
		args = append(args, "--debug-listen", "127.0.0.1:0")
	}
	d, err := spawn(ctx, b.cfg.binary, append(slices.Clone(args), b.cfg.daemonArgs...), b.stderr, b.cfg.logLevel)
	if err != nil {
		return nil, fmt.Errorf("starting the daemon: %w", err)
	}
	return &target{label: "spawn", base: d.scheme + "://" + d.addr, d: d, http: newHTTP(clients), stop: func() {
		if err := d.stop(); err != nil {
			fmt.Fprintf(b.stderr, "svrpd bench: %v\n", err)
			b.failed = true
		}
	}}, nil
}

func (c *config) validate(logLevel string, spawnSet, spawn bool) error {
	var errs []error
	if !spawn && c.url == "" {
		errs = append(errs, errors.New("--spawn=false: give the registry to measure with --url"))
	}
	known := c.scenario == "all" || c.scenario == "abuse"
	names := []string{"all"}
	for _, sc := range scenarios {
		known = known || c.scenario == sc.name
		names = append(names, sc.name)
	}
	if !known {
		errs = append(errs, fmt.Errorf("--scenario %q: want %s or abuse", c.scenario, strings.Join(names, ", ")))
	}
	if c.url != "" {
		if err := checkURL(c.url, c.allowRemote); err != nil {
			errs = append(errs, err)
		}
		if spawnSet || c.binary != "" || len(c.daemonArgs) > 0 || c.cpuProfile != "" || c.scenario == "abuse" {
			errs = append(errs, errors.New("--url measures a registry bench does not start: it takes no --spawn, --spawn-binary, --daemon-arg or --cpuprofile, nor the abuse scenario"))
		}
	}
	if c.duration <= 0 || c.duration > 4*time.Minute {
		errs = append(errs, errors.New("--duration must be more than 0 and at most 4m (signed timestamps last 300 s)"))
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
	if c.verifyTime < 0 || c.beatRate < 0 || c.pollEvery < 0 || c.pageLimit < 0 {
		errs = append(errs, errors.New("--verify-time, --beats-per-second, --poll-every and --page-limit must not be negative"))
	}
	if err := canonical.CheckPrefix(c.prefix); err != nil {
		errs = append(errs, fmt.Errorf("--prefix: %w", err))
	}
	if err := c.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel))
	}
	if c.scenario == "abuse" && c.cpuProfile != "" {
		errs = append(errs, errors.New("--cpuprofile profiles timed windows, which the abuse scenario has none of"))
	}
	if c.abuseRows != "" {
		if c.scenario != "abuse" {
			errs = append(errs, errors.New("--abuse-rows is for --scenario abuse"))
		} else if _, err := pickRows(c.abuseRows); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkURL refuses a --url that is not plain HTTP, and one that is not loopback unless
// allowRemote: what is checked is what is typed, not what a name resolves to.
func checkURL(raw string, allowRemote bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("--url %q: want http://host:port[/path]", raw)
	}
	if allowRemote || strings.EqualFold(u.Hostname(), "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("--url %q is not a loopback address (127.0.0.0/8, ::1, localhost); bench loads its target hard, so pass --allow-remote to measure another machine", raw)
}

func usage(w io.Writer, fs interface{ PrintDefaults() }) {
	fmt.Fprint(w, `Usage: svrpd bench [flags]

Measures a registry: operations per second, p50/p99 latency and failures of each scenario, and
for a daemon bench spawns, its CPU per operation, against the CPU time of one Ed25519
verification on one core measured first in the same run (verifies_per_op and cpu_vs_verify:
1.00 would be a daemon that does nothing but verify).

Target. By default bench spawns svrpd serve (this executable, or --spawn-binary) for each
scenario on 127.0.0.1:0, on Badger in a temporary directory removed at the end, with its
per-address and global limits raised so that setup can register every node from one address.
--daemon-arg adds an argument to serve's, after bench's own (so it wins): another store
(--daemon-arg=--memory, --daemon-arg=--postgres=URL) or any flag serve takes. The daemon's CPU
is read from /proc/<pid>/stat as each window begins and ends, its memory from
/proc/<pid>/status. With --url, bench measures a registry started some other way (started with
raised limits, e.g. --register-address-limit 1000000); its CPU is not reported, and an address
that is not loopback is refused unless --allow-remote is given. Nodes it registers there stay.

Scenarios. What a window sends is signed before it begins:
  heartbeat  registers --nodes nodes and sends each a signed heartbeat a second of ts apart
             (1 verify per operation)
  login      fetches one challenge per login and sends device-logins, each challenge once
             (2 verifies)
  nodes      registers --nodes nodes, then GET /nodes
  accept     (only when named) carries binding sessions through initiate, resolve and
             authorize in setup, then sends the nodes' signed acceptances (4 verifies)
  watcher    (only when named) registers --nodes nodes (default 100,000), heartbeats
             --beats-per-second of them, and has --clients watchers (default 64) poll GET /nodes
             every --poll-every: first the whole listing each time, then conditionally (the last
             ETag in If-None-Match, ?changed_since= the previous poll's time, Accept-Encoding:
             gzip; with --page-limit N, ?limit=N and every page its Link rel="next" names).
             Bytes received and daemon CPU per poll of each way, the heartbeats' own CPU
             (per heartbeat, measured alone first) taken out, and their ratios
  stats      (only when named) registers --nodes nodes (default 100,000), then GET /health,
             GET /v1/network/stats, the page again accepting gzip as a browser does, and the
             console's polls (the whole page once per client, then ?changed_since= the at of
             the last answer, gzip), interleaved in 5 rounds of --duration/5 each, each round
             beginning one later: CPU and bytes per request, their ratios to /health's, and
             the lowest and highest ratio of a single round (_low, _high)
  abuse      (only when named) for each row of the abuse suite (--abuse-rows 1,3 for some),
             spawns svrpd serve with its default limits and the row's flags, and measures
             honest logins and heartbeats (4 clients in a process of their own, from 127.2.x.y)
             for 5 s alone and 5 s while the row's attack runs from 127.1.x.y (for a row
             whose attack holds connections, from once it holds them and a second more): their p99
             ratios, the attack's answers, the daemon's peak RSS; for rows whose attack stores
             records, the peak of a daemon holding as many honest ones. Row 10 measures the idle
             daemon's CPU. Rows whose attack speaks HTTP/2 (16-18) serve TLS with a
             certificate bench makes for 127.0.0.1, which only the honest clients trust.

Output. Each scenario prints its phases as text and one JSON line (scenario, target, clients,
nodes, verify_us, phases: ops, ops_per_s, p50_ms, p99_ms, failed, bytes_per_op, cpu_us_per_op,
cpu_vs_verify; figures: ratios and memory); --json prints only the JSON lines. The exit code is
1 when a scenario could not run, a request failed, or a spawned daemon did not stop cleanly.

Every flag can also be set by an environment variable: SVRPD_ and its name in upper case,
'-' as '_' (SVRPD_URL, SVRPD_DURATION, ...). A flag on the command line wins.

Flags:
`)
	fs.PrintDefaults()
}
