package testkit

import (
	"sync"
	"testing"
	"time"
)

// Workers are goroutines that each do one piece of work over and over, as a test's load,
// until the test stops them.
type Workers struct {
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// StartWorkers starts n goroutines: goroutine w calls work(w) again and again, until work
// returns false or Stop is called.
func StartWorkers(n int, work func(w int) bool) *Workers {
	ws := &Workers{stop: make(chan struct{})}
	for w := range n {
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			for {
				select {
				case <-ws.stop:
					return
				default:
				}
				if !work(w) {
					return
				}
			}
		}()
	}
	return ws
}

// Stop lets each worker finish the call it is in, and waits for them all. Calls after the
// first only wait.
func (ws *Workers) Stop() {
	ws.stopOnce.Do(func() { close(ws.stop) })
	ws.wg.Wait()
}

// WaitBound bounds a test's wait for a state that normally comes within a second or so. It
// is far above that, so that only a state that never comes fails a test, not a loaded
// machine.
const WaitBound = time.Minute

// Until waits, while the workers run, until cond holds: the load has reached the state the
// test needs next. Past WaitBound it stops the workers and fails t.
func (ws *Workers) Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(WaitBound); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			ws.Stop()
			t.Fatalf("not within %v: %s", WaitBound, what)
		}
	}
}

// Together calls fn(0) to fn(n-1) each in a goroutine of its own, all at once, and returns
// once every call has returned.
func Together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
