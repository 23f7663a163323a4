package daemon

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/svrpdtest"
)

// TestCrashSafety kills the daemon with SIGKILL at a random moment while four clients
// register nodes, log in and drive binding handshakes, restarts it on the same data
// directory, and checks that every write it acknowledged with a 2xx survived and that no
// session was left VERIFYING. It repeats for SVRPD_CRASH_ROUNDS rounds (3 by default, so a
// plain go test stays quick), on one data directory, so each restart checks the writes of
// every earlier round too. A longer run, for example:
//
//	SVRPD_CRASH_ROUNDS=200 go test ./svrpd -run TestCrashSafety -v -timeout 60m
func TestCrashSafety(t *testing.T) {
	rounds := 3
	if v := os.Getenv("SVRPD_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SVRPD_CRASH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	bin := svrpdtest.Binary(t)
	data := t.TempDir()
	log := &crashLog{}
	ledger := newCrashLedger()
	d := crashStart(t, bin, data, log)
	for round := 1; round <= rounds; round++ {
		c := newCrashClient(d.url)
		stop := make(chan struct{})
		var killed atomic.Bool
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for w := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := crashWorker(c, ledger, fmt.Sprintf("r%d-w%d", round, w), stop)
				// Every request fails once the process is gone; only a failure while it
				// was still up is the server's fault.
				if err != nil && !killed.Load() {
					errs[w] = err
				}
			}()
		}
		// The kill lands anywhere in the traffic: between requests, inside a commit, in the
		// middle of an answer.
		delay := time.Duration(100+rand.IntN(1400)) * time.Millisecond
		time.Sleep(delay)
		killed.Store(true)
		before := ledger.acknowledged()
		d.signal(t, syscall.SIGKILL)
		close(stop)
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Errorf("round %d worker %d failed before the kill: %v", round, w, err)
			}
		}
		d = crashStart(t, bin, data, log)
		ledger.verify(t, newCrashClient(d.url))
		t.Logf("round %d: SIGKILL after %v with %d writes acknowledged so far; after restart every one is there, no session VERIFYING", round, delay, before)
		if t.Failed() {
			break
		}
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("svrpd exited %d on SIGTERM", code)
	}
	// The daemon logged every request at debug level through all of this; no secret the
	// clients saw may be in its log.
	all := log.String()
	ledger.mu.Lock()
	for v, what := range ledger.secrets {
		if v != "" && strings.Contains(all, v) {
			t.Errorf("the daemon's log contains a %s", what)
		}
	}
	n := len(ledger.secrets)
	ledger.mu.Unlock()
	if !strings.Contains(all, `msg=request`) {
		t.Errorf("the daemon logged no request at debug level")
	}
	t.Logf("%d rounds; %d secrets absent from %d log lines", rounds, n, strings.Count(all, "\n")+1)
}

func (l *crashLedger) acknowledged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}

// TestCrashSafetyDiskFilling is TestCrashSafety with the data directory on a small tmpfs
// that fills up during each round: at a random moment a filler takes the volume below the
// reserve, the workers' writes are refused with 503 STORE_UNAVAILABLE (and retried), and a
// moment later the daemon is killed with SIGKILL. The filler is removed, the daemon
// restarted, and every write acknowledged before the volume filled must be there. It needs
// root for the mount.
func TestCrashSafetyDiskFilling(t *testing.T) {
	tmp := mountTmpfs(t, "96m")
	bin := svrpdtest.Binary(t)
	data := filepath.Join(tmp, "data")
	filler := filepath.Join(tmp, "filler")
	flags := []string{"--disk-reserve", "24MiB"}
	log := &crashLog{}
	ledger := newCrashLedger()
	d := crashStart(t, bin, data, log, flags...)
	var refusedTotal int64
	for round := 1; round <= 3; round++ {
		c := newCrashClient(d.url)
		stop := make(chan struct{})
		var killed atomic.Bool
		var refused atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for w := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A refusal ends a worker's journey; it starts a new one (a new login, new
				// nodes) until the round stops.
				for attempt := 0; ; attempt++ {
					err := crashWorker(c, ledger, fmt.Sprintf("f%d-w%d-a%d", round, w, attempt), stop)
					if err == nil || killed.Load() {
						return
					}
					if !strings.Contains(err.Error(), "503 STORE_UNAVAILABLE") {
						errs[w] = err
						return
					}
					refused.Add(1)
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		fillTo(t, filler, 20<<20)
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		killed.Store(true)
		before := ledger.acknowledged()
		d.signal(t, syscall.SIGKILL)
		close(stop)
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Errorf("round %d worker %d failed before the kill: %v", round, w, err)
			}
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		d = crashStart(t, bin, data, log, flags...)
		ledger.verify(t, newCrashClient(d.url))
		refusedTotal += refused.Load()
		t.Logf("round %d: volume filled, %d journeys refused, SIGKILL with %d writes acknowledged so far; after restart every one is there", round, refused.Load(), before)
		if t.Failed() {
			break
		}
	}
	if refusedTotal == 0 {
		t.Errorf("no write was refused: the volume never went below the reserve")
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("svrpd exited %d on SIGTERM", code)
	}
	checkNoCrash(t, log.String())
}
