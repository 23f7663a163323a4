package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/registry/httpapi"
)

// What an HTTP/2 connection and a parked stream may cost the daemon at most: the figures
// docs/protocol.md §8.1 bounds the daemon's memory with. They are measured with the attacker
// in the same process, its buffers counted too, so the daemon's own share is below them, and
// hold under the race detector, which adds some 10 KiB to a connection. A stream parked with
// the largest body but its last byte holds that body besides, read before its turn.
const (
	idleH2ConnBytes         = 72 << 10
	parkedH2StreamBytes     = 24 << 10
	parkedH2BodyStreamBytes = 112 << 10
)

// inUse is the memory the Go runtime holds for the heap and the stacks, after a collection.
func inUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// dialH2Conns opens n raw HTTP/2 connections to addr, each from an address of its own
// (127.10.0.1 on) offering window bytes of window for each stream's answer, and drains them
// until the test ends, counting the streams the server reset and the GOAWAYs it sent.
func dialH2Conns(t *testing.T, addr string, n int, window uint32) (open []*attack.H2Conn, resets, goaways *atomic.Int64) {
	resets, goaways = new(atomic.Int64), new(atomic.Int64)
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	for i := range n {
		c, err := attack.DialH2(fmt.Sprintf("127.%d.0.1", 10+i), addr, window)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		go c.Drain(resets, goaways, nil)
	}
	return open, resets, goaways
}

// TestEdgeH2Memory measures what an idle HTTP/2 connection and a stream parked with a
// window of 0 cost, and holds them under the figures §8.1 computes its bound from.
func TestEdgeH2Memory(t *testing.T) {
	const conns = 64
	addr, _ := tlsEdge(t, func(c *Config) {
		c.MaxConnections, c.MaxConnectionsPerAddress = 2*conns*h2Streams, h2Streams
		c.Edge.SendTimeout = time.Hour
	})
	before := inUse()
	g0 := runtime.NumGoroutine()
	open, resets, _ := dialH2Conns(t, addr, conns, 0)
	// Each connection's server side runs two goroutines once its preface is read.
	waitFor(t, "the connections served", 30*time.Second, func() bool { return runtime.NumGoroutine()-g0 >= 3*conns })
	idle := inUse()
	perConn := (idle - before) / conns
	for _, c := range open {
		for range h2Streams {
			c.Get("/openapi.json")
		}
	}
	streams := conns * h2Streams
	waitFor(t, "the streams parked", 30*time.Second, func() bool { return runtime.NumGoroutine()-g0 >= 3*conns+streams })
	perStream := (inUse() - idle) / int64(streams)
	t.Logf("an idle HTTP/2 connection: %d KiB; a parked stream: %d KiB (both sides)", perConn>>10, perStream>>10)
	if perConn > idleH2ConnBytes || perStream > parkedH2StreamBytes {
		t.Fatalf("an idle connection costs %d bytes, a parked stream %d; §8.1 counts at most %d and %d", perConn, perStream, idleH2ConnBytes, parkedH2StreamBytes)
	}
	if resets.Load() != 0 {
		t.Fatalf("%d streams reset before the send timeout", resets.Load())
	}
}

// TestEdgeH2BodyMemory measures what a stream parked with its body unfinished, all but the
// last byte of the largest body sent, costs beyond its connection, and holds it under the
// figure §8.1 computes its bound from.
func TestEdgeH2BodyMemory(t *testing.T) {
	const conns = 32
	addr, _ := tlsEdge(t, func(c *Config) {
		// Room for every stream within the soft total of requests in flight.
		c.MaxConnections, c.MaxConnectionsPerAddress = conns*h2Streams, h2Streams
		c.Edge.SendTimeout = time.Hour
	})
	open, resets, goaways := dialH2Conns(t, addr, conns, 65535)
	before := inUse()
	var sent sync.WaitGroup
	for _, c := range open {
		for range h2Streams {
			id, err := c.Request("POST", "/api/v1/register", []byte{})
			if err != nil {
				t.Fatal(err)
			}
			sent.Add(1)
			go func() {
				defer sent.Done()
				if err := c.Upload(id, httpapi.MaxBodyBytes-1); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	sent.Wait()
	streams := conns * h2Streams
	perStream := (inUse() - before) / int64(streams)
	t.Logf("a stream parked with its body unfinished: %d KiB (both sides)", perStream>>10)
	if perStream > parkedH2BodyStreamBytes {
		t.Fatalf("a stream parked with its body unfinished costs %d bytes; §8.1 counts at most %d", perStream, parkedH2BodyStreamBytes)
	}
	if resets.Load() != 0 || goaways.Load() != 0 {
		t.Fatalf("%d streams reset and %d connections ended while their bodies were on the way", resets.Load(), goaways.Load())
	}
}

// edgeMemoryBound is what connections and their streams can make the daemon hold at most,
// beyond its tables: every connection an idle HTTP/2 one with its upload window full, and
// every request in flight (three times the connection cap, the soft total's hard end) a
// parked stream with the largest body read but for its last byte. Streams refused in flight
// are cut within refusalWriteGrace and park nothing.
func edgeMemoryBound(maxConns int) int64 {
	return int64(maxConns)*(idleH2ConnBytes+h2ConnWindow) + 3*int64(maxConns)*parkedH2BodyStreamBytes
}

// TestEdgeMemoryBoundDocumented: the bound §8.1 states for the defaults is the one the
// measured figures give.
func TestEdgeMemoryBoundDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	mib := edgeMemoryBound(DefaultMaxConnections) >> 20
	want := fmt.Sprintf("= %d,%03d MiB**", mib/1000, mib%1000)
	if !strings.Contains(string(doc), want) {
		t.Fatalf("docs/protocol.md §8.1 does not state the bound at the defaults, %q", want)
	}
}
