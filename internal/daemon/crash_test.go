package daemon

import (
	"fmt"
	"math/rand/v2"
	"os"
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
//	SVRPD_CRASH_ROUNDS=200 go test ./internal/daemon -run TestCrashSafety -v -timeout 60m
//
// The moments of the kills come from a seed, printed when the test fails; SVRPD_CRASH_SEED
// replays them. The traffic around a kill still depends on the machine's timing, so a replay
// repeats the schedule, not every byte.
func TestCrashSafety(t *testing.T) {
	rounds := 3
	if v := os.Getenv("SVRPD_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SVRPD_CRASH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	rng := crashRand(t)
	data := t.TempDir()
	log := &svrpdtest.Log{}
	ledger := newCrashLedger()
	d := crashStart(t, data, log)
	for round := 1; round <= rounds; round++ {
		c := newCrashClient(d.URL)
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
		delay := time.Duration(100+rng.IntN(1400)) * time.Millisecond
		time.Sleep(delay)
		killed.Store(true)
		before := ledger.acknowledged()
		d.Signal(t, syscall.SIGKILL)
		close(stop)
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Errorf("round %d worker %d failed before the kill: %v", round, w, err)
			}
		}
		d = crashStart(t, data, log)
		ledger.verify(t, newCrashClient(d.URL))
		t.Logf("round %d: SIGKILL after %v with %d writes acknowledged so far; after restart every one is there, no session VERIFYING", round, delay, before)
		if t.Failed() {
			break
		}
	}
	if code := d.Signal(t, syscall.SIGTERM); code != 0 {
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

// crashRand is the source of a crash test's delays, seeded by SVRPD_CRASH_SEED when set and
// afresh otherwise; a failed test prints its seed.
func crashRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if v := os.Getenv("SVRPD_CRASH_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SVRPD_CRASH_SEED=%q: want an unsigned decimal number", v)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("delays from SVRPD_CRASH_SEED=%d; set it to replay them", seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed))
}

func (l *crashLedger) acknowledged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}
