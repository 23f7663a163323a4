package abuse

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// sessionFlood sends fn from addrs attacker addresses (250 to an address block), perAddr
// times each, from 8 goroutines, and counts the answers by code.
func sessionFlood(addrs, perAddr int, fn func(c *client.Client) error, d *daemon) map[proto.Code]int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[proto.Code]int{}
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				c := d.api(addr(a))
				for range perAddr {
					code := client.CodeOf(fn(c))
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			}
		}()
	}
	for a := range addrs {
		work <- a
	}
	close(work)
	wg.Wait()
	return codes
}

// sessionAlive reports whether o's bearer session is still one: cancelling a session that
// does not exist is NOT_FOUND with a live session, NO_SESSION without one.
func sessionAlive(t *testing.T, o *client.Operator) bool {
	t.Helper()
	_, err := o.Cancel(context.Background(), "no-such-session")
	switch client.CodeOf(err) {
	case proto.NotFound:
		return true
	case proto.NoSession:
		return false
	}
	t.Fatalf("cancel of an unknown session: %v", err)
	return false
}

// TestFairRow4BearerSessionsFull: logins of made-up operators from 1,500 addresses in six
// address blocks fill the bearer-session cap (lowered with --max-bearer-sessions) and keep
// logging in; an honest operator's login from a block of its own is accepted throughout and
// after, because a full table makes room by displacing a session of the block holding the
// most, and the session the honest operator held before the attack is never displaced. One
// block alone stops at its quota (--max-bearer-sessions-per-block). Memory stays bounded.
func TestFairRow4BearerSessionsFull(t *testing.T) {
	const capSessions, perBlock, addrs = 300, 120, 1500
	d := start(t, "--max-bearer-sessions", fmt.Sprint(capSessions), "--max-bearer-sessions-per-block", fmt.Sprint(perBlock))
	honestOp := newOperator(t)
	held, err := honestOp.login(t, d.api("127.0.0.2"))
	if err != nil {
		t.Fatalf("honest login before the attack: %v", err)
	}
	rssBefore := d.rssKiB()

	stop := make(chan struct{})
	result := honest(100*time.Millisecond, stop, func() error {
		_, err := honestOp.login(t, d.api("127.0.0.3"))
		return err
	})
	codes := sessionFlood(addrs, 1, func(c *client.Client) error {
		_, err := newOperator(t).login(t, c)
		return err
	}, d)
	// The six blocks at their quota hold 720 sessions' worth, over the cap: the table is
	// full, and a block's logins beyond its quota are refused.
	close(stop)
	failed, ran, first := result()
	if codes[""] <= capSessions || codes[proto.RateLimited] == 0 {
		t.Fatalf("the attack's logins: %v; want more accepted than the cap %d (displacing), and some refused", codes, capSessions)
	}
	if failed > 0 {
		t.Fatalf("%d of %d honest logins during the attack failed: %v", failed, ran, first)
	}
	if _, err := honestOp.login(t, d.api("127.0.0.4")); err != nil {
		t.Fatalf("honest login after the attack: %v", err)
	}
	if !sessionAlive(t, held) {
		t.Fatal("the honest operator's session from before the attack was displaced")
	}
	// One block: its quota, then 429 for that block only.
	one := d.api(addr(0))
	if _, err := newOperator(t).login(t, one); client.CodeOf(err) != proto.RateLimited {
		t.Fatalf("a login from a block at its quota: %v; want RATE_LIMITED", err)
	}
	rssAfter := d.rssKiB()
	t.Logf("%d addresses in %d blocks logging in: %v; %d honest logins during it, all accepted; RSS %d → %d KiB",
		addrs, (addrs+249)/250, codes, ran, rssBefore, rssAfter)
	if rssAfter-rssBefore > 64<<10 {
		t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
	}
}

// TestFairRow5BindingSessionsFull: initiates of fresh node keys from 1,500 addresses in six
// address blocks fill the open binding-session cap (lowered with --max-binding-sessions) and
// keep initiating; an honest node's initiate from a block of its own is accepted throughout
// and after, because a full table displaces an open session of the block holding the most.
// One block alone stops at its quota (--max-binding-sessions-per-block). Memory and disk stay
// bounded.
func TestFairRow5BindingSessionsFull(t *testing.T) {
	const capSessions, perBlock, addrs = 200, 80, 1500
	d := start(t, "--max-binding-sessions", fmt.Sprint(capSessions), "--max-binding-sessions-per-block", fmt.Sprint(perBlock))
	ctx := context.Background()
	good := newNode(t, d.api("127.0.0.2"))
	rssBefore := d.rssKiB()

	stop := make(chan struct{})
	result := honest(100*time.Millisecond, stop, func() error {
		s, err := good.Initiate(ctx, client.InitiateOptions{})
		if err != nil {
			return err
		}
		_, err = good.Cancel(ctx, s.BindingSessionID)
		return err
	})
	codes := sessionFlood(addrs, 1, func(c *client.Client) error {
		return attack.Initiate(ctx, c, "")
	}, d)
	close(stop)
	failed, ran, first := result()
	if codes[""] <= capSessions || codes[proto.RateLimited] == 0 {
		t.Fatalf("the attack's initiates: %v; want more accepted than the cap %d (displacing), and some refused", codes, capSessions)
	}
	if failed > 0 {
		t.Fatalf("%d of %d honest initiates during the attack failed: %v", failed, ran, first)
	}
	s, err := good.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatalf("honest initiate after the attack: %v", err)
	}
	if st, err := d.api("127.0.0.2").Status(ctx, s.BindingSessionID); err != nil || st.State != "INITIATED" {
		t.Fatalf("the honest session after the attack: %+v, %v", st, err)
	}
	if err := attack.Initiate(ctx, d.api(addr(0)), ""); client.CodeOf(err) != proto.RateLimited {
		t.Fatalf("an initiate from a block at its quota: %v; want RATE_LIMITED", err)
	}
	rssAfter := d.rssKiB()
	t.Logf("%d addresses in %d blocks initiating: %v; %d honest initiates during it, all accepted; RSS %d → %d KiB, data %d KiB",
		addrs, (addrs+249)/250, codes, ran, rssBefore, rssAfter, d.diskBytes()>>10)
	if rssAfter-rssBefore > 64<<10 {
		t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
	}
	if n := d.diskBytes(); n > 64<<20 {
		t.Fatalf("data directory %d bytes after the flood", n)
	}
}
