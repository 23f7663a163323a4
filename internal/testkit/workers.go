package testkit

import "sync"

// Workers are goroutines that each do one piece of work over and over, as a test's load,
// until the test stops them.
type Workers struct {
	stop chan struct{}
	wg   sync.WaitGroup
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

// Stop lets each worker finish the call it is in, and waits for them all.
func (ws *Workers) Stop() {
	close(ws.stop)
	ws.wg.Wait()
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
