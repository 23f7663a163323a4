package sigverify

import (
	"runtime"
	"sync"
	"time"
)

// Entry is one signature to check: sig by Key over Msg.
type Entry struct {
	Key, Msg, Sig []byte
}

// VerifyBatch sets ok[i] to whether entries[i] verifies under the rule, the answer [Verify]
// gives, checking the admissible entries with one batch equation. A batch that fails is
// split in halves until the failing signatures are found: n signatures with one bad among
// them cost about three batches of n, under one and a half plain verifications each at the
// sizes a loaded registry forms (docs/performance.md). ok must be as long as entries.
func VerifyBatch(entries []Entry, ok []bool) {
	var c checker
	c.verify(entries, ok)
}

// idleAfter is how long after its last batch a Batcher counts as idle again. It is longer
// than the moments a loaded machine's scheduler keeps the daemon off the CPU, so that under
// load a caller does not take such a pause for idleness and pay a whole verification alone;
// a caller that queues when it could have checked alone pays only the hand-over to the worker.
const idleAfter = 10 * time.Millisecond

// MaxBatch is the most signatures a [Batcher] checks in one batch: past it the cost per
// signature falls little while a batch's wait and the price of one bad signature in it grow.
const MaxBatch = 64

// A Batcher verifies signatures under the rule, one batch at a time. A caller that finds it
// idle verifies its own signature at once, on its own goroutine, as [Verify] would (so an
// idle Batcher adds no latency); callers that come while a signature or a batch is being
// checked wait in a queue, which the Batcher's worker then checks in batches of up to
// [MaxBatch] with [VerifyBatch]'s equations, until the queue is empty. Batches so grow with
// the load. It remembers the decoded points of the keys it has seen. It is safe for
// concurrent use.
type Batcher struct {
	mu   sync.Mutex
	busy bool // someone is checking: a caller its own signature, or the worker a batch
	// lastBatch is when the worker last emptied the queue: until idleAfter later, a caller
	// that finds the Batcher free queues for a batch instead of checking alone.
	lastBatch time.Time
	closed    bool
	pending   []*request
	check     checker // used only by the holder of busy
	batch     []*request
	entries   []Entry
	ok        []bool

	wake   chan struct{} // hands the queue to the worker; never holds more than one
	stop   chan struct{}
	exited chan struct{}
	free   sync.Pool
}

type request struct {
	entry Entry
	ok    bool
	done  chan struct{}
}

// NewBatcher starts a Batcher and its worker. Close stops it.
func NewBatcher() *Batcher {
	b := &Batcher{wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}
	b.free.New = func() any { return &request{done: make(chan struct{}, 1)} }
	go b.work()
	return b
}

// Verify implements [Verifier]. A signature the rule refuses on its bytes is refused at once.
func (b *Batcher) Verify(pub, msg, sig []byte) bool {
	if !Admissible(pub, sig) {
		return false
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Verify(pub, msg, sig)
	}
	idle := !b.busy && time.Since(b.lastBatch) > idleAfter
	if idle {
		b.busy = true
		b.mu.Unlock()
		ok := b.check.single(Entry{Key: pub, Msg: msg, Sig: sig})
		b.release()
		return ok
	}
	r := b.free.Get().(*request)
	r.entry = Entry{Key: pub, Msg: msg, Sig: sig}
	b.pending = append(b.pending, r)
	if !b.busy {
		// The worker checked a batch a moment ago: the load that made it is likely still
		// there, so this request waits for the next batch rather than being checked alone.
		b.busy = true
		b.wake <- struct{}{}
	}
	b.mu.Unlock()
	<-r.done
	ok := r.ok
	*r = request{done: r.done}
	b.free.Put(r)
	return ok
}

// release ends a caller's turn at checking: the requests queued meanwhile go to the worker,
// or, once the Batcher is closed, are checked here.
func (b *Batcher) release() {
	b.mu.Lock()
	switch {
	case len(b.pending) == 0:
		b.busy = false
		b.mu.Unlock()
	case b.closed:
		b.mu.Unlock()
		b.drain()
	default:
		// Sent under the lock, so that Close, which sets closed under it, finds it.
		b.wake <- struct{}{}
		b.mu.Unlock()
	}
}

// drain checks the queue in batches until it is empty, then gives up busy. Whenever the
// queue holds less than a full batch, it first yields the CPU once: callers that are ready to
// run, but wait for the CPU this goroutine held, then join the queue, so that the batch is
// larger and cheaper per signature, and, once the queue is empty, they queue instead of each
// finding the Batcher idle and verifying alone at full price.
func (b *Batcher) drain() {
	yielded := false
	for {
		b.mu.Lock()
		n := min(len(b.pending), MaxBatch)
		if n < MaxBatch && !yielded {
			b.mu.Unlock()
			runtime.Gosched()
			yielded = true
			continue
		}
		if n == 0 {
			b.busy = false
			b.lastBatch = time.Now()
			b.mu.Unlock()
			return
		}
		yielded = false
		b.batch = append(b.batch[:0], b.pending[:n]...)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.mu.Unlock()

		b.entries = b.entries[:0]
		for _, r := range b.batch {
			b.entries = append(b.entries, r.entry)
		}
		b.ok = grow(b.ok, n)
		b.check.verify(b.entries, b.ok)
		clear(b.entries)
		for i, r := range b.batch {
			r.ok = b.ok[i]
			r.done <- struct{}{}
		}
	}
}

func (b *Batcher) work() {
	defer close(b.exited)
	for {
		select {
		case <-b.wake:
			b.drain()
		case <-b.stop:
			return
		}
	}
}

// Close stops the worker once it has checked what it was handed. Later calls verify on the
// caller's goroutine.
func (b *Batcher) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.exited
	// A queue handed over just before closed was set, and not taken by the worker.
	select {
	case <-b.wake:
		b.drain()
	default:
	}
}
