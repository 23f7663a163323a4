package abuse

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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

// freshGet asks for /health on a new connection from ip.
func freshGet(d *daemon, ip string) error {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}).DialContext}
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
	d := start(t, row.Flags...)
	rss0, _ := d.memory(t)
	var reading atomic.Int64
	stop := runRow(d, row, func(a attack.Answer) {
		if a.Status == http.StatusOK {
			reading.Add(1)
		}
	})
	defer stop()
	const conns = attack.SlowReaderAddrs * attack.SlowReaderConns
	waitUntil(t, "every slow reader reading", func() bool { return reading.Load() >= conns })
	for i := range 16 {
		if err := freshGet(d, "127.0.0.1"); err != nil {
			t.Fatalf("honest request %d during the attack: %v", i, err)
		}
	}
	_, peak := d.memory(t)
	// A connection with its buffers and a request's answer under way: some 200 KiB at most.
	if bound := rss0 + conns*200<<10 + 32<<20; peak > bound {
		t.Fatalf("peak resident set %d MiB; want under %d MiB", peak>>20, bound>>20)
	}
	t.Logf("honest 16/16 answered; peak resident set %d MiB (from %d MiB)", peak>>20, rss0>>20)
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
