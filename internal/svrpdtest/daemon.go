package svrpdtest

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StepTimeout bounds one step of a daemon's life in a test (start, stop, a signal's effect);
// each normally takes well under a second, and a loaded machine may stretch that a lot.
const StepTimeout = 60 * time.Second

// servingLine is the log line svrpd serve writes once it listens, with the address: IPv4
// loopback, or an IPv6 address for a test that runs in a network namespace of its own.
var servingLine = regexp.MustCompile(`msg="svrpd serving" addr=(https?://(?:127\.0\.0\.1|\[[0-9a-f:]+\]):\d+)`)

// Env is the test's environment without SVRPD_ variables, plus extra: the daemon reads
// SVRPD_ variables for flags it was not given, and the test's own must not reach it.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVRPD_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Log keeps every line one or more daemons write to stderr, safe to read while they run.
type Log struct {
	mu    sync.Mutex
	lines []string
}

func (l *Log) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// Lines returns a copy of the lines so far.
func (l *Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *Log) String() string {
	return strings.Join(l.Lines(), "\n")
}

// Process is a command a test started; the test's end kills it if it still runs.
type Process struct {
	Cmd *exec.Cmd

	done chan struct{}
	exit int
}

// StartProcess starts cmd and watches for its end.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return watch(t, cmd, nil)
}

// watch waits for the started cmd to end, once drained (if not nil) is closed: Wait closes
// the pipes, so it must not run before their reader is done.
func watch(t testing.TB, cmd *exec.Cmd, drained <-chan struct{}) *Process {
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		if drained != nil {
			<-drained
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.exit = ee.ExitCode()
		default:
			p.exit = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Pid is the process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has ended (and, for a Daemon, its stderr is read).
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit is the exit code, -1 when a signal ended it; valid once Done is closed.
func (p *Process) Exit() int { return p.exit }

// Send sends sig without waiting; a process that has already ended is no error.
func (p *Process) Send(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
}

// Signal sends sig and waits for the process to end; it returns the exit code, -1 when a
// signal ended it.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	p.Send(t, sig)
	select {
	case <-p.done:
		return p.exit
	case <-time.After(StepTimeout):
		t.Fatalf("%v did not end within %v of %v", p.Cmd.Args, StepTimeout, sig)
		return 0
	}
}

// Stop ends the process gently, SIGTERM and, past StepTimeout, SIGKILL, asserting nothing.
func (p *Process) Stop() {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(StepTimeout):
		p.Cmd.Process.Kill()
		<-p.done
	}
}

// Daemon is one run of svrpd serve as a separate process.
type Daemon struct {
	*Process
	URL string // the base URL, once it serves
	Log *Log   // its stderr, line by line

	serving chan string
}

// Start runs svrpd serve --listen 127.0.0.1:0 with args and returns once it serves, its URL
// read from the "svrpd serving" log line. Its stderr goes to log, which several runs may
// share; a nil log gets a new one. The test's end kills it if it still runs.
func Start(t testing.TB, log *Log, args ...string) *Daemon {
	t.Helper()
	if log == nil {
		log = &Log{}
	}
	cmd := exec.Command(Binary(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = Env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Log: log, serving: make(chan string, 1)}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			log.add(sc.Text())
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case d.serving <- m[1]:
				default:
				}
			}
		}
	}()
	d.Process = watch(t, cmd, scanned)
	select {
	case d.URL = <-d.serving:
		return d
	case <-d.done:
		t.Fatalf("svrpd serve exited %d before serving:\n%s", d.exit, d.Log)
	case <-time.After(StepTimeout):
		t.Fatalf("svrpd serve did not serve within %v:\n%s", StepTimeout, d.Log)
	}
	return nil
}

// Main runs a test package's tests and then removes the binary Binary built: a test
// package that runs svrpd as a process calls it from its TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
