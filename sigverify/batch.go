package sigverify

import (
	"runtime"
	"sync"
)

// Entry is one signature to check: sig by Key over Msg.
type Entry struct {
	Key, Msg, Sig []byte
}

// VerifyBatch sets ok[i] to whether entries[i] verifies under the rule, the answer [Verify]
// gives, checking the admissible entries with one batch equation. A batch that fails is
// split in halves until the failing signatures are found, so n signatures with one bad
// among them cost about two batches of n and one plain verification. ok must be as long as
// entries.
func VerifyBatch(entries []Entry, ok []bool) {
	var c checker
	c.verify(entries, ok)
}

// MaxBatch is the most signatures a [Batcher] checks in one batch: past it the cost per
// signature falls little while a batch's wait and the price of one bad signature in it grow.
const MaxBatch = 64

// A Batcher verifies signatures under the rule on a fixed set of workers. A caller's
// [Batcher.Verify] waits for its answer; each worker takes every request waiting when it
// becomes free, up to [MaxBatch], and checks them with [VerifyBatch]. An idle Batcher so
// checks a lone request at once with a plain verification, and batches grow with the load.
// It is safe for concurrent use.
type Batcher struct {
	queue   chan *request // unbuffered: the waiting senders are the queue
	stop    chan struct{}
	stopped sync.Once
	workers sync.WaitGroup
	free    sync.Pool
}

type request struct {
	entry Entry
	ok    bool
	done  chan struct{}
}

// NewBatcher starts a Batcher with workers workers, one per CPU when workers < 1. Close
// stops them.
func NewBatcher(workers int) *Batcher {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &Batcher{queue: make(chan *request), stop: make(chan struct{})}
	b.free.New = func() any { return &request{done: make(chan struct{}, 1)} }
	b.workers.Add(workers)
	for range workers {
		go b.work()
	}
	return b
}

// Verify implements [Verifier]. A signature the rule refuses on its bytes is refused here,
// without entering a batch. After Close it verifies on the caller's goroutine.
func (b *Batcher) Verify(pub, msg, sig []byte) bool {
	if !Admissible(pub, sig) {
		return false
	}
	r := b.free.Get().(*request)
	r.entry = Entry{Key: pub, Msg: msg, Sig: sig}
	select {
	case b.queue <- r:
		<-r.done
	case <-b.stop:
		r.ok = Verify(pub, msg, sig)
	}
	ok := r.ok
	*r = request{done: r.done}
	b.free.Put(r)
	return ok
}

// Close stops the workers and waits for them to finish the batches they hold.
func (b *Batcher) Close() {
	b.stopped.Do(func() { close(b.stop) })
	b.workers.Wait()
}

func (b *Batcher) work() {
	defer b.workers.Done()
	var c checker
	batch := make([]*request, 0, MaxBatch)
	entries := make([]Entry, 0, MaxBatch)
	ok := make([]bool, MaxBatch)
	for {
		select {
		case r := <-b.queue:
			batch = append(batch[:0], r)
		case <-b.stop:
			return
		}
		// The callers that are ready to run but have not reached the queue yet, because the
		// workers hold the CPUs, get there before the batch is closed.
		runtime.Gosched()
	drain:
		for len(batch) < MaxBatch {
			select {
			case r := <-b.queue:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if len(batch) == 1 {
			r := batch[0]
			r.ok = c.single(r.entry)
			r.done <- struct{}{}
			continue
		}
		entries = entries[:0]
		for _, r := range batch {
			entries = append(entries, r.entry)
		}
		c.verify(entries, ok[:len(batch)])
		for i, r := range batch {
			r.ok = ok[i]
			r.done <- struct{}{}
		}
	}
}
