package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svrp/svrp/internal/daemon"
)

// A spawned daemon is svrpd serve in a process of its own, so that what /proc says about
// it is the daemon's memory alone, without the generator's prepared requests and buffers.

const (
	// daemonServeTimeout bounds how long a fresh daemon may take to log that it serves.
	daemonServeTimeout = time.Minute
	// daemonStopTimeout is how long a daemon has to exit after SIGTERM before it is killed:
	// serve drains requests for at most 15 s, then closes the store.
	daemonStopTimeout = 30 * time.Second
	// daemonTailLines is how much of a daemon's log is kept to explain a failure.
	daemonTailLines = 20
	// daemonSampleEvery is how often a daemon's resident set is sampled during a window.
	daemonSampleEvery = 50 * time.Millisecond
)

// benchDaemon is svrpd serve running as a child of bench.
type benchDaemon struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time     // just before exec
	exited  chan struct{} // closed once the child has been waited for
	waitErr error         // the child's exit, valid once exited is closed
	logDone chan struct{} // closed when its log reaches EOF
	serving chan struct{} // closed when it logs "svrpd serving"

	mu          sync.Mutex
	addr        string // host:port from the "svrpd serving" line
	debugAddr   string // host:port of its profiler, when started with --debug-listen
	servingAt   time.Time
	tableLoad   time.Duration // took= of the "node table loaded" line
	tableNodes  int
	tableLogged bool
	tail        []string
}

// daemonArgs are the arguments of svrpd serve for a daemon bench loads: a free loopback
// port and limits raised so that setup can register every node from one address. The log
// level is info because the "svrpd serving" line is how bench learns the address; the
// format is given because an SVRPD_LOG_FORMAT of json would hide that line from bench.
func daemonArgs(memory bool, dataDir, prefix string) []string {
	if memory {
		return daemonArgsOn([]string{"--memory"}, prefix)
	}
	return daemonArgsOn([]string{"--data", dataDir}, prefix)
}

// daemonArgsOn is daemonArgs with the store given by its flags.
func daemonArgsOn(storeArgs []string, prefix string) []string {
	args := append([]string{"serve", "--listen", "127.0.0.1:0"}, storeArgs...)
	const unbounded = "1073741824"
	for _, f := range []string{
		"register-address-limit", "resolve-address-limit", "initiate-address-limit",
		"max-binding-sessions", "max-bearer-sessions", "login-address-limit",
		"login-failure-address-limit", "login-failure-operator-limit",
		"resolve-operator-limit", "resolve-global-limit",
	} {
		args = append(args, "--"+f, unbounded)
	}
	conns := strconv.Itoa(DefaultBenchMaxConnections)
	return append(args, "--max-connections", conns, "--max-connections-per-address", conns,
		"--prefix", prefix, "--log-level", "info", "--log-format", "text")
}

// daemonEnv is bench's environment without SVRPD_ variables: serve reads them for every flag
// it is not given, and bench's own (SVRPD_DURATION, ...) are not meant for it.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVRPD_") {
			env = append(env, kv)
		}
	}
	return env
}

// spawnDaemon starts bin with args by start and returns once it has logged that it serves, or
// fails and leaves no process behind. Lines of its log at relayLevel or above are copied to
// relay.
func spawnDaemon(ctx context.Context, start func(*exec.Cmd) error, bin string, args []string, relay io.Writer, relayLevel slog.Level, limit time.Duration) (*benchDaemon, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = daemonEnv()
	// An *os.File is handed to the child as is: no copying goroutine sits between the
	// daemon and the pipe, so Wait does not depend on bench reading the log.
	cmd.Stderr = pw
	setDaemonDeathSignal(cmd)
	d := &benchDaemon{
		cmd: cmd, exited: make(chan struct{}), logDone: make(chan struct{}), serving: make(chan struct{}),
	}
	d.started = time.Now()
	err = start(cmd)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	d.pid = cmd.Process.Pid
	go d.readLog(pr, relay, relayLevel)
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	if err := d.waitServing(ctx, limit); err != nil {
		return nil, err
	}
	return d, nil
}

// readLog reads the daemon's log to its end. It never stops early: a daemon whose stderr
// pipe fills up blocks on its next log line.
func (d *benchDaemon) readLog(pr *os.File, relay io.Writer, relayLevel slog.Level) {
	defer close(d.logDone)
	defer pr.Close()
	br := bufio.NewReaderSize(pr, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			text := strings.TrimRight(string(line), "\n")
			d.note(text)
			if relay != nil && logLevelOf(text) >= relayLevel {
				fmt.Fprintf(relay, "svrpd serve: %s\n", text)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// note reads what bench needs from one line of the daemon's log.
func (d *benchDaemon) note(line string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tail = append(d.tail, line)
	if len(d.tail) > daemonTailLines {
		d.tail = d.tail[len(d.tail)-daemonTailLines:]
	}
	switch {
	case strings.Contains(line, `msg="node table loaded"`):
		d.tableLogged = true
		d.tableNodes, _ = strconv.Atoi(logField(line, "nodes"))
		d.tableLoad, _ = time.ParseDuration(logField(line, "took"))
	case d.addr == "" && strings.Contains(line, `msg="svrpd serving"`):
		addr, ok := strings.CutPrefix(logField(line, "addr"), "http://")
		if !ok || addr == "" {
			return
		}
		d.addr, d.servingAt = addr, time.Now()
		d.debugAddr = strings.TrimSuffix(strings.TrimPrefix(logField(line, "pprof"), "http://"), "/debug/pprof/")
		close(d.serving)
	}
}

// logField returns the value of key=value in a line of slog's text format; the values
// bench reads (addresses, counts, durations) are never quoted.
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// logLevelOf is the level of a line of slog's text format; a line without one (a panic's
// trace) counts as an error.
func logLevelOf(line string) slog.Level {
	var l slog.Level
	if l.UnmarshalText([]byte(logField(" "+line, "level"))) != nil {
		return slog.LevelError
	}
	return l
}

func (d *benchDaemon) waitServing(ctx context.Context, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-d.serving:
		return nil
	case <-d.exited:
		return fmt.Errorf("svrpd serve exited before serving (%v)%s", d.waitErr, d.tailText())
	case <-ctx.Done():
		d.kill()
		return ctx.Err()
	case <-timer.C:
		d.kill()
		return fmt.Errorf("svrpd serve did not log that it serves within %s; killed it%s", limit, d.tailText())
	}
}

// tailText is the end of the daemon's log, for an error message.
func (d *benchDaemon) tailText() string {
	select {
	case <-d.exited:
		// The log ends when the process does; give the reader a moment to reach its end.
		select {
		case <-d.logDone:
		case <-time.After(time.Second):
		}
	default:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.tail) == 0 {
		return ""
	}
	return "; the end of its log:\n  " + strings.Join(d.tail, "\n  ")
}

// kill ends the daemon at once and waits for it.
func (d *benchDaemon) kill() {
	d.cmd.Process.Kill()
	<-d.exited
}

// stop sends SIGTERM, waits for the daemon to exit, and kills it if it has not within
// daemonStopTimeout. It returns an error unless the daemon exited 0 on its own.
func (d *benchDaemon) stop() error {
	select {
	case <-d.exited:
		return fmt.Errorf("svrpd serve had already exited (%v)%s", d.waitErr, d.tailText())
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.kill()
		return fmt.Errorf("signalling svrpd serve to stop: %w; killed it", err)
	}
	timer := time.NewTimer(daemonStopTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
	case <-timer.C:
		d.kill()
		return fmt.Errorf("svrpd serve did not exit within %s of SIGTERM; killed it%s", daemonStopTimeout, d.tailText())
	}
	if d.waitErr != nil {
		return fmt.Errorf("svrpd serve exited with %v on SIGTERM%s", d.waitErr, d.tailText())
	}
	return nil
}

// daemonMemory is a process's resident set and its peak, in MB, from /proc/<pid>/status.
type daemonMemory struct {
	rss, hwm float64
}

func (d *benchDaemon) memory() (daemonMemory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid) + "/status")
	if err != nil {
		return daemonMemory{}, fmt.Errorf("reading the daemon's memory: %w", err)
	}
	rss, hwm := parseStatus(b)
	if rss == nil || hwm == nil {
		return daemonMemory{}, errors.New("reading the daemon's memory: no VmRSS or VmHWM in /proc/<pid>/status")
	}
	return daemonMemory{rss: *rss, hwm: *hwm}, nil
}

// parseStatus reads VmRSS and VmHWM, in MB, from the text of a /proc/<pid>/status.
func parseStatus(b []byte) (rss, hwm *float64) {
	for line := range bytes.Lines(b) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "VmRSS" && string(name) != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(string(value)), " kB"), 64)
		if err != nil {
			continue
		}
		mb := round(kb/1024, 1)
		if string(name) == "VmRSS" {
			rss = &mb
		} else {
			hwm = &mb
		}
	}
	return rss, hwm
}

// peakWatch follows a daemon's peak resident set through a timed window.
type peakWatch struct {
	d *benchDaemon
	// reset tells whether VmHWM was reset at the start, so that after the window it is the
	// window's own peak rather than setup's.
	reset   bool
	stop    chan struct{}
	done    chan struct{}
	sampled float64
}

// watchPeak resets the daemon's VmHWM to its current resident set (writing 5 to
// /proc/<pid>/clear_refs, Linux 4.0 and later) and samples VmRSS every daemonSampleEvery
// until finish, as a fallback where the reset is refused and as a cross-check.
func (d *benchDaemon) watchPeak(before daemonMemory) *peakWatch {
	w := &peakWatch{d: d, stop: make(chan struct{}), done: make(chan struct{}), sampled: before.rss}
	if os.WriteFile("/proc/"+strconv.Itoa(d.pid)+"/clear_refs", []byte("5"), 0) == nil {
		// A kernel may take the write and ignore it; only a peak that came down, or that had
		// nowhere to come down from, shows the reset worked.
		if m, err := d.memory(); err == nil && (m.hwm < before.hwm || before.hwm <= before.rss) {
			w.reset = true
		}
	}
	go func() {
		defer close(w.done)
		t := time.NewTicker(daemonSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				if m, err := d.memory(); err == nil {
					w.sampled = max(w.sampled, m.rss)
				}
			}
		}
	}()
	return w
}

// finish stops the sampling and returns the window's peak, the resident set now, and
// where the peak comes from.
func (w *peakWatch) finish() (peak float64, now daemonMemory, source string, sampled float64, err error) {
	close(w.stop)
	<-w.done
	now, err = w.d.memory()
	if err != nil {
		return 0, now, "", 0, err
	}
	w.sampled = max(w.sampled, now.rss)
	if w.reset {
		// The kernel's counters are approximate to a fraction of a megabyte, so a sample can
		// land just above VmHWM; the larger is the peak.
		return max(now.hwm, w.sampled), now, "vmhwm", w.sampled, nil
	}
	return w.sampled, now, "sampled", w.sampled, nil
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
	args := append(daemonArgs(memory, dir, b.cfg.prefix), b.cfg.daemonArgs...)
	if b.cfg.cpuProfile != "" {
		// The profile is the daemon's, fetched from its profiler while the window runs.
		args = append(args, "--debug-listen", "127.0.0.1:0")
	}
	level, _ := daemon.ParseLevel(b.cfg.logLevel)
	d, err := spawnDaemon(ctx, b.start, b.daemonBin, args, b.stderr, level, daemonServeTimeout)
	if err != nil {
		cleanup()
		return nil, err
	}
	if b.cfg.cpuProfile != "" && d.debugAddr == "" {
		d.kill()
		cleanup()
		return nil, fmt.Errorf("%s did not name its profiler's address in its \"svrpd serving\" line (pprof=), so --cpuprofile cannot profile it", b.daemonBin)
	}
	host, _, _ := net.SplitHostPort(d.addr)
	return &benchTarget{
		label: label, base: "http://" + d.addr, addr: d.addr, host: d.addr, hostname: host, daemon: d, daemons: []*benchDaemon{d},
		stop: func() {
			if err := d.stop(); err != nil {
				fmt.Fprintf(b.stderr, "svrpd bench: %v\n", err)
				b.stopFailed = true
			}
			cleanup()
		},
	}, nil
}
