package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// RetryAfter is what a 503 STORE_UNAVAILABLE, and /ready while it answers 503, send in
// Retry-After: a store restarting is back within seconds, and a client that waits this
// long before trying again loads a recovering store with no burst of its own.
const RetryAfter = 2 * time.Second

// ready answers 200 while the store takes writes and 503 STORE_UNAVAILABLE with
// Retry-After while it does not, so that a load balancer sends writes elsewhere; /health
// answers 200 either way, for the reads that are still served.
func (h *handler) ready(w http.ResponseWriter, _ *http.Request, _ call) {
	st := h.s.StoreHealth()
	if st.State == "" || st.State == store.HealthOK {
		writeJSON(w, http.StatusOK, struct {
			Ready bool   `json:"ready"`
			Store string `json:"store,omitempty"`
		}{true, st.State})
		return
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.code = proto.StoreUnavailable
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	writeJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Code: string(proto.StoreUnavailable), Error: "the registry cannot take writes now: its store is " + st.State})
}

// Failures the registry cannot answer for (500 INTERNAL) and refusals of a store that is
// unavailable (503) are logged in bursts: logBurst lines at once, then none until logEvery
// has passed since the burst began; the next line says how many were held back. A database
// that is down for a minute under load writes a few lines, not one per request; the metrics
// count every one (svrpd_protocol_errors_total by code).
const (
	logBurst = 5
	logEvery = time.Minute
)

// burstLog passes the lines of one kind of failure in bursts.
type burstLog struct {
	mu     sync.Mutex
	start  time.Time // of the current burst
	passed int       // lines passed in it
	held   int       // lines held back since the last one passed
}

// log writes the line at level unless the burst is spent, and counts it when it is not
// written.
func (b *burstLog) log(l *slog.Logger, level slog.Level, msg string, args ...any) {
	now := time.Now()
	b.mu.Lock()
	if now.Sub(b.start) >= logEvery {
		b.start, b.passed = now, 0
	}
	if b.passed >= logBurst {
		b.held++
		b.mu.Unlock()
		return
	}
	b.passed++
	held := b.held
	b.held = 0
	b.mu.Unlock()
	if held > 0 {
		args = append(args, "held_back", held)
	}
	l.Log(context.Background(), level, msg, args...)
}

// outageQuiet is how long a store must refuse nothing, and say it is healthy, to be back.
const outageQuiet = time.Second

// outage remembers that requests were refused for want of the store, so that the daemon
// says once, at info, when the store is back and how long it was not.
type outage struct {
	active atomic.Bool // a refusal since the store was last seen healthy

	mu       sync.Mutex
	since    time.Time // the first refusal
	last     time.Time // the latest
	refused  int
	checked  time.Time
	checking bool
}

// refusedWrite counts a request refused with 503 STORE_UNAVAILABLE.
func (o *outage) refusedWrite() {
	o.mu.Lock()
	o.last = time.Now()
	if !o.active.Load() {
		o.since = o.last
		o.active.Store(true)
	}
	o.refused++
	o.mu.Unlock()
}

// after is called after every request. While requests are being refused it asks, at most
// once a second and off the request's path, whether the store is healthy again, and says
// so once. A store is back when it says it is healthy and has refused nothing for
// outageQuiet: what it says may be that long old.
func (o *outage) after(s *registry.Service) {
	if !o.active.Load() {
		return
	}
	o.mu.Lock()
	if o.checking || time.Since(o.checked) < outageQuiet {
		o.mu.Unlock()
		return
	}
	o.checking, o.checked = true, time.Now()
	o.mu.Unlock()
	go func() {
		st := s.StoreHealth()
		o.mu.Lock()
		defer o.mu.Unlock()
		o.checking = false
		if (st.State != "" && st.State != store.HealthOK) || time.Since(o.last) < outageQuiet {
			return
		}
		s.Logger().Info("store reachable again", "refused_for", time.Since(o.since).Round(time.Millisecond), "refused", o.refused)
		o.refused = 0
		o.active.Store(false)
	}()
}
