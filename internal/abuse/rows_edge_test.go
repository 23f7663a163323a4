package abuse

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
)

// runRow runs row's attack against d until the stop it returns is called; count sees every
// answer.
func runRow(d *daemon, row attack.Row, count func(attack.Answer)) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		row.Attack(context.Background(), d.target(), nil, quit, count)
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// waitUntil polls cond until it holds, failing the test past testkit.WaitBound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testkit.WaitBound); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, testkit.WaitBound)
		}
	}
}

// startTLS is start for a row served over TLS: with a certificate of its own, which the
// target's clients and freshGet trust.
func startTLS(t *testing.T, flags ...string) *daemon {
	t.Helper()
	args, cert, err := attack.SelfSigned(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, append(flags, args...)...)
	if d.tg.TLS, err = attack.Trusting(cert); err != nil {
		t.Fatal(err)
	}
	return d
}

// freshGet asks for /health on a new connection from ip, over HTTP/2 when d serves TLS.
func freshGet(d *daemon, ip string) error {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}).DialContext}
	if tc := d.target().TLS; tc != nil {
		tr.TLSClientConfig, tr.ForceAttemptHTTP2 = tc.Clone(), true
	}
	res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(d.URL + "/health")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /health: %d", res.StatusCode)
	}
	return nil
}

// TestRow14SlowReaders: with every slot held by a slow reader, an honest client's requests on
// new connections all succeed, and the daemon's memory grows by no more than its
// connections may hold.
func TestRow14SlowReaders(t *testing.T) {
	row := attack.Get(14)
	const conns = attack.SlowReaderAddrs * attack.SlowReaderConns
	// A connection with its buffers and a request's answer under way: some 200 KiB at most.
	honestThrough(t, start(t, row.Flags...), row, conns, conns*200<<10+32<<20)
}

// honestThrough runs row against d until open of its answers have come (each attack
// connection answers once when it is open), then sends 16 honest requests on new
// connections, each of which must succeed, and stops the attack: the daemon's peak
// resident set must stay within bound of where it started.
func honestThrough(t *testing.T, d *daemon, row attack.Row, open, bound int64) {
	t.Helper()
	rss0, _ := d.memory(t)
	var answered atomic.Int64
	stop := runRow(d, row, func(a attack.Answer) {
		if a.Status == http.StatusOK {
			answered.Add(1)
		}
	})
	defer stop()
	waitUntil(t, "every attack connection open", func() bool { return answered.Load() >= open })
	for i := range 16 {
		if err := freshGet(d, "127.0.0.1"); err != nil {
			t.Fatalf("honest request %d during the attack: %v", i, err)
		}
	}
	stop()
	_, peak := d.memory(t)
	if peak > rss0+bound {
		t.Fatalf("peak resident set %d MiB; want under %d MiB", peak>>20, (rss0+bound)>>20)
	}
	t.Logf("honest 16/16 answered over %d attack answers; peak resident set %d MiB (from %d MiB)", answered.Load(), peak>>20, rss0>>20)
}

// TestRow15UnknownHeartbeats: heartbeats of a node never registered, from 1,000 addresses,
// spend their senders' malformed-request budgets and are refused at the door past them,
// while an honest node's heartbeats all succeed.
func TestRow15UnknownHeartbeats(t *testing.T) {
	row := attack.Get(15)
	d := start(t, row.Flags...)
	n := newNode(t, d.api("127.0.0.5"))
	if _, err := n.Register(context.Background(), "203.0.113.9:7000", nil, ""); err != nil {
		t.Fatal(err)
	}
	var unknown, refused atomic.Int64
	stop := runRow(d, row, func(a attack.Answer) {
		switch {
		case a.Code == "UNKNOWN_DID":
			unknown.Add(1)
		case a.Status == http.StatusTooManyRequests:
			refused.Add(1)
		}
	})
	defer stop()
	beats := honest(t, "honest heartbeats", 20*time.Millisecond, func() error {
		_, err := n.Heartbeat(context.Background())
		return err
	})
	waitUntil(t, "the flood refused at the door", func() bool { return refused.Load() >= 2000 })
	stop()
	ran := beats()
	// 1,000 addresses in four /24s: each block answers 960 a minute; a window that turns
	// during the run may add as many again.
	if u := unknown.Load(); u > 2*4*960 {
		t.Fatalf("%d UNKNOWN_DID answers; want at most the four blocks' budgets", u)
	}
	t.Logf("%d honest heartbeats succeeded; the flood got %d UNKNOWN_DID answers and %d refusals", ran, unknown.Load(), refused.Load())
}

// edgeRSSBound is the resident set the connections and streams of an attack from conns
// connections may add, as docs/protocol.md §8.1 counts them (a connection and its upload
// buffer 128 KiB, a stream in flight 24 KiB, each connection at most 16 streams), with room
// for the runtime's own growth.
func edgeRSSBound(conns int64) int64 { return conns*128<<10 + conns*16*24<<10 + 32<<20 }

// TestRow16ParkedH2Streams: 256 connections over TLS, each opening 250 streams that make
// no progress, hold their slots and read nothing; an honest client's requests on new
// connections all succeed, and the daemon's memory stays within what §8.1 counts for the
// attack's connections.
func TestRow16ParkedH2Streams(t *testing.T) {
	row := attack.Get(16)
	const all = attack.ParkedAddrs * attack.ParkedConns
	honestThrough(t, startTLS(t, row.Flags...), row, all, edgeRSSBound(all))
}

// TestRow17RapidReset: connections opening and resetting streams at row 17's pace; an
// honest client's requests on new connections all succeed, and the daemon's memory stays
// within what §8.1 counts for the attack's connections.
func TestRow17RapidReset(t *testing.T) {
	row := attack.Get(17)
	honestThrough(t, startTLS(t, row.Flags...), row, attack.RapidResetConns, edgeRSSBound(attack.RapidResetConns))
}

// TestRow18ManyBlocks: 64 /24s of one /16 (127.1.x.1), each a connection of 16 parked
// streams, and 32 more addresses one stream each, take the requests in flight past their
// soft total; an honest newcomer's requests all succeed, and so do those of an honest client
// that already has a request in flight.
func TestRow18ManyBlocks(t *testing.T) {
	manyBlocks(t, startTLS(t, attack.Get(18).Flags...), attack.Get(18).Attack, "127.0.0.7", "127.0.0.8")
}

// TestRow18ManyBlocksIPv6: row 18 from 64 /48s of one /32 (2001:db8::/32) and 32 more /64s,
// the honest clients in another /32 (3fff::/32). It runs in an IPv6 network namespace of its
// own, whose loopback holds every address the row sends from and the daemon listens on ::1
// (inNetns); without root it is
// skipped, and the IPv4 row above runs the same attack.
func TestRow18ManyBlocksIPv6(t *testing.T) {
	block := func(i int) string { return fmt.Sprintf("2001:db8:%x::1", i) }
	single := func(i int) string { return fmt.Sprintf("2001:db8:%x:1::1", i) }
	const newcomer, busy = "3fff:0:1::1", "3fff:0:2::1"
	if os.Getenv(netnsEnv) == "" {
		addrs := []string{newcomer, busy}
		for i := range attack.ManyBlocks {
			addrs = append(addrs, block(i))
		}
		for i := range attack.ManyBlocksSingles {
			addrs = append(addrs, single(i))
		}
		inNetns(t, addrs)
		return
	}
	d := startTLS(t, append(attack.Get(18).Flags, "--listen", "[::1]:0")...)
	manyBlocks(t, d, func(_ context.Context, tg *attack.Target, _ any, stop <-chan struct{}, count func(attack.Answer)) {
		attack.HoldManyBlocks(tg, block, single, stop, count)
	}, newcomer, busy)
}

// manyBlocks runs row 18's attack against d until every attack connection is open and the
// requests in flight are at their bound (streams refused), then sends 16 honest requests on
// new connections from newcomer, and 16 from busy while busy has a request of its own in
// flight (a POST whose body it is still sending): each must succeed.
func manyBlocks(t *testing.T, d *daemon, attackFn func(context.Context, *attack.Target, any, <-chan struct{}, func(attack.Answer)), newcomer, busy string) {
	t.Helper()
	var open, ended atomic.Int64
	stop := runRow(d, attack.Row{Attack: attackFn}, func(a attack.Answer) {
		switch {
		case a.Status == http.StatusOK:
			open.Add(1)
		case a.Code == attack.StreamEnded:
			ended.Add(1)
		}
	})
	defer stop()
	const conns = attack.ManyBlocks + attack.ManyBlocksSingles
	waitUntil(t, "every attack connection open and streams refused", func() bool { return open.Load() >= conns && ended.Load() >= 100 })
	for i := range 16 {
		if err := freshGet(d, newcomer); err != nil {
			t.Fatalf("honest newcomer's request %d during the attack: %v", i, err)
		}
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	own, err := attack.DialH2(busy, u.Host, 65535)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, err := own.Request("POST", "/v1/auth/device-login", make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		if err := freshGet(d, busy); err != nil {
			t.Fatalf("request %d of an honest client with one in flight, during the attack: %v", i, err)
		}
	}
	stop()
	t.Logf("honest accepted 32/32; the attack opened %d connections and had %d streams ended", open.Load(), ended.Load())
}
