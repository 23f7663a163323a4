package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// target is the registry a scenario talks to.
type target struct {
	label string  // "spawn" or the URL, for the JSON line
	base  string  // URL without a trailing slash
	d     *daemon // the spawned daemon; nil for --url
	http  *http.Client
	stop  func()
}

// newHTTP is the generator's HTTP client: the standard one, keeping a connection per
// client alive, and leaving compression to the scenario so that it counts what was sent.
func newHTTP(clients int) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        clients + 16,
		MaxIdleConnsPerHost: clients + 16,
		DisableCompression:  true,
	}}
}

// client is a registry client on the target, for setup.
func (t *target) client(prefix string) *client.Client {
	c, _ := client.New(t.base, client.WithHTTPClient(t.http), client.WithRetry(client.RetryPolicy{}), client.WithPrefix(prefix))
	return c
}

// request is one prepared HTTP request.
type request struct {
	method, path string // path below the target's URL, or an absolute URL
	body         []byte
	header       http.Header
}

// outcome is what one operation got: "" or why it failed, and the bytes it received. took,
// when set, is its latency, for an operation that waits before it sends.
type outcome struct {
	failed string
	bytes  int64
	took   time.Duration
}

// exchange sends r and reads the answer to its end, counting its bytes. An answer whose
// status is not among ok (200 when none is given) fails with its status and error code.
func (t *target) exchange(ctx context.Context, r request, ok ...int) (*http.Response, outcome) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	u := r.path
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		u = t.base + u
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, outcome{failed: err.Error()}
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := t.http.Do(req)
	if err != nil {
		return nil, outcome{failed: transportKind(err)}
	}
	defer res.Body.Close()
	if len(ok) == 0 {
		ok = []int{http.StatusOK}
	}
	o := outcome{bytes: headerBytes(res)}
	if slices.Contains(ok, res.StatusCode) {
		n, err := io.Copy(io.Discard, res.Body)
		o.bytes += n
		if err != nil {
			o.failed = transportKind(err)
		}
		return res, o
	}
	var e api.ErrorBody
	json.NewDecoder(io.LimitReader(res.Body, 4<<10)).Decode(&e)
	o.failed = strings.TrimSpace(fmt.Sprintf("%d %s", res.StatusCode, e.Code))
	return res, o
}

// headerBytes is the size of an answer's status line and headers as HTTP/1.1 sends them.
func headerBytes(res *http.Response) int64 {
	n := len("HTTP/1.1 ") + len(res.Status) + 2 + 2
	for k, vs := range res.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return int64(n)
}

// transportKind names a transport failure without its addresses, so failures group.
func transportKind(err error) string {
	var ne net.Error
	switch {
	case strings.Contains(err.Error(), "connection refused"):
		return "transport: connection refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "transport: connection reset"
	case strings.Contains(err.Error(), "EOF"):
		return "transport: closed by the server"
	case errors.As(err, &ne) && ne.Timeout():
		return "transport: timeout"
	}
	return "transport: " + err.Error()
}

// op is one operation of worker w; more is false when it had nothing left to send. ctx ends
// with the window; a request sent before that is answered in full (inFlight), so that the
// window's end cuts no request short.
type op func(ctx context.Context, w int) (o outcome, more bool)

func inFlight(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// window runs fn from clients workers for --duration, or until --requests operations or
// fn has nothing left, and measures it: latency, failures, bytes and, for a spawned daemon,
// its CPU per operation. verifies is the Ed25519 verifications an operation costs.
func (b *bench) window(ctx context.Context, t *target, name string, clients, verifies int, fn op) (phase, error) {
	s, err := b.sample(ctx, t, clients, b.cfg.duration, fn)
	if err != nil {
		return phase{Name: name}, err
	}
	return b.summary(name, verifies, s), nil
}

// sample is what one timed run of an op measured, before it is summed up as a phase.
type sample struct {
	lat     latencies
	bytes   int64
	failed  map[string]int64
	cpu     *time.Duration // the daemon's, when bench spawned it
	elapsed time.Duration
	stopped string
}

// add sums o into s: the samples of one phase taken in several rounds.
func (s *sample) add(o sample) {
	s.lat = append(s.lat, o.lat...)
	s.bytes += o.bytes
	if s.failed == nil {
		s.failed = map[string]int64{}
	}
	for k, v := range o.failed {
		s.failed[k] += v
	}
	if o.cpu != nil {
		sum := *o.cpu
		if s.cpu != nil {
			sum += *s.cpu
		}
		s.cpu = &sum
	}
	s.elapsed += o.elapsed
	s.stopped = cmp.Or(s.stopped, o.stopped)
}

// cpuPerOp is the daemon's CPU per operation of s in µs, when it is known.
func (s *sample) cpuPerOp() (float64, bool) {
	if s.cpu == nil || len(s.lat) == 0 {
		return 0, false
	}
	return float64(*s.cpu) / float64(time.Microsecond) / float64(len(s.lat)), true
}

// sample runs fn from clients workers for d, or until --requests operations or fn has
// nothing left, taking the daemon's profile of it when asked.
func (b *bench) sample(ctx context.Context, t *target, clients int, d time.Duration, fn op) (sample, error) {
	s := sample{failed: map[string]int64{}}
	stopProfile := func() error { return nil }
	if b.cfg.cpuProfile != "" && t.d != nil {
		path := b.cfg.cpuProfile
		if b.profiles++; b.profiles > 1 {
			path = fmt.Sprintf("%s.%d", path, b.profiles)
		}
		var err error
		if stopProfile, err = t.d.profile(ctx, path, d); err != nil {
			return s, err
		}
	}
	var cpu0 time.Duration
	if t.d != nil {
		var err error
		if cpu0, err = processCPU(t.d.pid); err != nil {
			return s, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		tickets atomic.Int64
		mu      sync.Mutex
	)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latencies
			var got int64
			failed := map[string]int64{}
			why := ""
			for wctx.Err() == nil {
				if tickets.Add(1) > b.cfg.requests {
					why = "requests"
					break
				}
				t0 := time.Now()
				o, more := fn(wctx, w)
				if !more {
					why = "prepared requests"
					break
				}
				if wctx.Err() != nil && o.failed != "" {
					break // cut off by the window's end
				}
				if o.took == 0 {
					o.took = time.Since(t0)
				}
				mine = append(mine, o.took)
				got += o.bytes
				if o.failed != "" {
					failed[o.failed]++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			s.lat = append(s.lat, mine...)
			s.bytes += got
			for k, v := range failed {
				s.failed[k] += v
			}
			if why != "" {
				s.stopped = why
			}
		}()
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	if t.d != nil {
		cpu1, err := processCPU(t.d.pid)
		if err != nil {
			return s, err
		}
		used := cpu1 - cpu0
		s.cpu = &used
	}
	if err := stopProfile(); err != nil {
		return s, err
	}
	return s, ctx.Err()
}

// summary sums s up as the phase name; verifies is the Ed25519 verifications an operation
// costs.
func (b *bench) summary(name string, verifies int, s sample) phase {
	p := phase{Name: name, Verifies: verifies, Failed: s.failed}
	if us, ok := s.cpuPerOp(); ok {
		us = round(us, 1)
		p.CPUUsPerOp = &us
		if verifies > 0 && b.verifyUs > 0 {
			r := round(us/(float64(verifies)*b.verifyUs), 2)
			p.CPUVsVerify = &r
		}
	}
	slices.Sort(s.lat)
	p.Ops = int64(len(s.lat)) - p.failures()
	p.DurationS = round(s.elapsed.Seconds(), 3)
	p.OpsPerS = round(float64(p.Ops)/s.elapsed.Seconds(), 1)
	p.P50ms, p.P99ms = ms(s.lat.quantile(0.5)), ms(s.lat.quantile(0.99))
	if len(s.lat) > 0 {
		p.BytesPerOp = round(float64(s.bytes)/float64(len(s.lat)), 1)
	}
	p.Stopped = s.stopped
	if len(p.Failed) == 0 {
		p.Failed = nil
	}
	return p
}

// interleaved measures ops against each other in rounds of --duration / rounds each, every
// op once a round, beginning each round one op later: the daemon's background work (a
// store's compactions after setup, a collection) and the machine's drift then fall on every
// op alike instead of on whichever ran first. It returns each op's rounds, in round order.
func (b *bench) interleaved(ctx context.Context, t *target, clients, rounds int, ops []op) ([][]sample, error) {
	out := make([][]sample, len(ops))
	d := b.cfg.duration / time.Duration(rounds)
	for r := range rounds {
		for j := range ops {
			k := (j + r) % len(ops)
			s, err := b.sample(ctx, t, clients, d, ops[k])
			if err != nil {
				return nil, err
			}
			out[k] = append(out[k], s)
		}
	}
	return out, nil
}

// prepared is an op that sends reqs once each, in order, over all workers.
func (t *target) prepared(reqs []request) op {
	var next atomic.Int64
	return func(ctx context.Context, _ int) (outcome, bool) {
		i := next.Add(1) - 1
		if i >= int64(len(reqs)) {
			return outcome{}, false
		}
		_, o := t.exchange(inFlight(ctx), reqs[i])
		return o, true
	}
}

// repeated is an op that sends r again and again.
func (t *target) repeated(r request) op {
	return func(ctx context.Context, _ int) (outcome, bool) {
		_, o := t.exchange(inFlight(ctx), r)
		return o, true
	}
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := ctx.Err(); err != nil {
					errs <- err
					return
				}
				if err := fn(int(i)); err != nil {
					next.Store(int64(n))
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
