package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/svrp/svrp/didkey"
)

// follow loads the node table from a shared store's feed and starts following it.
func (c *nodeCache) follow(ctx context.Context, feed NodeFeed) (Store, error) {
	c.feed = feed
	c.table = newNodeTable(0)
	c.byDID = map[string]didkey.PublicKey{}
	mark, err := feed.NodeChanges(ctx, 0, func(n Node, rev uint64) { c.apply(n, rev) }, func(didkey.PublicKey, uint64) {}, c.seenRemote)
	if err != nil {
		return nil, err
	}
	c.table.settle()
	c.stop, c.stopped = make(chan struct{}), make(chan struct{})
	go c.followLoop(mark)
	return c, nil
}

// followLoop reads the feed every followEvery until Close. A failed read is tried again at
// the next tick from the same mark, so nothing is skipped.
func (c *nodeCache) followLoop(mark int64) {
	defer close(c.stopped)
	// Close clears c.stop once this loop has ended; the goroutine below may outlive the
	// loop, so it must not read the field.
	stop := c.stop
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		next, err := c.feed.NodeChanges(ctx, mark, c.applyRemote, c.forgetRemote, c.seenRemote)
		if err == nil {
			mark = next
		}
	}
}

// applyRemote takes a record from the feed unless memory already holds its revision or a
// later one. A record from the feed replaces memory's whole, except that last_seen never
// moves back: a touch of this process not yet flushed, or flushed after the feed's read,
// is kept.
func (c *nodeCache) applyRemote(n Node, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, had := c.table.find(n.Key)
	if had && c.table.text(s).seq >= rev {
		return
	}
	seen := n.LastSeen
	if had && c.table.lastSeen(s).After(seen) {
		seen = c.table.lastSeen(s)
	}
	dirty, isDirty := c.dirty[n.Key]
	if isDirty && dirty.After(seen) {
		seen = dirty
	}
	n.LastSeen = seen
	c.apply(n, rev)
	if isDirty {
		c.dirty[n.Key] = dirty
	}
	c.remote.Add(1)
}

// seenRemote moves the last_seen of key forward to at: a heartbeat another daemon (or this
// one) flushed. The record and its revision stay; a key memory does not hold is passed
// over, since its record, when it comes, carries its last_seen.
func (c *nodeCache) seenRemote(key didkey.PublicKey, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.table.find(key)
	if !ok || !at.After(c.table.lastSeen(s)) {
		return
	}
	c.table.touch(s, at)
	c.remote.Add(1)
}

// forgetRemote removes a record the feed says was deleted at revision rev, unless memory
// holds a later revision (the key registered again since).
func (c *nodeCache) forgetRemote(key didkey.PublicKey, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, had := c.table.find(key); had && c.table.text(s).seq <= rev {
		c.forget(key, rev)
		c.remote.Add(1)
	}
}

// load puts key's record in memory from the store when memory does not hold it: a node
// registered through another daemon since the last read of the feed.
func (c *nodeCache) load(key didkey.PublicKey) error {
	c.mu.RLock()
	_, ok := c.table.find(key)
	c.mu.RUnlock()
	if ok {
		return nil
	}
	var n Node
	err := c.inner.View(context.Background(), func(tx Tx) (err error) {
		n, err = tx.Node(key)
		return err
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.table.find(key); !ok {
		// Revision 0: the feed's copy, with its revision, replaces it when it comes.
		c.apply(n, 0)
	}
	return nil
}

// RemoteChanges implements [NodeFollower]: the changes taken from the feed.
func (c *nodeCache) RemoteChanges() uint64 { return c.remote.Load() }

// flushShared writes the touches in dirty in one statement per sharedFlushChunk nodes.
func (c *nodeCache) flushShared(ctx context.Context, keys []didkey.PublicKey, dirty map[didkey.PublicKey]time.Time) error {
	for chunk := range slices.Chunk(keys, sharedFlushChunk) {
		seen := make([]time.Time, len(chunk))
		for i, k := range chunk {
			seen[i] = dirty[k]
		}
		if err := c.feed.TouchNodes(ctx, chunk, seen); err != nil {
			c.redirty(dirty)
			return errors.Join(errors.New("store: flushing heartbeats"), err)
		}
	}
	return nil
}

// redirty puts back the touches of a flush that failed, unless a later touch of the same
// node came meanwhile.
func (c *nodeCache) redirty(dirty map[didkey.PublicKey]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, seen := range dirty {
		if cur, ok := c.dirty[k]; !ok || seen.After(cur) {
			c.dirty[k] = seen
		}
	}
}
