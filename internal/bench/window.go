package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// measureCeiling runs one Ed25519 verifier per CPU for d and returns verifies per second:
// the best of four equal slices, since other work on the machine can only lower a slice's
// rate, never raise it. It also returns the CPU time one verify took, over all the slices,
// or 0 where this process's CPU time cannot be read: unlike the rate, it is what a daemon's
// CPU per operation compares with whatever else the machine runs.
func measureCeiling(ctx context.Context, d time.Duration) (perS float64, cpuPerVerify time.Duration) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return 0, 0
	}
	// About the size of a heartbeat or login message.
	msg := []byte(strings.Repeat("service-node-heartbeat:v1\ndid:svrp:n:0123abcd\n1767225600\n", 3)[:150])
	sig := ed25519.Sign(priv, msg)
	n := runtime.NumCPU()
	const slices = 4
	best := 0.0
	var verifies int64
	cpuBefore, cpuErr := processCPU(os.Getpid())
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
		verifies += total
	}
	cpuAfter, err := processCPU(os.Getpid())
	if cpuErr != nil || err != nil || verifies == 0 {
		return best, 0
	}
	return best, (cpuAfter - cpuBefore) / time.Duration(verifies)
}

// bench runs scenarios and reports them.
type bench struct {
	cfg benchConfig
	// pgDaemons is, while a scenario runs on cfg.postgres, the number of daemons sharing it:
	// 1 in this process, or more as child processes. 0 otherwise.
	pgDaemons int
	stdout    io.Writer
	stderr    io.Writer
	text      io.Writer // the readable report; io.Discard with --json
	remote    *benchTarget
	ceiling   float64
	// verifyUs is one Ed25519 verify's time, in µs: the CPU time the ceiling's verifies
	// took, or where that cannot be read, its rate per CPU turned around. 0 when the
	// ceiling was not measured.
	verifyUs float64
	// loadBefore is the machine's load average before bench began; later readings would
	// count bench's own earlier scenarios.
	loadBefore *float64
	daemonBin  string // the svrpd binary --spawn and restart start
	stopFailed bool   // a spawned daemon did not stop cleanly
	// start starts every child process: exec.Cmd.Start, or for the abuse scenario's lowered
	// attack, a start from the one thread kept at normal priority.
	start func(*exec.Cmd) error
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
	// The CPU time (user and system) the target's own processes spent in the timed window,
	// with --spawn and the daemons of --postgres: in all, per operation, and per operation
	// over the time of its verifies (verify_us, measured with the ceiling).
	ServerCPUS       *float64 `json:"server_cpu_s,omitempty"`
	ServerCPUUsPerOp *float64 `json:"server_cpu_us_per_op,omitempty"`
	VerifyUs         *float64 `json:"verify_us,omitempty"`
	CPUVsVerify      *float64 `json:"cpu_vs_verify,omitempty"`
	// StatementsPerOp is, on PostgreSQL, the database statements of the timed window per
	// operation.
	StatementsPerOp *float64 `json:"statements_per_op,omitempty"`
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
		pg := ""
		if b.pgDaemons > 1 {
			if t, err = b.startSpawnedPostgres(ctx, b.pgDaemons); err != nil {
				return nil, fmt.Errorf("starting the daemons: %w", err)
			}
			defer t.stop()
			break
		}
		if b.pgDaemons == 1 {
			pg = b.cfg.postgres
		}
		if t, err = startSelf(ctx, b.cfg.selfMemory, pg, b.cfg.prefix, b.cfg.logLevel, b.stderr); err != nil {
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
	if b.verifyUs > 0 {
		r.res.VerifyUs = &b.verifyUs
	}
	if t.self {
		r.say("target %s (in-process, %s)", t.base, strings.TrimPrefix(t.label, "self-"))
		r.res.RSSStartMB, _ = rssMB()
	}
	if t.daemon != nil {
		r.say("target %s (svrpd serve, pid %d, %s)", t.base, t.daemon.pid, strings.TrimPrefix(t.label, "spawn-"))
	}
	if len(t.addrs) > 1 {
		r.say("target %d svrpd serve processes on one PostgreSQL database, at %s", len(t.addrs), strings.Join(t.addrs, ", "))
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
	case "accept":
		op, err = r.accept()
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

// dial opens one connection per client.
func (r *benchRun) dial(n int) error {
	r.workers = make([]*worker, n)
	for i := range r.workers {
		c, err := dialClient(r.t.dialAddr(i), i)
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
	unwatch := context.AfterFunc(r.ctx, func() { stop.Store(true) })
	defer unwatch()
	stopProfile, err := r.b.startProfile(r.ctx, r.t)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var statements uint64
	if r.t.statements != nil {
		if statements, err = r.t.statements(); err != nil {
			stopProfile()
			return err
		}
	}
	// The window's clock starts once the profile runs and the counters are read.
	timer := time.AfterFunc(r.b.cfg.duration, func() { stop.Store(true) })
	defer timer.Stop()
	cpuBefore, cpuOK := r.t.serverCPU()
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
					// The request was never sent: its share of the budget goes back to
					// the clients that still have prepared requests.
					left.Add(1)
					exhausted.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpuAfter, cpuAfterOK := r.t.serverCPU()
	cpuOK = cpuOK && cpuAfterOK
	// A daemon's profile runs on past the window, to the whole seconds it was asked for.
	profileErr := stopProfile()

	res := r.res
	if r.t.statements != nil {
		// Statements of the timed window, the flushes of its heartbeats included: the flush
		// after the window is waited for.
		time.Sleep(2 * time.Second)
		after, err := r.t.statements()
		if err != nil {
			return err
		}
		defer func() {
			if res.Ops > 0 {
				per := float64(after-statements) / float64(res.Ops)
				res.StatementsPerOp = &per
			}
		}()
	}
	switch {
	case r.ctx.Err() != nil:
		res.Stopped = "interrupted"
	case budgetSpent.Load():
		res.Stopped = "requests"
	case exhausted.Load():
		res.Stopped = "prepared"
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
	if cpuOK && res.Ops > 0 {
		cpu := cpuAfter - cpuBefore
		total, perOp := round(cpu.Seconds(), 3), round(float64(cpu.Microseconds())/float64(res.Ops), 1)
		res.ServerCPUS, res.ServerCPUUsPerOp = &total, &perOp
		if r.sc.verifies > 0 && r.b.verifyUs > 0 {
			ratio := round(perOp/(float64(r.sc.verifies)*r.b.verifyUs), 2)
			res.CPUVsVerify = &ratio
		}
	}
	return profileErr
}

// serverCPU is the CPU time the target's own processes have used so far; ok is false when it
// has none (in-process, --url) or their time cannot be read.
func (t *benchTarget) serverCPU() (cpu time.Duration, ok bool) {
	for _, d := range t.daemons {
		c, err := processCPU(d.pid)
		if err != nil {
			return 0, false
		}
		cpu += c
	}
	return cpu, len(t.daemons) > 0
}

// worker is one client: a connection, a scratch buffer and its own tallies, so the timed
// loop shares nothing with other clients but the stop flag and the budget.
type worker struct {
	id    int
	conn  *benchConn
	buf   []byte
	next  int
	round int // the heartbeat scenario's round, for its rounds of fresh timestamps
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
		c, err := dialClient(r.t.dialAddr(len(ws)), len(ws))
		if err != nil {
			closeExtra()
			return nil, nil, fmt.Errorf("connecting to %s: %w", r.t.base, err)
		}
		ws = append(ws, &worker{id: len(ws), conn: c})
	}
	return ws, closeExtra, nil
}
