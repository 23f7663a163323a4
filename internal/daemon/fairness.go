package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/netblock"
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
// soft: past it, a client group with nothing in flight is let in, up to three times the cap.
// Past the soft total, any other newcomer, and at the hard total every newcomer, makes room
// by evicting the request in flight longest of the group holding the most, at every level:
// the network holding the most requests; within it, when it is the newcomer's own, the
// block holding the most; within that, when it is the newcomer's own, the client group
// holding the most. The evicted group must hold at least two more than the newcomer's at the
// level where they part, so that after the swap it still holds at least as many and no two
// groups evict each other in turn. Strangers spread over many blocks, each within its own
// bounds, thus cannot fill the total against an honest newcomer: their network, or their
// largest block, pays for its room. An evicted request still waiting for its body or its
// turn is answered 429 RATE_LIMITED; one already running is reset (its HTTP/2 stream, or its
// HTTP/1.1 connection, which carries nothing else). A request over a bound that nothing can
// make room for is answered 429 RATE_LIMITED at once, before its handler runs. A trusted
// proxy's requests count only against the totals and make no room: its clients are many
// groups.
//
// Of the requests in flight, at most workers run their handlers' work at once. A request's
// body is read before it asks for a turn (bodyfirst.go); a handler then holds its turn until
// its answer starts (writing an answer waits on the client, not on the cores), it returns,
// or turnHold has passed (a handler that long is waiting on the store or on a listing's turn,
// not using a core, and must not hold up the queues meanwhile). The others wait in a queue
// of their client group, and the queues are served round robin over the networks (IPv4 /16,
// IPv6 /32) that have waiters, and within a network over its client groups: one group's
// flood waits behind its own requests, and an honest request waits for at most one turn of
// each other network with waiters.
type fairness struct {
	perClient, perBlock, total, hard, workers int

	mu       sync.Mutex
	networks map[string]*holding // the requests in flight by network, block and client group
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
		networks: make(map[string]*holding), netOf: make(map[string]*netQueue),
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

// errEvicted ends the context of a request evicted to make room for a newcomer.
var errEvicted = errors.New("evicted to make room for a newcomer")

// serve wraps next with the bounds and the turns.
func (f *fairness) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitedConn)
		if lc == nil {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		fl := f.enter(lc, cancel)
		if fl == nil {
			refuse(w)
			return
		}
		defer f.leave(fl)
		var stage atomic.Int32
		defer resetOnEviction(ctx, &stage, w, r, lc)()
		stage.Store(stageReading)
		readBodyFirst(r)
		stage.Store(stageQueued)
		if !f.turn(ctx, lc) {
			if context.Cause(ctx) == errEvicted {
				refuse(w)
				return
			}
			lc.l.noteStream(lc, true) // the client went away before its turn
			return
		}
		// Evicted as its turn came, before the reset could see it run: refused all the same.
		if stage.Store(stageRunning); context.Cause(ctx) == errEvicted {
			f.done()
			refuse(w)
			return
		}
		tw := &turnWriter{ResponseWriter: w, f: f, ctx: r.Context()}
		hold := time.AfterFunc(turnHold, tw.done)
		defer hold.Stop()
		defer tw.done()
		next.ServeHTTP(tw, r.WithContext(ctx))
		lc.l.noteStream(lc, tw.cancelledFirst())
	})
}

// refuse answers 429 RATE_LIMITED. A refusal is not parked: a stream whose window is shut is
// reset instead.
func refuse(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(refusalWriteGrace))
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	json.NewEncoder(w).Encode(api.ErrorBody{Code: string(proto.RateLimited), Error: errInFlight.Error()})
}

// The stages of a request in flight, as an eviction finds it.
const (
	stageQueued  int32 = iota // waiting for its turn: serve refuses it
	stageReading              // waiting for its body: its reads are cut, then serve refuses it
	stageRunning              // its handler running: reset
)

// resetOnEviction acts on the request once ctx ends by eviction, by the stage it is at: a
// body still on the way has its reads cut by a read deadline already past (the reads fail and
// serve refuses the request); a request whose handler runs is reset, an HTTP/2 stream by
// deadlines already past (its body's reads fail, its stream is reset), an HTTP/1.1 request by
// closing its connection, which carries nothing else. The function it returns waits for the
// action to finish, so that the writer is not touched after the handler has returned.
func resetOnEviction(ctx context.Context, stage *atomic.Int32, w http.ResponseWriter, r *http.Request, lc *limitedConn) func() {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		if context.Cause(ctx) != errEvicted {
			return
		}
		rc := http.NewResponseController(w)
		past := time.Now().Add(-time.Second)
		switch stage.Load() {
		case stageReading:
			_ = rc.SetReadDeadline(past)
		case stageRunning:
			if r.ProtoMajor < 2 {
				lc.Close()
				return
			}
			_ = rc.SetReadDeadline(past)
			_ = rc.SetWriteDeadline(past)
		}
	})
	return func() {
		if !stop() {
			<-done
		}
	}
}

// holding is what one group holds in flight: a network's blocks, a block's client groups,
// a client group's requests, the one in flight longest first.
type holding struct {
	held    int
	subs    map[string]*holding
	flights []*flight
}

// flight is one request in flight.
type flight struct {
	conn    *limitedConn
	cancel  context.CancelCauseFunc
	evicted bool // guarded by fairness.mu
}

// groupsLocked is c's holdings at each level, nil where it holds nothing. The caller holds mu.
func (f *fairness) groupsLocked(c *limitedConn) (network, block, client *holding) {
	if network = f.networks[c.network]; network != nil {
		if block = network.subs[c.block]; block != nil {
			client = block.subs[c.group]
		}
	}
	return network, block, client
}

// enter counts a request in flight, evicting another if it must make room, or returns nil when
// a bound refuses it. cancel ends the request's context if it is evicted in turn.
func (f *fairness) enter(c *limitedConn, cancel context.CancelCauseFunc) *flight {
	f.mu.Lock()
	if c.group == "" {
		defer f.mu.Unlock()
		if f.all >= f.total {
			return nil
		}
		f.all++
		return &flight{conn: c, cancel: cancel}
	}
	_, block, client := f.groupsLocked(c)
	if client.count() >= f.perClient || block.count() >= f.perBlock {
		f.mu.Unlock()
		return nil
	}
	var victim *flight
	if f.all >= f.hard || f.all >= f.total && client.count() > 0 {
		if victim = f.victimLocked(c); victim == nil {
			f.mu.Unlock()
			return nil
		}
		victim.evicted = true
		f.removeLocked(victim)
	}
	fl := &flight{conn: c, cancel: cancel}
	f.addLocked(fl)
	f.mu.Unlock()
	if victim != nil && victim.cancel != nil {
		victim.cancel(errEvicted)
	}
	return fl
}

// victimLocked is the request to evict for a newcomer on c, or nil when no group holds at
// least two more than the newcomer's where they part. The caller holds mu.
func (f *fairness) victimLocked(c *limitedConn) *flight {
	subs, own := f.networks, [netblock.Levels]string{netblock.Client: c.group, netblock.Block: c.block, netblock.Network: c.network}
	for lv := netblock.Network; lv >= netblock.Client; lv-- {
		name, most := "", -1
		for n, h := range subs {
			if h.held > most || h.held == most && n == own[lv] {
				name, most = n, h.held
			}
		}
		if name != own[lv] {
			if most < subs[own[lv]].count()+2 {
				return nil
			}
			h := subs[name]
			for ; lv > netblock.Client; lv-- {
				h = largest(h.subs)
			}
			return h.flights[0]
		}
		subs = subs[name].subs
	}
	return nil
}

// largest is the holding of subs holding the most.
func largest(subs map[string]*holding) *holding {
	var most *holding
	for _, h := range subs {
		if most == nil || h.held > most.held {
			most = h
		}
	}
	return most
}

func (h *holding) count() int {
	if h == nil {
		return 0
	}
	return h.held
}

// addLocked counts fl in at every level. The caller holds mu.
func (f *fairness) addLocked(fl *flight) {
	f.all++
	c := fl.conn
	subs := f.networks
	for _, name := range [...]string{c.network, c.block, c.group} {
		h := subs[name]
		if h == nil {
			h = &holding{}
			subs[name] = h
		}
		h.held++
		if h.subs == nil && name != c.group {
			h.subs = make(map[string]*holding)
		}
		if name == c.group {
			h.flights = append(h.flights, fl)
		}
		subs = h.subs
	}
}

// removeLocked takes fl out at every level, and the groups left holding nothing. The caller
// holds mu.
func (f *fairness) removeLocked(fl *flight) {
	f.all--
	c := fl.conn
	network, block, client := f.groupsLocked(c)
	if i := slices.Index(client.flights, fl); i >= 0 {
		client.flights = slices.Delete(client.flights, i, i+1)
	}
	for _, g := range []struct {
		h    *holding
		in   map[string]*holding
		name string
	}{{client, block.subs, c.group}, {block, network.subs, c.block}, {network, f.networks, c.network}} {
		if g.h.held--; g.h.held <= 0 {
			delete(g.in, g.name)
		}
	}
}

func (f *fairness) leave(fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case fl.conn.group == "":
		f.all--
	case !fl.evicted:
		f.removeLocked(fl)
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
