package attack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The edge's rows: connections that hold their slots without progress, and refusals that
// cost nothing to send. They follow the suite's other rows.
func init() {
	Rows = append(Rows, slowReadersRow, unknownHeartbeatsRow, parkedStreamsRow, rapidResetRow, manyBlocksRow)
}

// SlowReaderAddrs and SlowReaderConns are how many addresses, and connections from each, row
// 14 holds: every slot, beside the honest clients' own.
const (
	SlowReaderAddrs = 8
	SlowReaderConns = 64
)

var slowReadersRow = Row{N: 14,
	What:  "slow readers: 8 addresses × 64 connections, each pipelining GET /openapi.json with a 4 KiB receive buffer and reading 3 KB a second, at --max-connections 768: the attack holds every slot the honest clients' own keep-alive connections leave",
	Bound: "an answer draining below the floor rate gives its slot to a newcomer: 100 % of honest requests on new connections succeed, honest p99 within 3× of alone; memory bounded by the connections",
	Flags: []string{"--max-connections", fmt.Sprint(SlowReaderAddrs*SlowReaderConns + 256)},
	Holds: SlowReaderAddrs * SlowReaderConns,
	Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
		holdEach(SlowReaderAddrs, SlowReaderConns, func(a int) { SlowRead(t.URL, Addr(Attackers, a), stop, count) })
	},
}

// holdEach runs hold(a), for each of addrs addresses a, on conns goroutines of its own,
// and returns once every one has returned.
func holdEach(addrs, conns int, hold func(a int)) {
	var wg sync.WaitGroup
	for a := range addrs {
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hold(a)
			}()
		}
	}
	wg.Wait()
}

// SlowRead holds a connection from ip to the registry at base that pipelines GET
// /openapi.json and reads 3 KB a second, and connects again whenever it is cut, until stop is
// closed. It counts a 200 for each connection that got to reading, "refused" for each cut
// or refused.
func SlowRead(base, ip string, stop <-chan struct{}, count func(Answer)) {
	u, err := url.Parse(base)
	if err != nil {
		return
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second, Control: smallReceiveBuffer}
	for {
		select {
		case <-stop:
			return
		default:
		}
		conn, err := d.Dial("tcp", u.Host)
		if err != nil {
			count(Answer{Code: "refused"})
			pause(stop, 100*time.Millisecond)
			continue
		}
		conn.Write(bytes.Repeat([]byte("GET /openapi.json HTTP/1.1\r\nHost: registry\r\n\r\n"), 20))
		buf := make([]byte, 300)
		reading := false
		for pause(stop, 100*time.Millisecond) {
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.ReadFull(conn, buf); err != nil {
				count(Answer{Code: "refused"})
				break
			}
			if !reading {
				reading = true
				count(Answer{Status: http.StatusOK})
			}
		}
		conn.Close()
	}
}

// pause waits d, and reports false when stop was closed first.
func pause(stop <-chan struct{}, d time.Duration) bool {
	select {
	case <-stop:
		return false
	case <-time.After(d):
		return true
	}
}

// smallReceiveBuffer dials with a 4 KiB receive buffer, so that the server's writes block
// once the little the client holds and the server's own buffer are full.
func smallReceiveBuffer(_, _ string, rc syscall.RawConn) error {
	var err error
	rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return err
}

// UnknownHeartbeatAddrs is how many addresses row 15 sends from.
const UnknownHeartbeatAddrs = 1000

var unknownHeartbeatsRow = Row{N: 15,
	What:  "UNKNOWN_DID heartbeats of a node never registered, from 1,000 addresses",
	Bound: "each counts against its sender's malformed-request budget: past 60 an address, past 960 its /24, is refused at the door; handlers are served in turns fair across networks; 100 % of honest logins and heartbeats succeed, honest p99 within 3× of alone",
	Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
		body := func() []byte {
			return []byte(fmt.Sprintf(`{"did":"did:svrp:n:0123abcd","ts":%d,"signature":"x"}`, time.Now().Unix()))
		}
		Flood(16, stop, func(w, i int) {
			ip := Addr(Attackers, (w+16*i)%UnknownHeartbeatAddrs)
			count(t.Post(ctx, t.HTTP(ip), "/api/v1/heartbeat", body()))
		})
	},
}

// ParkedAddrs, ParkedConns and ParkedStreams are how many addresses (each in a /24 of its
// own), connections from each (the per-address cap at the defaults) and streams on each
// row 16 opens: as many streams as Go's server let a connection open before the daemon
// bounded them.
const (
	ParkedAddrs   = 4
	ParkedConns   = 64
	ParkedStreams = 250
)

var parkedStreamsRow = Row{N: 16,
	What:  "parked HTTP/2 streams: 4 addresses × 64 connections over TLS, each opening 250 streams that make no progress (a GET with a flow-control window of 0, or a POST whose 4 KB body never ends), and opening again whenever one is reset or its connection cut",
	Bound: "at most 16 streams a connection and the requests in flight per group and in total; parked answers reset after the send timeout; 100 % of honest requests succeed, honest p99 within 3× of alone; peak RSS under the 3,776 MiB §8.1 bounds any connection-level attack with at the defaults",
	TLS:   true,
	Holds: ParkedAddrs * ParkedConns,
	Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
		holdEach(ParkedAddrs, ParkedConns, func(a int) {
			onH2(t, Addr(Attackers, a*250), 0, stop, count, func(c *H2Conn) { c.Park(ParkedStreams) })
		})
	},
}

// RapidResetConns is how many connections, each from an address of its own, row 17 resets
// streams on.
const RapidResetConns = 4

// RapidResetRate is the streams a second each of row 17's connections opens and resets: far
// more than any client has a reason to cancel, yet few enough that the attacker, sharing the
// machine's cores with the daemon, does not take one of them itself.
const RapidResetRate = 2000

var rapidResetRow = Row{N: 17,
	What:  "rapid reset (CVE-2023-44487): 4 connections over TLS from 4 addresses, each opening GET /openapi.json streams and resetting them at once, 2,000 a second each (paced so that the attacker does not take a core of the machine it shares with the daemon)",
	Bound: "a connection runs at most its 16 handlers and queues at most four times as many, and is closed past that or once it has cancelled more than 100 streams before their answers within 10 s; 100 % of honest requests succeed, honest p99 within 3× of alone; peak RSS under the 3,776 MiB of §8.1",
	TLS:   true,
	Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
		holdEach(RapidResetConns, 1, func(a int) {
			onH2(t, Addr(Attackers, a*250), 65535, stop, count, func(c *H2Conn) { c.RapidReset(stop, RapidResetRate) })
		})
	},
}

// onH2 keeps an HTTP/2 connection from ip to the registry, running attack on it, and
// connects again whenever the server closes it, until stop is closed. It counts a 200 for each connection made, "refused" for
// each that could not be.
func onH2(t *Target, ip string, window uint32, stop <-chan struct{}, count func(Answer), attack func(*H2Conn)) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return
	}
	var resets, goaways atomic.Int64
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := DialH2(ip, u.Host, window)
		if err != nil {
			count(Answer{Code: "refused"})
			pause(stop, 100*time.Millisecond)
			continue
		}
		count(Answer{Status: http.StatusOK})
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			c.Drain(&resets, &goaways, nil)
		}()
		// The connection is held until the server ends it or the attack stops; closing it
		// then also ends a write the server's flow control holds up.
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			select {
			case <-stop:
			case <-ended:
			}
			c.Close()
		}()
		attack(c)
		<-closed
		<-ended
		pause(stop, 100*time.Millisecond)
	}
}

// ManyBlocksConns is the connection cap of row 18, and ManyBlocks and ManyBlocksSingles how
// many blocks hold a connection of 16 parked streams each, and how many client groups more
// hold one parked stream each: the blocks alone fill the soft total of requests in flight
// (twice the connection cap), each block within its own bounds, and the singles take it
// towards the hard total (three times the cap) with the connections the honest clients leave.
const (
	ManyBlocksConns   = 512
	ManyBlocks        = 64
	ManyBlocksSingles = 32
)

// manyBlocksStreams is how many streams each of row 18's block connections keeps parked: as
// many as a connection may carry.
const manyBlocksStreams = 16

var manyBlocksRow = Row{N: 18,
	What:  "many blocks: 64 /24s of one /16, each a connection over TLS keeping 16 streams parked (a POST whose body never ends), and 32 more addresses one stream each, at --max-connections 512: the requests in flight past their soft total, each block within its own bounds",
	Bound: "past the soft total a newcomer, or a client with a request in flight, makes room by evicting the longest-waiting request of the network, block and client holding the most: 100 % of honest requests succeed, honest p99 within 3× of alone",
	Flags: []string{"--max-connections", fmt.Sprint(ManyBlocksConns)},
	TLS:   true,
	Holds: ManyBlocks + ManyBlocksSingles,
	Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
		HoldManyBlocks(t, func(i int) string { return Addr(Attackers, i*250) }, func(i int) string { return Addr(Attackers, i*250+1) }, stop, count)
	},
}

// HoldManyBlocks runs row 18's attack: from block(i), for each of ManyBlocks blocks, a
// connection keeping 16 streams parked, and from single(i), for each of ManyBlocksSingles
// addresses, a connection keeping one; each stream the server ends is opened again, until
// stop is closed. It counts a 200 for each connection made, "refused" for each that could not
// be, and StreamEnded for each stream the server ended.
func HoldManyBlocks(t *Target, block, single func(i int) string, stop <-chan struct{}, count func(Answer)) {
	var wg sync.WaitGroup
	for i := range ManyBlocks + ManyBlocksSingles {
		ip, streams := "", manyBlocksStreams
		if i < ManyBlocks {
			ip = block(i)
		} else {
			ip, streams = single(i-ManyBlocks), 1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			onH2Refilled(t, ip, streams, stop, count)
		}()
	}
	wg.Wait()
}

// onH2Refilled is onH2 keeping streams POSTs parked on each connection, each with a 4 KB body
// that never ends, opening another each time the server ends one (refused, reset or
// answered), paced so that a refused stream costs the attacker's core no more than the
// daemon's.
func onH2Refilled(t *Target, ip string, streams int, stop <-chan struct{}, count func(Answer)) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return
	}
	var resets, goaways atomic.Int64
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := DialH2(ip, u.Host, 65535)
		if err != nil {
			count(Answer{Code: "refused"})
			pause(stop, 100*time.Millisecond)
			continue
		}
		count(Answer{Status: http.StatusOK})
		ended := make(chan struct{})
		again := make(chan struct{}, streams)
		var mu sync.Mutex
		open := map[uint32]bool{}
		go func() {
			defer close(ended)
			c.Drain(&resets, &goaways, func(id uint32) {
				mu.Lock()
				was := open[id]
				delete(open, id)
				mu.Unlock()
				if !was {
					return
				}
				count(Answer{Code: StreamEnded})
				again <- struct{}{}
			})
		}()
		park := func() bool {
			mu.Lock()
			defer mu.Unlock()
			id, err := c.Request("POST", "/v1/auth/device-login", make([]byte, 4096))
			open[id] = true
			return err == nil
		}
		ok := true
		for range streams {
			ok = ok && park()
		}
		for ok {
			select {
			case <-stop:
				ok = false
			case <-ended:
				ok = false
			case <-again:
				ok = pause(stop, refillPause) && park()
			}
		}
		c.Close()
		<-ended
		pause(stop, 100*time.Millisecond)
	}
}

// StreamEnded is the outcome row 18 counts for each stream the server ended.
const StreamEnded = "stream ended"

// refillPause is how long row 18 waits before opening a stream in place of one that ended.
const refillPause = 10 * time.Millisecond
