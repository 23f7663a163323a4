package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
)

// fairness bounds the requests in flight — HTTP/1.1 requests and HTTP/2 streams alike — per
// client group, per block and in total, and runs their handlers fairly across address groups
// when the cores are saturated.
//
// The bounds per client group and per block are the connection caps again (a connection
// carries one HTTP/1.1 request at a time, so for HTTP/1.1 they never bind): without them an
// HTTP/2 client opens as many streams on each of its connections as the connection allows,
// and parks each one, a goroutine and its buffers apiece. The total is twice the connection
// cap, so that connections holding every slot, one request each, do not reach it; and it is
// soft: past it, only a client group with nothing in flight is let in, up to three times the
// cap, so that groups filling the total keep out no one but themselves. A request over a
// bound is answered 429 RATE_LIMITED at once, before its handler runs.
//
// Of the requests in flight, at most workers run their handlers' work at once; a handler
// holds its turn until its answer starts (writing an answer waits on the client, not on the
// cores), it returns, or turnHold has passed (a handler that long is waiting on the store or
// on a listing's turn, not using a core, and must not hold up the queues meanwhile). The others wait in a queue of their client group, and the queues are
// served round robin over the networks (IPv4 /16, IPv6 /32) that have waiters, and within a
// network over its client groups: one group's flood waits behind its own requests, and an
// honest request waits for at most one turn of each other network with waiters.
type fairness struct {
	perClient, perBlock, total, hard, workers int

	mu       sync.Mutex
	inFlight map[string]int // by client group and by block
	all      int
	running  int
	nets     []*netQueue // networks with waiters, in turn order
	netOf    map[string]*netQueue
}

// netQueue is one network's waiters, by client group in turn order.
type netQueue struct {
	name    string
	clients []string
	waiters map[string][]chan struct{}
}

// newFairness bounds the requests in flight by the connection caps maxConns, perClient and
// perBlock, and runs workers handlers at once.
func newFairness(perClient, perBlock, maxConns, workers int) *fairness {
	return &fairness{
		perClient: perClient, perBlock: perBlock, total: 2 * maxConns, hard: 3 * maxConns, workers: max(workers, 1),
		inFlight: make(map[string]int), netOf: make(map[string]*netQueue),
	}
}

// turnHold bounds a turn: the registry's handlers do their work in well under a millisecond
// of a core, and one that takes this long is waiting.
const turnHold = 50 * time.Millisecond

// refusalWriteGrace is how long a refusal in flight may take to be written: a client that
// does not take it at once (an HTTP/2 stream with its window shut) is cut, so that streams
// refused cost no more than the streams let in.
const refusalWriteGrace = 100 * time.Millisecond

// errInFlight is the refusal of a request over a bound in flight.
var errInFlight = proto.New(proto.RateLimited, "too many requests in flight from this address; wait for an answer before sending more")

// serve wraps next with the bounds and the turns.
func (f *fairness) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitedConn)
		if lc == nil {
			next.ServeHTTP(w, r)
			return
		}
		if !f.enter(lc) {
			// A refusal is not parked: a stream whose window is shut is reset instead.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(refusalWriteGrace))
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(api.ErrorBody{Code: string(proto.RateLimited), Error: errInFlight.Error()})
			return
		}
		defer f.leave(lc)
		if !f.turn(r.Context(), lc) {
			lc.l.noteStream(lc, true) // the client went away before its turn
			return
		}
		tw := &turnWriter{ResponseWriter: w, f: f, ctx: r.Context()}
		hold := time.AfterFunc(turnHold, tw.done)
		defer hold.Stop()
		defer tw.done()
		next.ServeHTTP(tw, r)
		lc.l.noteStream(lc, tw.cancelledFirst())
	})
}

// enter counts a request in flight, or reports false when a bound refuses it.
func (f *fairness) enter(c *limitedConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.group != "" && (f.inFlight[c.group] >= f.perClient || f.inFlight[c.block] >= f.perBlock) {
		return false
	}
	if f.all >= f.hard || f.all >= f.total && (c.group == "" || f.inFlight[c.group] > 0) {
		return false
	}
	f.all++
	if c.group != "" {
		f.inFlight[c.group]++
		f.inFlight[c.block]++
	}
	return true
}

func (f *fairness) leave(c *limitedConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all--
	if c.group != "" {
		for _, k := range []string{c.group, c.block} {
			if f.inFlight[k]--; f.inFlight[k] <= 0 {
				delete(f.inFlight, k)
			}
		}
	}
}

// turn waits for a turn to run, in c's group's queue when every turn is taken. false when
// ctx ended first: a stream cancelled before it is served takes no turn and leaves the
// queue at once.
func (f *fairness) turn(ctx context.Context, c *limitedConn) bool {
	if ctx.Err() != nil {
		return false
	}
	f.mu.Lock()
	if f.running < f.workers && len(f.nets) == 0 {
		f.running++
		f.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	q := f.netOf[c.network]
	if q == nil {
		q = &netQueue{name: c.network, waiters: make(map[string][]chan struct{})}
		f.netOf[c.network] = q
		f.nets = append(f.nets, q)
	}
	if len(q.waiters[c.group]) == 0 {
		q.clients = append(q.clients, c.group)
	}
	q.waiters[c.group] = append(q.waiters[c.group], ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-ch: // given a turn as it gave up: pass it on
		f.passLocked()
	default:
		f.dropLocked(q, c.group, ch)
	}
	return false
}

// done gives up a turn: to the next waiter in round-robin order, if any.
func (f *fairness) done() {
	f.mu.Lock()
	f.passLocked()
	f.mu.Unlock()
}

// passLocked hands the caller's turn to the next waiter, or frees it. The caller holds mu.
func (f *fairness) passLocked() {
	if len(f.nets) == 0 {
		f.running--
		return
	}
	q := f.nets[0]
	client := q.clients[0]
	ws := q.waiters[client]
	ch := ws[0]
	if ws = ws[1:]; len(ws) == 0 {
		delete(q.waiters, client)
		q.clients = q.clients[1:]
	} else {
		q.waiters[client] = ws
		q.clients = append(q.clients[1:], client)
	}
	f.nets = f.nets[1:]
	if len(q.clients) > 0 {
		f.nets = append(f.nets, q)
	} else {
		delete(f.netOf, q.name)
	}
	close(ch)
}

// dropLocked takes a waiter that gave up out of its queue. The caller holds mu.
func (f *fairness) dropLocked(q *netQueue, client string, ch chan struct{}) {
	ws := q.waiters[client]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		q.waiters[client] = ws
		return
	}
	delete(q.waiters, client)
	for i, cl := range q.clients {
		if cl == client {
			q.clients = append(q.clients[:i:i], q.clients[i+1:]...)
			break
		}
	}
	if len(q.clients) == 0 {
		delete(f.netOf, q.name)
		for i, n := range f.nets {
			if n == q {
				f.nets = append(f.nets[:i:i], f.nets[i+1:]...)
				break
			}
		}
	}
}

// turnWriter gives up its handler's turn when the answer starts, and notes whether the
// client had cancelled the request by then.
type turnWriter struct {
	http.ResponseWriter
	f    *fairness
	ctx  context.Context
	once sync.Once

	startMu   sync.Mutex
	started   bool
	cancelled bool // by the client before the answer started
}

func (w *turnWriter) done() { w.once.Do(w.f.done) }

// start records the answer's start, once.
func (w *turnWriter) start() {
	w.startMu.Lock()
	if !w.started {
		w.started, w.cancelled = true, w.ctx.Err() != nil
	}
	w.startMu.Unlock()
}

// cancelledFirst reports, once its handler has returned, whether the client cancelled the
// request before its answer started: answered or not, a request whose context ended first.
func (w *turnWriter) cancelledFirst() bool {
	w.start()
	return w.cancelled
}

func (w *turnWriter) WriteHeader(status int) {
	w.start()
	w.done()
	w.ResponseWriter.WriteHeader(status)
}

func (w *turnWriter) Write(p []byte) (int, error) {
	w.start()
	w.done()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *turnWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
