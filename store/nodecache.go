package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/didkey"
)

// flushChunk bounds the nodes one Flush transaction rewrites, well under Badger's
// transaction size limit.
const flushChunk = 512

// sharedFlushChunk bounds the nodes one statement of a shared store's Flush moves: a flush
// is one statement up to this many heartbeats since the last one, which at one flush a
// second is more nodes than a daemon serves.
const sharedFlushChunk = 1 << 16

// followEvery is how often a cache in front of a shared store reads what the other daemons
// changed: a registration made elsewhere is in memory within this, a heartbeat within this
// and the other daemon's flush interval.
const followEvery = 250 * time.Millisecond

// WithNodeCache wraps inner with an in-memory copy of the node table: the whole table is
// read once here, every View reads nodes from memory, and every Update writes through to
// inner and then to memory. Touches ([NodeToucher]) change memory at once and reach inner
// at the next Flush, which the owner calls periodically (svrpd: every second) and which
// Close calls last. The cache works over any Store through the contract alone.
//
// Over a store without a [NodeFeed] (memory, Badger) the copy is exact only while this
// process is inner's one writer, and it relies on inner running Update functions one at a
// time: a write's place in that order decides which version memory keeps. A flush writes
// records with WriteTouchedNode in an Update marked [ForTouches].
//
// A store shared by several processes (one with a NodeFeed, as the PostgreSQL store) is
// followed instead: every followEvery the cache reads the node records written since its
// last read, by this process or any other, and keeps each record's latest revision
// (PutNodeRevision), and the heartbeats flushed since, by key and time alone; touches are
// flushed through the feed in one statement. Reads in a
// View that miss memory ask the store, so a node registered through another daemon a
// moment ago is found. Memory never moves last_seen back. Close stops the following.
func WithNodeCache(ctx context.Context, inner Store) (Store, error) {
	c := &nodeCache{inner: inner, dirty: map[didkey.PublicKey]time.Time{}, writing: map[didkey.PublicKey]int{}}
	if feed := inner.NodeFeed(); feed != nil {
		return c.follow(ctx, feed)
	}
	err := inner.View(ctx, func(tx Tx) error {
		// Maps sized once: growing them a doubling at a time through a million nodes costs
		// seconds of rehashing and twice the memory at the peak.
		count, err := tx.NodeCount()
		if err != nil {
			return err
		}
		c.table = newNodeTable(count)
		// byDID holds only the DIDs the table cannot find by their key or short body, in
		// most tables a few: it grows.
		c.byDID = map[string]didkey.PublicKey{}
		return tx.EachNode(func(n Node) error {
			c.apply(n, 0)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	c.table.settle()
	return c, nil
}

type nodeCache struct {
	inner Store

	mu    sync.RWMutex
	table *nodeTable
	// byDID maps the DID a node registered under to its key, unless the DID ends in the
	// key's short body or is the key's full DID: those, most of a table, are found through
	// the table's indexes, and cost no entry here.
	byDID map[string]didkey.PublicKey
	dirty map[didkey.PublicKey]time.Time
	// seq numbers the node writes in the order inner runs its Update functions. A shared
	// store numbers them itself (revisions), and seq is unused.
	seq uint64
	// writing counts, per key, the node writes an Update has made in inner but not yet
	// applied to memory (or dropped when the Update failed). A flush writes a record from
	// memory only when none is in flight for its key: see Flush.
	writing map[didkey.PublicKey]int

	// Following a shared store.
	feed    NodeFeed
	remote  atomic.Uint64 // changes taken from the feed that memory did not already hold
	stop    chan struct{}
	stopped chan struct{}
}

var _ Store = (*nodeCache)(nil)

func (c *nodeCache) View(ctx context.Context, fn func(Tx) error) error {
	return c.inner.View(ctx, func(tx Tx) error {
		ct := &cacheTx{Tx: tx, c: c}
		defer func() { ct.done = true }()
		return fn(ct)
	})
}

func (c *nodeCache) Update(ctx context.Context, fn func(Tx) error) error {
	var puts []nodeWrite
	var marked []didkey.PublicKey // every key counted in c.writing, once per PutNode run
	err := c.inner.Update(ctx, func(tx Tx) error {
		puts = puts[:0]
		return fn(&cacheTx{Tx: tx, c: c, write: true, puts: &puts, marked: &marked})
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		for _, p := range puts {
			if p.gone {
				c.forget(p.n.Key, p.seq)
			} else {
				c.apply(p.n, p.seq)
			}
		}
	}
	for _, k := range marked {
		if c.writing[k]--; c.writing[k] <= 0 {
			delete(c.writing, k)
		}
	}
	return err
}

// apply puts n into memory unless memory already holds a later write of it. Like PutNode it
// replaces the record whole, so a touch not yet flushed is replaced too. Callers hold mu for
// writing (or own c alone).
func (c *nodeCache) apply(n Node, seq uint64) {
	t := c.table
	if s, had := t.find(n.Key); had {
		if t.text(s).seq > seq {
			return
		}
		if did, ok := t.storedDID(s); ok && did != n.DID && c.byDID[did] == n.Key {
			delete(c.byDID, did)
		}
	}
	delete(c.dirty, n.Key)
	if n.DID != "" && !endsInBody(n.DID, shortBodyOf(n.Key)) && !isFullDID(n.DID, n.Key) {
		c.byDID[n.DID] = n.Key
	}
	t.put(&n, seq)
}

// forget removes key's record from memory unless memory holds a later write of it. Callers
// hold mu for writing.
func (c *nodeCache) forget(key didkey.PublicKey, seq uint64) {
	t := c.table
	s, had := t.find(key)
	if !had || t.text(s).seq > seq {
		return
	}
	delete(c.dirty, key)
	if did, ok := t.storedDID(s); ok && c.byDID[did] == key {
		delete(c.byDID, did)
	}
	t.remove(key)
}

// isFullDID reports whether did is the full DID of k.
func isFullDID(did string, k didkey.PublicKey) bool {
	return strings.HasPrefix(did, fullDIDPrefix) && isHexOf(did[len(fullDIDPrefix):], k[:])
}

// fullDIDKey returns the key a full DID spells.
func fullDIDKey(did string) (didkey.PublicKey, bool) {
	var k didkey.PublicKey
	rest, ok := strings.CutPrefix(did, fullDIDPrefix)
	if !ok || len(rest) != 2*len(k) || strings.ToLower(rest) != rest {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(rest))
	return k, err == nil
}

// endsInBody reports whether did ends in body, the short body of the key it names, after its
// last colon: byShort then finds it.
func endsInBody(did string, body shortBody) bool {
	sb, ok := parseShortBody(did[strings.LastIndexByte(did, ':')+1:])
	return ok && sb == body
}

// keyByDID finds the node whose DID is did through the table's indexes. Callers hold mu
// for reading.
func (c *nodeCache) keyByDID(did string) (didkey.PublicKey, bool) {
	if k, ok := c.byDID[did]; ok {
		return k, true
	}
	if k, ok := fullDIDKey(did); ok {
		if s, ok := c.table.find(k); ok && c.table.didIs(s, did) {
			return k, true
		}
		return didkey.PublicKey{}, false
	}
	sb, ok := parseShortBody(did[strings.LastIndexByte(did, ':')+1:])
	if !ok {
		return didkey.PublicKey{}, false
	}
	return c.table.findDID(sb, did)
}

// TouchNode refuses a touch while inner refuses writes: the touch would be acknowledged
// in memory and then never made durable.
func (c *nodeCache) TouchNode(_ context.Context, key didkey.PublicKey, seen time.Time) error {
	if err := c.inner.CheckWrite(); err != nil {
		return err
	}
	if c.feed != nil {
		if err := c.load(key); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.table.find(key)
	if !ok {
		return ErrNotFound
	}
	if seen.After(c.table.lastSeen(s)) {
		c.table.touch(s, seen)
		c.dirty[key] = seen
	}
	return nil
}

// ScanNodes implements [NodeScanner], in listing order: each record is made from a list of
// the table, which later writes do not change.
func (c *nodeCache) ScanNodes(ctx context.Context, fn func(*Node) error) error {
	l, err := ListNodes(ctx, c)
	if err != nil {
		return err
	}
	for i := range l.Len() {
		n := l.Node(i)
		if err := fn(&n); err != nil {
			return err
		}
	}
	return nil
}

// settled returns memory's copy of k's record when it is inner's record with its touches:
// no write of k is in flight between inner and memory. Inner runs Update functions one at a
// time, so a write counted in c.writing after this answer runs after the flush's function,
// and its record is the one inner keeps.
func (c *nodeCache) settled(k didkey.PublicKey) (Node, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.table.find(k)
	if !ok || c.writing[k] > 0 {
		return Node{}, false
	}
	return c.table.node(s), true
}

func (c *nodeCache) Flush(ctx context.Context) error {
	c.mu.Lock()
	dirty := c.dirty
	c.dirty = map[didkey.PublicKey]time.Time{}
	c.mu.Unlock()
	keys := make([]didkey.PublicKey, 0, len(dirty))
	for k := range dirty {
		keys = append(keys, k)
	}
	if c.feed != nil {
		return c.flushShared(ctx, keys, dirty)
	}
	for chunk := range slices.Chunk(keys, flushChunk) {
		// Straight to inner: memory already holds these times. A record is written from
		// memory when memory holds inner's record (settled), else read back from inner, so
		// that a registration committed since the touch is kept whole. The touches were
		// acknowledged, so the flush may use the disk's reserve; it fails only when the
		// store does, so it keeps no undo log (ForTouches).
		err := c.inner.Update(ForTouches(ctx), func(tx Tx) error {
			for _, k := range chunk {
				if n, ok := c.settled(k); ok {
					if err := tx.WriteTouchedNode(n); err != nil {
						return err
					}
					continue
				}
				n, err := tx.Node(k)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if seen := dirty[k]; seen.After(n.LastSeen) {
					n.LastSeen = seen
					if err := tx.PutNode(n); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			c.redirty(dirty)
			return err
		}
	}
	return nil
}

func (c *nodeCache) Maintain(ctx context.Context) error { return c.inner.Maintain(ctx) }

func (c *nodeCache) Exclusive(ctx context.Context, lock int64, fn func(context.Context) error) (bool, error) {
	return c.inner.Exclusive(ctx, lock, fn)
}

func (c *nodeCache) ReadCounters(ctx context.Context, keys ...string) ([]Counter, error) {
	return c.inner.ReadCounters(ctx, keys...)
}

func (c *nodeCache) Health() Health { return c.inner.Health() }

func (c *nodeCache) CheckWrite() error { return c.inner.CheckWrite() }

// NodeFeed is nil: the cache follows its inner store's feed itself, and a cache in front of
// it would not see the writes that go through this one.
func (c *nodeCache) NodeFeed() NodeFeed { return nil }

// Close stops following a shared store, makes the last touches durable, then closes inner. When the touches cannot be made
// durable the error says how many nodes' last_seen was lost.
func (c *nodeCache) Close() error {
	if c.stop != nil {
		close(c.stop)
		<-c.stopped
		c.stop = nil
	}
	ferr := c.Flush(context.Background())
	if ferr != nil {
		c.mu.Lock()
		n := len(c.dirty)
		c.mu.Unlock()
		ferr = fmt.Errorf("the last_seen of %d nodes was not made durable: %w", n, ferr)
	}
	return errors.Join(ferr, c.inner.Close())
}

// cacheTx serves node reads from memory in a View and from inner in an Update (whose reads
// must see inner's latest committed state), and records an Update's node writes for memory.
type cacheTx struct {
	Tx
	c      *nodeCache
	write  bool
	done   bool // a View's Tx kept past its function; memory reads must refuse it too
	puts   *[]nodeWrite
	marked *[]didkey.PublicKey
}

// nodeWrite is a node write of an Update, applied to memory once the Update committed: a
// record put, or (gone) the record of n.Key deleted.
type nodeWrite struct {
	n    Node
	seq  uint64
	gone bool
}

// fromMemory reports whether a node read is served from memory, or fails when the Tx is
// used after its View returned.
func (t *cacheTx) fromMemory() (bool, error) {
	if t.done {
		return false, ErrTxDone
	}
	return !t.write, nil
}

func (t *cacheTx) PutNode(n Node) error {
	_, err := t.PutNodeRevision(n)
	return err
}

// WriteTouchedNode is PutNode: only the cache's own flush may skip it, and that writes to
// inner's Tx.
func (t *cacheTx) WriteTouchedNode(n Node) error { return t.PutNode(n) }

func (t *cacheTx) PutNodeRevision(n Node) (uint64, error) {
	if t.c.feed != nil {
		rev, err := t.Tx.PutNodeRevision(n)
		if err != nil {
			return 0, err
		}
		*t.puts = append(*t.puts, nodeWrite{n: cloneNode(n), seq: rev})
		return rev, nil
	}
	if t.puts == nil {
		return 0, ErrWriteInView
	}
	// Counted before the write, so that a flush running after this function, in the same
	// transaction group or a later one, reads the record from inner rather than write back
	// the memory copy this write replaces.
	t.c.mu.Lock()
	t.c.writing[n.Key]++
	t.c.mu.Unlock()
	*t.marked = append(*t.marked, n.Key)
	if err := t.Tx.PutNode(n); err != nil {
		return 0, err
	}
	t.c.mu.Lock()
	t.c.seq++
	seq := t.c.seq
	t.c.mu.Unlock()
	*t.puts = append(*t.puts, nodeWrite{n: cloneNode(n), seq: seq})
	return 0, nil
}

// DeleteNode deletes the record in inner and, once the Update committed, from memory. Over a
// shared store the deletion wins over any revision memory holds; a record of the key written
// since comes back through the feed.
func (t *cacheTx) DeleteNode(k didkey.PublicKey) error {
	if t.puts == nil {
		return ErrWriteInView
	}
	if t.c.feed == nil {
		t.c.mu.Lock()
		t.c.writing[k]++
		t.c.mu.Unlock()
		*t.marked = append(*t.marked, k)
	}
	if err := t.Tx.DeleteNode(k); err != nil {
		return err
	}
	seq := uint64(math.MaxUint64)
	if t.c.feed == nil {
		t.c.mu.Lock()
		t.c.seq++
		seq = t.c.seq
		t.c.mu.Unlock()
	}
	*t.puts = append(*t.puts, nodeWrite{n: Node{Key: k}, seq: seq, gone: true})
	return nil
}

func (t *cacheTx) Node(k didkey.PublicKey) (Node, error) {
	if mem, err := t.fromMemory(); err != nil || !mem {
		if err != nil {
			return Node{}, err
		}
		return t.Tx.Node(k)
	}
	t.c.mu.RLock()
	var n Node
	s, ok := t.c.table.find(k)
	if ok {
		n = t.c.table.node(s)
	}
	t.c.mu.RUnlock()
	if !ok {
		if t.c.feed != nil {
			return t.Tx.Node(k)
		}
		return Node{}, ErrNotFound
	}
	return n, nil
}

func (t *cacheTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	if mem, err := t.fromMemory(); err != nil || !mem {
		if err != nil {
			return didkey.PublicKey{}, err
		}
		return t.Tx.NodeKeyByDID(did)
	}
	t.c.mu.RLock()
	k, ok := t.c.keyByDID(did)
	t.c.mu.RUnlock()
	if !ok {
		if t.c.feed != nil {
			return t.Tx.NodeKeyByDID(did)
		}
		return didkey.PublicKey{}, ErrNotFound
	}
	return k, nil
}

func (t *cacheTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	if mem, err := t.fromMemory(); err != nil || !mem {
		if err != nil {
			return nil, err
		}
		return t.Tx.NodeKeysByShortBody(body)
	}
	sb, ok := parseShortBody(body)
	if !ok {
		return nil, nil
	}
	t.c.mu.RLock()
	keys := t.c.table.keysByShort(sb)
	t.c.mu.RUnlock()
	if len(keys) == 0 && t.c.feed != nil {
		return t.Tx.NodeKeysByShortBody(body)
	}
	return keys, nil
}

// shortBody is the first four bytes of SHA-256(k), whose hex is a key's short DID body.
type shortBody [4]byte

func shortBodyOf(k didkey.PublicKey) shortBody {
	sum := sha256.Sum256(k[:])
	return shortBody(sum[:4])
}

// parseShortBody reads an 8-character lowercase hex body, as ShortBody writes it.
func parseShortBody(body string) (shortBody, bool) {
	var sb shortBody
	if len(body) != 2*len(sb) || strings.ToLower(body) != body {
		return sb, false
	}
	_, err := hex.Decode(sb[:], []byte(body))
	return sb, err == nil
}

func (t *cacheTx) EachNode(fn func(Node) error) error {
	if mem, err := t.fromMemory(); err != nil || !mem {
		if err != nil {
			return err
		}
		return t.Tx.EachNode(fn)
	}
	// Copy under the lock and call fn outside it, so a slow fn never holds up writers.
	t.c.mu.RLock()
	all := make([]Node, 0, t.c.table.live)
	t.c.table.each(func(s slot) { all = append(all, t.c.table.node(s)) })
	t.c.mu.RUnlock()
	// Key order, as the stores iterate.
	slices.SortFunc(all, func(a, b Node) int { return bytes.Compare(a.Key[:], b.Key[:]) })
	for _, n := range all {
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

func (t *cacheTx) NodeCount() (int, error) {
	if mem, err := t.fromMemory(); err != nil || !mem {
		if err != nil {
			return 0, err
		}
		return t.Tx.NodeCount()
	}
	t.c.mu.RLock()
	defer t.c.mu.RUnlock()
	return t.c.table.live, nil
}
