package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svrp/svrp/internal/pause"
)

// A spawned daemon is svrpd serve in a process of its own, so that what /proc says about it
// is the daemon's CPU and memory alone, without the load generator's.

const (
	// daemonServeTimeout bounds how long a fresh daemon may take to log that it serves.
	daemonServeTimeout = time.Minute
	// daemonStopTimeout is how long a daemon has to exit after SIGTERM before it is killed:
	// serve drains requests for at most 15 s, then closes the store.
	daemonStopTimeout = 30 * time.Second
	// daemonTailLines is how much of a daemon's log is kept to explain a failure.
	daemonTailLines = 20
)

// unboundedLimits are serve's arguments that raise its per-address and global limits, so
// that setup can register every node and the load can log in and bind from one address. The
// operator's own session quota stays: the login scenario's operator logs in again and again,
// and past its quota each login ends its oldest session, as a real operator's would.
func unboundedLimits() []string {
	var args []string
	for _, f := range []string{
		"register-address-limit", "resolve-address-limit", "initiate-address-limit", "initiate-key-limit",
		"max-nodes", "max-binding-sessions", "max-bearer-sessions", "login-address-limit",
		"login-failure-address-limit", "login-failure-operator-limit", "resolve-operator-limit",
		"resolve-global-limit", "malformed-address-limit",
		"max-nodes-per-client", "max-nodes-per-block", "max-nodes-per-network",
		"max-binding-sessions-per-client", "max-binding-sessions-per-block", "max-binding-sessions-per-network",
		"max-bearer-sessions-per-client", "max-bearer-sessions-per-block", "max-bearer-sessions-per-network",
	} {
		args = append(args, "--"+f, "1073741824")
	}
	// Connections are bounded by the open-file limit, which serve lowers its cap to fit.
	return append(args, "--max-connections", "16384", "--max-connections-per-address", "16384")
}

// daemon is svrpd serve running as a child of bench.
type daemon struct {
	cmd     *exec.Cmd
	pid     int
	dir     string        // its temporary data directory, removed when it stops; "" for none
	exited  chan struct{} // closed once the child has been waited for
	waitErr error         // the child's exit, valid once exited is closed
	logDone chan struct{} // closed when its log reaches EOF
	serving chan struct{} // closed when it logs "svrpd serving"

	mu        sync.Mutex
	addr      string // host:port from the "svrpd serving" line
	scheme    string // http, or https when served over TLS
	debugAddr string // host:port of its profiler, when started with --debug-listen
	tail      []string
}

// spawn starts bin as svrpd serve on a free loopback port with args after bench's own, and
// returns once it has logged that it serves, or fails and leaves no process behind. Unless
// args name a store (--data, --memory, --postgres), it runs on Badger in a temporary
// directory. Lines of its log at relayLevel or above are copied to relay.
func spawn(ctx context.Context, bin string, args []string, relay io.Writer, relayLevel slog.Level) (*daemon, error) {
	d := &daemon{exited: make(chan struct{}), logDone: make(chan struct{}), serving: make(chan struct{})}
	argv := []string{"serve", "--listen", "127.0.0.1:0"}
	if !slices.ContainsFunc(args, namesStore) {
		dir, err := os.MkdirTemp("", "svrpd-bench-")
		if err != nil {
			return nil, err
		}
		d.dir = dir
		argv = append(argv, "--data", dir)
	}
	// The log level and format go last: bench learns the address from the info line
	// "svrpd serving" in the text format, whatever args say.
	argv = append(append(argv, args...), "--log-level", "info", "--log-format", "text")
	pr, pw, err := os.Pipe()
	if err != nil {
		d.removeDir()
		return nil, err
	}
	d.cmd = exec.Command(bin, argv...)
	d.cmd.Env = daemonEnv()
	// An *os.File is handed to the child as is, so Wait does not depend on bench reading the log.
	d.cmd.Stderr = pw
	setDaemonDeathSignal(d.cmd)
	err = d.cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		d.removeDir()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	d.pid = d.cmd.Process.Pid
	go d.readLog(pr, relay, relayLevel)
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	timer := time.NewTimer(daemonServeTimeout)
	defer timer.Stop()
	select {
	case <-d.serving:
		return d, nil
	case <-d.exited:
		d.removeDir()
		return nil, fmt.Errorf("svrpd serve exited before serving (%v)%s", d.waitErr, d.tailText())
	case <-ctx.Done():
		d.kill()
		return nil, ctx.Err()
	case <-timer.C:
		d.kill()
		return nil, fmt.Errorf("svrpd serve did not log that it serves within %s; killed it%s", daemonServeTimeout, d.tailText())
	}
}

// namesStore reports whether a serve argument chooses the store.
func namesStore(arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return strings.HasPrefix(arg, "-") && (name == "data" || name == "memory" || name == "postgres")
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

// readLog reads the daemon's log to its end: a daemon whose stderr pipe fills up blocks on
// its next log line.
func (d *daemon) readLog(pr *os.File, relay io.Writer, relayLevel slog.Level) {
	defer close(d.logDone)
	defer pr.Close()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		d.note(line)
		if relay != nil && logLevelOf(line) >= relayLevel {
			fmt.Fprintf(relay, "svrpd serve: %s\n", line)
		}
	}
	io.Copy(io.Discard, pr)
}

// note keeps the end of the log and learns the address from the "svrpd serving" line.
func (d *daemon) note(line string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tail = append(d.tail, line)
	if len(d.tail) > daemonTailLines {
		d.tail = d.tail[len(d.tail)-daemonTailLines:]
	}
	if d.addr != "" || !strings.Contains(line, `msg="svrpd serving"`) {
		return
	}
	scheme, addr, ok := strings.Cut(logField(line, "addr"), "://")
	if !ok || addr == "" || (scheme != "http" && scheme != "https") {
		return
	}
	d.addr, d.scheme = addr, scheme
	d.debugAddr = strings.TrimSuffix(strings.TrimPrefix(logField(line, "pprof"), "http://"), "/debug/pprof/")
	close(d.serving)
}

// logField returns the value of key=value in a line of slog's text format; the values bench
// reads (addresses, levels) are never quoted.
func logField(line, key string) string {
	i := strings.Index(" "+line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+1:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// logLevelOf is the level of a line of slog's text format; a line without one (a panic's
// trace) counts as an error.
func logLevelOf(line string) slog.Level {
	var l slog.Level
	if l.UnmarshalText([]byte(logField(line, "level"))) != nil {
		return slog.LevelError
	}
	return l
}

// tailText is the end of the daemon's log, for an error message.
func (d *daemon) tailText() string {
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

func (d *daemon) removeDir() {
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// kill ends the daemon at once and waits for it.
func (d *daemon) kill() {
	d.cmd.Process.Kill()
	<-d.exited
	d.removeDir()
}

// stop sends SIGTERM, waits for the daemon to exit, and kills it if it has not within
// daemonStopTimeout. It returns an error unless the daemon exited 0 on its own.
func (d *daemon) stop() error {
	defer d.removeDir()
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

// memory is the daemon's resident set and its peak, in MB, from /proc/<pid>/status.
func (d *daemon) memory() (rss, peak float64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid) + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("reading the daemon's memory: %w", err)
	}
	for line := range bytes.Lines(b) {
		name, value, _ := bytes.Cut(line, []byte(":"))
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(string(value)), " kB"), 64)
		switch {
		case err != nil:
		case string(name) == "VmRSS":
			rss = round(kb/1024, 1)
		case string(name) == "VmHWM":
			peak = round(kb/1024, 1)
		}
	}
	if rss == 0 || peak == 0 {
		return 0, 0, errors.New("reading the daemon's memory: no VmRSS or VmHWM in /proc/<pid>/status")
	}
	return rss, peak, nil
}

// cpuOver is the daemon's CPU time over the next d, as a share of one core.
func (d *daemon) cpuOver(ctx context.Context, dur time.Duration) (float64, error) {
	c0, err := processCPU(d.pid)
	if err != nil {
		return 0, err
	}
	if err := pause.For(ctx, dur); err != nil {
		return 0, err
	}
	c1, err := processCPU(d.pid)
	return (c1 - c0).Seconds() / dur.Seconds(), err
}

// resetPeak sets the daemon's VmHWM to its resident set now (Linux 4.0 and later), so that
// the peak read later is that of what followed.
func (d *daemon) resetPeak() {
	os.WriteFile("/proc/"+strconv.Itoa(d.pid)+"/clear_refs", []byte("5"), 0)
}

// profileSettle is how long bench waits after asking a daemon for its CPU profile before
// the window begins: the daemon answers only when the profile ends, so nothing tells when
// it began.
const profileSettle = 250 * time.Millisecond

// profile asks the daemon's profiler for a CPU profile that covers a window of the given
// duration, in the whole seconds the profiler takes, and writes it to path as it arrives.
// stop waits for its end.
func (d *daemon) profile(ctx context.Context, path string, window time.Duration) (stop func() error, err error) {
	if d.debugAddr == "" {
		return nil, errors.New("the daemon did not name its profiler's address (pprof=) in its \"svrpd serving\" line")
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	seconds := int64(math.Ceil((profileSettle + window).Seconds())) + 1
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.debugAddr, seconds)
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, res.Status)
			}
			_, err = io.Copy(f, res.Body)
			return err
		}()
	}()
	fail := func(err error) error {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("the daemon's CPU profile: %w", err)
	}
	select {
	case err := <-done:
		if err == nil {
			err = errors.New("it ended before the window began")
		}
		return nil, fail(err)
	case <-time.After(profileSettle):
	}
	return func() error {
		if err := <-done; err != nil {
			return fail(err)
		}
		return f.Close()
	}, nil
}
