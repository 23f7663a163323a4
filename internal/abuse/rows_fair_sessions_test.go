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

// flood has the attacker addresses from, from+1, … (250 to an address block; addrs of them)
// each call fn perAddr times, from 8 goroutines, and counts the answers by code.
func flood(d *daemon, from, addrs, perAddr int, fn func(c *client.Client) proto.Code) map[proto.Code]int {
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
					code := fn(c)
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			}
		}()
	}
	for a := from; a < from+addrs; a++ {
		work <- a
	}
	close(work)
	wg.Wait()
	return codes
}

// codeOf is fn answering with the code of its error.
func codeOf(fn func(c *client.Client) error) func(c *client.Client) proto.Code {
	return func(c *client.Client) proto.Code { return client.CodeOf(fn(c)) }
}

// fairFlood sends a table-filling attack fn in two phases and returns the second's answers.
// First the 250 addresses of one address block, once each: exactly perBlock are accepted
// (the block's quota) and the rest refused. Then addrs addresses in addrs/250 blocks, once
// each: more than capacity are accepted, since a full table makes room by displacing an
// entry of the block holding the most, and some are refused.
func fairFlood(t *testing.T, d *daemon, perBlock, capacity, addrs int, fn func(c *client.Client) error) map[proto.Code]int {
	t.Helper()
	if one := flood(d, 0, 250, 1, codeOf(fn)); one[""] != perBlock || one[proto.RateLimited] != 250-perBlock {
		t.Fatalf("one block, 250 addresses: %v; want its quota %d accepted, the rest RATE_LIMITED", one, perBlock)
	}
	codes := flood(d, 0, addrs, 1, codeOf(fn))
	if codes[""] <= capacity || codes[proto.RateLimited] == 0 {
		t.Fatalf("%d addresses: %v; want more accepted than the cap %d (displacing), and some refused", addrs, codes, capacity)
	}
	return codes
}

// bounded fails when the daemon's RSS grew by more than 128 MiB since before, or its data
// directory passed 64 MiB, and logs both. The tables of these floods hold a few hundred
// entries; what grows is the connections of the 1,750 clients, which the connection caps
// bound.
func (d *daemon) bounded(before int) {
	d.t.Helper()
	after, disk := d.rssKiB(), d.diskBytes()
	d.t.Logf("RSS %d → %d KiB, data directory %d KiB", before, after, disk>>10)
	if after-before > 128<<10 {
		d.t.Fatalf("RSS grew by %d KiB", after-before)
	}
	if disk > 64<<20 {
		d.t.Fatalf("data directory %d bytes after the flood", disk)
	}
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
// block alone, first, stops at its quota (--max-bearer-sessions-per-block). Memory stays
// bounded.
func TestFairRow4BearerSessionsFull(t *testing.T) {
	const capSessions, perBlock, addrs = 300, 120, 1500
	d := start(t, "--max-bearer-sessions", fmt.Sprint(capSessions), "--max-bearer-sessions-per-block", fmt.Sprint(perBlock))
	honestOp := newOperator(t)
	held, err := honestOp.Login(t.Context(), d.api("127.0.0.2"))
	if err != nil {
		t.Fatalf("honest login before the attack: %v", err)
	}
	rssBefore := d.rssKiB()

	// The honest client logs out of each session it is done with: the sessions it kept would
	// count against its own block, and a full table refuses the block holding the most, which
	// a client logging in ten times a second and keeping every session soon is.
	stopHonest := honest(t, "honest logins during the attack", 100*time.Millisecond, func() error {
		o, err := honestOp.Login(t.Context(), d.api("127.0.0.3"))
		if err != nil {
			return err
		}
		_, err = o.Logout(t.Context())
		return err
	})
	// The six blocks at their quota would hold 720 sessions, over the cap: the table fills.
	codes := fairFlood(t, d, perBlock, capSessions, addrs, func(c *client.Client) error {
		_, err := newOperator(t).Login(t.Context(), c)
		return err
	})
	ran := stopHonest()
	if _, err := honestOp.Login(t.Context(), d.api("127.0.0.4")); err != nil {
		t.Fatalf("honest login after the attack: %v", err)
	}
	if !sessionAlive(t, held) {
		t.Fatal("the honest operator's session from before the attack was displaced")
	}
	t.Logf("%d addresses in %d blocks logging in: %v; %d honest logins during it, all accepted", addrs, (addrs+249)/250, codes, ran)
	d.bounded(rssBefore)
}

// TestFairRow5BindingSessionsFull: initiates of fresh node keys from 1,500 addresses in six
// address blocks fill the open binding-session cap (lowered with --max-binding-sessions) and
// keep initiating; an honest node's initiate from a block of its own is accepted throughout
// and after, because a full table displaces an open session of the block holding the most.
// One block alone, first, stops at its quota (--max-binding-sessions-per-block). Memory and
// disk stay bounded.
func TestFairRow5BindingSessionsFull(t *testing.T) {
	const capSessions, perBlock, addrs = 200, 80, 1500
	// The honest node initiates every 100 ms for as long as the attack lasts, which a loaded
	// machine stretches: its key's own initiate budget is out of the way, since the row is
	// about the table's cap.
	d := start(t, "--max-binding-sessions", fmt.Sprint(capSessions), "--max-binding-sessions-per-block", fmt.Sprint(perBlock),
		"--initiate-key-limit", "1000000")
	ctx := context.Background()
	good := newNode(t, d.api("127.0.0.2"))
	rssBefore := d.rssKiB()

	stopHonest := honest(t, "honest initiates during the attack", 100*time.Millisecond, func() error {
		s, err := good.Initiate(ctx, client.InitiateOptions{})
		if err != nil {
			return err
		}
		_, err = good.Cancel(ctx, s.BindingSessionID)
		return err
	})
	codes := fairFlood(t, d, perBlock, capSessions, addrs, func(c *client.Client) error {
		return attack.Initiate(ctx, c, "")
	})
	ran := stopHonest()
	s, err := good.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatalf("honest initiate after the attack: %v", err)
	}
	if st, err := d.api("127.0.0.2").Status(ctx, s.BindingSessionID); err != nil || st.State != "INITIATED" {
		t.Fatalf("the honest session after the attack: %+v, %v", st, err)
	}
	t.Logf("%d addresses in %d blocks initiating: %v; %d honest initiates during it, all accepted", addrs, (addrs+249)/250, codes, ran)
	d.bounded(rssBefore)
}
