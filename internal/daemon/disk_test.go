//go:build linux

package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
)

// The disk tests run svrpd as a process over a data directory that fails under it: a small
// tmpfs that fills up, a directory removed or made immutable. Those that mount or change
// file attributes need root and skip without it; CI runs as root, so they run there as part
// of go test ./... Every one is bounded by crashStepTimeout per step and speaks only to
// loopback.

// diskNotice bounds how long the daemon may take to notice a fault of its directory: it
// looks every second when nothing writes, and at every write.
const diskNotice = 3 * time.Second

func needRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("skipped: %s needs root (CI runs as root)", what)
	}
}

// mountTmpfs mounts a tmpfs of size (as mount's size= takes it) in a fresh temporary
// directory and unmounts it when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	needRoot(t, "mounting a tmpfs")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs here (%v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// immutable sets or clears chattr +i on dir; setting skips the test where the file system
// does not support it.
func immutable(t *testing.T, dir string, on bool) {
	t.Helper()
	flag := "-i"
	if on {
		needRoot(t, "chattr +i")
		flag = "+i"
	}
	if out, err := exec.Command("chattr", flag, dir).CombinedOutput(); err != nil {
		if on {
			t.Skipf("skipped: chattr +i is not possible here (%v: %s)", err, bytes.TrimSpace(out))
		}
		t.Errorf("chattr -i %s: %v: %s", dir, err, out)
	}
}

func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// fillTo grows the file at path until its volume has at most leave bytes free (0: as
// little as it will give).
func fillTo(t *testing.T, path string, leave uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for chunk := int64(64 << 20); chunk >= 4096; {
		free := freeBytes(t, filepath.Dir(path))
		if free <= leave {
			return
		}
		want := min(int64(free-leave), chunk)
		fi, _ := f.Stat()
		if err := syscall.Fallocate(int(f.Fd()), 0, fi.Size(), want); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk /= 2
		}
	}
}

// diskRegister registers one new node and records it in l when acknowledged. It returns
// the answer's status and code, 0 after a transport failure (which fails the test).
func diskRegister(t *testing.T, c *crashClient, l *crashLedger) (int, string) {
	t.Helper()
	n := newCrashNode()
	endpoint := "203.0.113.9:7000"
	reg := api.RegisterRequest{DID: n.did, PublicKey: n.key.Hex(), Endpoint: endpoint, Capabilities: []string{"inference"}}
	sig := crashSign(n.priv, canonical.Register{DID: n.did, PublicKey: n.key.Base58(), Endpoint: endpoint, Capabilities: reg.Capabilities})
	reg.Signature = &sig
	var rr api.RegisterResult
	status, code, err := c.call("POST", "/api/v1/register", reg, "", &rr)
	if err != nil {
		t.Errorf("register: %v", err)
		return 0, ""
	}
	if status == http.StatusOK {
		l.ackNode(n.key, endpoint, rr.Data.LastSeen)
	}
	return status, code
}

// diskHealth reads GET /health, which must answer 200 whatever the disk does.
func diskHealth(t *testing.T, c *crashClient) (status, store string, count int) {
	t.Helper()
	var h struct {
		Status string `json:"status"`
		Count  int    `json:"count"`
		Store  string `json:"store"`
	}
	if _, _, err := mustOK(c.call("GET", "/health", nil, "", &h)); err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	return h.Status, h.Store, h.Count
}

// awaitRefused registers until a write is refused with 503 STORE_UNAVAILABLE and returns
// how long that took; any other refusal fails the test.
func awaitRefused(t *testing.T, c *crashClient, l *crashLedger, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		status, code := diskRegister(t, c, l)
		if status == http.StatusServiceUnavailable && code == "STORE_UNAVAILABLE" {
			return time.Since(start)
		}
		if status != http.StatusOK {
			t.Fatalf("register: %d %s, want 200 or 503 STORE_UNAVAILABLE", status, code)
		}
	}
	t.Fatalf("writes were still accepted %v after the fault", within)
	return 0
}

// checkReadsServe checks that the public reads answer 200 and that the node count is what
// was acknowledged.
func checkReadsServe(t *testing.T, c *crashClient, l *crashLedger, wantStore string) {
	t.Helper()
	status, store, count := diskHealth(t, c)
	l.mu.Lock()
	acked := len(l.nodes)
	l.mu.Unlock()
	if status == "ok" || store != wantStore || count != acked {
		t.Errorf("health: status %q store %q count %d; want a status other than ok, store %q, count %d", status, store, count, wantStore, acked)
	}
	for _, path := range []string{"/nodes", "/peers", "/api/v1/peers"} {
		if _, _, err := mustOK(c.call("GET", path, nil, "", nil)); err != nil {
			t.Errorf("GET %s while writes are refused: %v", path, err)
		}
	}
}

// timedSignal sends sig and returns the exit code and how long the process took to end.
func timedSignal(t *testing.T, d *svrpdtest.Daemon, sig syscall.Signal) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	code := d.Signal(t, sig)
	return code, time.Since(start)
}

func countLines(log, substr string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// checkNoCrash fails when the daemon's log shows a panic or a fatal signal.
func checkNoCrash(t *testing.T, log string) {
	t.Helper()
	for _, bad := range []string{"SIGBUS", "panic:", "fatal error:", "goroutine ", `msg="internal error"`} {
		if strings.Contains(log, bad) {
			t.Errorf("the daemon's log contains %q", bad)
		}
	}
}

// checkFaultLog fails when the daemon's log shows a crash, or does not say once per fault
// that the store refuses writes.
func checkFaultLog(t *testing.T, log string, faults int) {
	t.Helper()
	checkNoCrash(t, log)
	if n := countLines(log, `msg="store refuses writes"`); n != faults {
		t.Errorf("%d lines say the store refuses writes; want one per fault (%d)", n, faults)
	}
}

// restartIntact restarts the daemon on data once a fault has passed, checks that every write
// it acknowledged is there, and stops it, which must then go cleanly.
func restartIntact(t *testing.T, data string, log *svrpdtest.Log, l *crashLedger, flags ...string) {
	t.Helper()
	d := crashStart(t, data, log, flags...)
	l.verify(t, newCrashClient(d.URL))
	t.Logf("after restart: %d acknowledged registrations, none lost", len(l.nodes))
	if code := d.Signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM once the fault had passed", code)
	}
}

// TestDiskFull puts the data directory on a 96 MiB tmpfs. First the volume is filled to just
// above the reserve, so that the daemon's own registrations take it below: writes are then
// refused with 503 while reads answer 200, and resume by themselves once the filler is
// removed. Then the volume is filled completely from outside: writes are refused, the daemon
// does not die of SIGBUS, and SIGTERM ends it within its bound, exiting 1 because Badger's
// memtables cannot be written out. After a restart with space back, every acknowledged
// write is there.
func TestDiskFull(t *testing.T) {
	tmp := mountTmpfs(t, "96m")
	data := filepath.Join(tmp, "data")
	filler := filepath.Join(tmp, "filler")
	const reserve = 24 << 20
	flags := []string{"--disk-reserve", "24MiB", "--shutdown-timeout", "10s"}
	log := &svrpdtest.Log{}
	l := newCrashLedger()
	d := crashStart(t, data, log, flags...)
	c := newCrashClient(d.URL)
	for range 50 {
		if status, code := diskRegister(t, c, l); status != http.StatusOK {
			t.Fatalf("register on an empty volume: %d %s", status, code)
		}
	}

	// The daemon's own writes reach the reserve: as many as it takes, however slowly a loaded
	// machine lets them come. Once the free space is below the reserve, a write is refused
	// within a step.
	fillTo(t, filler, reserve+6<<20)
	for deadline := time.Now().Add(10 * crashStepTimeout); freeBytes(t, tmp) >= reserve; {
		status, code := diskRegister(t, c, l)
		if status == http.StatusServiceUnavailable && code == "STORE_UNAVAILABLE" {
			break
		}
		if status != http.StatusOK {
			t.Fatalf("register above the reserve: %d %s, want 200 or 503 STORE_UNAVAILABLE", status, code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%.1f MiB still free after %v of registrations; the reserve is %d MiB", float64(freeBytes(t, tmp))/(1<<20), 10*crashStepTimeout, reserve>>20)
		}
	}
	took := awaitRefused(t, c, l, crashStepTimeout)
	t.Logf("own writes: refused %v after the free space fell below the reserve, %d registrations acknowledged, %.1f MiB free", took, len(l.nodes), float64(freeBytes(t, tmp))/(1<<20))
	checkReadsServe(t, c, l, "low_space")
	if status, code := diskRegister(t, c, l); status != http.StatusServiceUnavailable || code != "STORE_UNAVAILABLE" {
		t.Errorf("register below the reserve: %d %s", status, code)
	}

	// Space returns: writes resume without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		status, code := diskRegister(t, c, l)
		if status == http.StatusOK {
			break
		}
		if time.Since(start) > diskNotice {
			t.Fatalf("writes not resumed %v after space returned: %d %s", diskNotice, status, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes resumed %v after space returned", time.Since(start).Round(time.Millisecond))
	if status, store, _ := diskHealth(t, c); status != "ok" || store != "ok" {
		t.Errorf("health after space returned: status %q store %q", status, store)
	}

	// The volume fills up from outside.
	fillTo(t, filler, 0)
	took = awaitRefused(t, c, l, diskNotice)
	t.Logf("volume full from outside: writes refused after %v", took)
	checkReadsServe(t, c, l, "low_space")
	code, took := timedSignal(t, d, syscall.SIGTERM)
	t.Logf("SIGTERM on a full volume: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 1 {
		t.Errorf("exit %d after SIGTERM on a full volume; want 1 (the store could not close)", code)
	}
	if !strings.Contains(log.String(), "store not closed") {
		t.Errorf("the daemon did not say what it left unflushed")
	}

	// A restart on the full volume still works (the write-ahead logs are small); once the
	// space is back every acknowledged write is there.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	restartIntact(t, data, log, l, flags...)
	checkFaultLog(t, log.String(), 2)
}

// TestDataDirRemoved removes the data directory under a running daemon while it registers
// nodes: no write is acknowledged once the removal is done, the fault is logged once,
// /health reports it, reads keep answering, and SIGTERM ends the process within its bound.
func TestDataDirRemoved(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	log := &svrpdtest.Log{}
	l := newCrashLedger()
	d := crashStart(t, data, log, "--shutdown-timeout", "10s")
	c := newCrashClient(d.URL)

	var removed atomic.Int64 // unix nanoseconds when RemoveAll returned
	var lateAcks, refused, firstRefused atomic.Int64
	workers := testkit.StartWorkers(4, func(int) bool {
		sent := time.Now().UnixNano()
		status, code := diskRegister(t, c, l)
		switch {
		case status == http.StatusOK:
			if r := removed.Load(); r != 0 && sent > r {
				lateAcks.Add(1)
			}
		case status == http.StatusServiceUnavailable && code == "STORE_UNAVAILABLE":
			refused.Add(1)
			firstRefused.CompareAndSwap(0, time.Now().UnixNano())
		default:
			t.Errorf("register: %d %s", status, code)
		}
		return true
	})
	workers.Until(t, "a registration acknowledged before the removal", func() bool { return l.acknowledged() > 0 })
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	removed.Store(time.Now().UnixNano())
	workers.Until(t, "a write refused after the removal", func() bool { return refused.Load() > 0 })
	workers.Stop()
	if n := lateAcks.Load(); n > 0 {
		t.Errorf("%d registrations sent after the directory was removed were acknowledged", n)
	}
	if refused.Load() == 0 {
		t.Errorf("no write was refused after the directory was removed")
	}
	t.Logf("directory removed: first write refused %v after the removal returned; %d writes refused, %d acknowledged after the removal",
		time.Duration(firstRefused.Load()-removed.Load()), refused.Load(), lateAcks.Load())
	checkReadsServe(t, c, l, "gone")

	code, took := timedSignal(t, d, syscall.SIGTERM)
	t.Logf("SIGTERM with the directory gone: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 1 || took > 10*time.Second {
		t.Errorf("exit %d after %v; want 1 within the 10s bound", code, took)
	}
	all := log.String()
	checkFaultLog(t, all, 1)
	if n := countLines(all, "component=badger"); n > 10 {
		t.Errorf("Badger logged %d lines", n)
	}
}

// TestDataDirReadOnly makes the data directory immutable (chattr +i) under an idle daemon:
// it notices within seconds, refuses writes, reports it in /health, exits 1 on SIGTERM
// within its bound, and once the directory is writable again a restart finds every
// acknowledged write.
func TestDataDirReadOnly(t *testing.T) {
	needRoot(t, "chattr +i")
	data := filepath.Join(t.TempDir(), "data")
	log := &svrpdtest.Log{}
	l := newCrashLedger()
	d := crashStart(t, data, log, "--shutdown-timeout", "10s")
	c := newCrashClient(d.URL)
	for range 200 {
		if status, code := diskRegister(t, c, l); status != http.StatusOK {
			t.Fatalf("register: %d %s", status, code)
		}
	}
	immutable(t, data, true)
	t.Cleanup(func() { immutable(t, data, false) })
	start := time.Now()
	for {
		if _, store, _ := diskHealth(t, c); store == "read_only" {
			break
		}
		if time.Since(start) > diskNotice {
			t.Fatalf("the daemon did not notice within %v that its directory became read-only", diskNotice)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("read-only directory noticed by an idle daemon after %v", time.Since(start).Round(time.Millisecond))
	if status, code := diskRegister(t, c, l); status != http.StatusServiceUnavailable || code != "STORE_UNAVAILABLE" {
		t.Errorf("register on a read-only directory: %d %s", status, code)
	}
	checkReadsServe(t, c, l, "read_only")
	code, took := timedSignal(t, d, syscall.SIGTERM)
	t.Logf("SIGTERM with the directory read-only: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 1 || took > 10*time.Second {
		t.Errorf("exit %d after %v; want 1 within the 10s bound", code, took)
	}

	immutable(t, data, false)
	restartIntact(t, data, log, l, "--shutdown-timeout", "10s")
	checkFaultLog(t, log.String(), 1)
}

// holdRequest opens a request whose body never finishes, so that a shutdown has a request
// to drain. The connection closes with the test.
func holdRequest(t *testing.T, url string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /api/v1/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"did\":")
	// The server has read the headers once it answers another request on a new connection
	// after them; a short pause is enough on loopback and the assertions below do not
	// depend on it being exact.
	time.Sleep(200 * time.Millisecond)
}

// TestShutdownBound holds a request open across SIGTERM: the daemon waits for it at most
// half of --shutdown-timeout, then closes the store and exits 0 within the bound.
func TestShutdownBound(t *testing.T) {
	log := &svrpdtest.Log{}
	d := crashStart(t, filepath.Join(t.TempDir(), "data"), log, "--shutdown-timeout", "3s")
	holdRequest(t, d.URL)
	code, took := timedSignal(t, d, syscall.SIGTERM)
	t.Logf("SIGTERM with a request held open: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 || took > 3*time.Second+time.Second {
		t.Errorf("exit %d after %v; want 0 within the 3s bound", code, took)
	}
	if !strings.Contains(log.String(), "requests still open at the drain deadline") || !strings.Contains(log.String(), `msg="store closed"`) {
		t.Errorf("the log does not show the drain cut short and the store closed:\n%s", log)
	}
}

// TestSecondSignal sends SIGTERM while a request holds the shutdown up, then SIGINT: the
// second signal ends the process at once with status 1.
func TestSecondSignal(t *testing.T) {
	log := &svrpdtest.Log{}
	d := crashStart(t, filepath.Join(t.TempDir(), "data"), log, "--shutdown-timeout", "60s")
	holdRequest(t, d.URL)
	d.Send(t, syscall.SIGTERM)
	select {
	case <-d.Done():
		t.Fatalf("the daemon ended (exit %d) while a request was still open", d.Exit())
	case <-time.After(500 * time.Millisecond):
	}
	code, took := timedSignal(t, d, syscall.SIGINT)
	t.Logf("second signal: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 1 || took > time.Second {
		t.Errorf("exit %d after %v; want 1 at once", code, took)
	}
	if !strings.Contains(log.String(), "second signal") {
		t.Errorf("the daemon did not say why it exited")
	}
}

// startFailure runs svrpd serve and returns its exit code and stderr lines; it must end by
// itself within crashStepTimeout.
func startFailure(t *testing.T, bin string, args ...string) (int, []string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = svrpdtest.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(crashStepTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("svrpd %v did not end within %v", args, crashStepTimeout)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	var lines []string
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return code, lines
}

// TestStartOnBadDisk starts svrpd on directories it must refuse: each attempt ends at once
// with status 1 and one line that says why, never a panic trace.
func TestStartOnBadDisk(t *testing.T) {
	bin := svrpdtest.Binary(t)
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns the data directory
		want  string
	}{
		{"not a data directory", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "not a svrpd data directory"},
		{"locked by another process", func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "data")
			crashStart(t, dir, &svrpdtest.Log{})
			return dir
		}, "locked by another process"},
		{"read-only", func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			immutable(t, dir, true)
			t.Cleanup(func() { immutable(t, dir, false) })
			return dir
		}, "read-only"},
		{"no space", func(t *testing.T) string {
			// A data directory that served before, on a volume filled since.
			tmp := mountTmpfs(t, "32m")
			dir := filepath.Join(tmp, "data")
			d := crashStart(t, dir, &svrpdtest.Log{}, "--disk-reserve", "1MiB")
			if code := d.Signal(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit %d", code)
			}
			fillTo(t, filepath.Join(tmp, "filler"), 0)
			return dir
		}, "no space left"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t)
			start := time.Now()
			code, lines := startFailure(t, bin, "--listen", "127.0.0.1:0", "--data", dir)
			took := time.Since(start)
			if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], `msg="svrpd cannot start"`) || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one line saying %q", code, strings.Join(lines, "\n"), tc.want)
			}
			t.Logf("%s: exit 1 after %v: %s", tc.name, took.Round(time.Millisecond), lines[0])
		})
	}
}

// TestNothingOnDiskBeforeListening starts svrpd on an address already taken: it fails
// without creating its data directory.
func TestNothingOnDiskBeforeListening(t *testing.T) {
	bin := svrpdtest.Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	code, lines := startFailure(t, bin, "--listen", ln.Addr().String(), "--data", data)
	if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "address already in use") {
		t.Errorf("exit %d, stderr:\n%s", code, strings.Join(lines, "\n"))
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory exists after a failed listen: %v", err)
	}
}

// TestCrashSafetyDiskFilling is TestCrashSafety with the data directory on a small tmpfs
// that fills up during each round: at a random moment a filler takes the volume below the
// reserve, the workers' writes are refused with 503 STORE_UNAVAILABLE (and retried), and a
// moment later the daemon is killed with SIGKILL. The filler is removed, the daemon
// restarted, and every write acknowledged before the volume filled must be there. It needs
// root for the mount.
func TestCrashSafetyDiskFilling(t *testing.T) {
	tmp := mountTmpfs(t, "96m")
	data := filepath.Join(tmp, "data")
	filler := filepath.Join(tmp, "filler")
	flags := []string{"--disk-reserve", "24MiB"}
	log := &svrpdtest.Log{}
	ledger := newCrashLedger()
	rng := crashRand(t)
	d := crashStart(t, data, log, flags...)
	var refusedTotal int64
	for round := 1; round <= 3; round++ {
		c := newCrashClient(d.URL)
		var refused atomic.Int64
		wait := func() {
			time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
			fillTo(t, filler, 20<<20)
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		}
		before := killRound(t, d, ledger, round, wait, func(w int, stop <-chan struct{}) error {
			// A refusal ends a worker's journey; it starts a new one (a new login, new
			// nodes) until the round stops.
			for attempt := 0; ; attempt++ {
				err := crashWorker(c, ledger, fmt.Sprintf("f%d-w%d-a%d", round, w, attempt), stop)
				if err == nil || !strings.Contains(err.Error(), "503 STORE_UNAVAILABLE") {
					return err
				}
				refused.Add(1)
				select {
				case <-stop:
					return nil
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		d = crashStart(t, data, log, flags...)
		ledger.verify(t, newCrashClient(d.URL))
		refusedTotal += refused.Load()
		t.Logf("round %d: volume filled, %d journeys refused, SIGKILL with %d writes acknowledged so far; after restart every one is there", round, refused.Load(), before)
		if t.Failed() {
			break
		}
	}
	if refusedTotal == 0 {
		t.Errorf("no write was refused: the volume never went below the reserve")
	}
	if code := d.Signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("svrpd exited %d on SIGTERM", code)
	}
	checkNoCrash(t, log.String())
}
