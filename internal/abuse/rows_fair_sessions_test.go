package abuse

import (
	"context"
	"errors"
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

// codeOf is fn answering with the code of its error; a RATE_LIMITED answer without a
// Retry-After is told apart, since every refusal for want of a place says when to come back.
func codeOf(fn func(c *client.Client) error) func(c *client.Client) proto.Code {
	return func(c *client.Client) proto.Code {
		err := fn(c)
		code := client.CodeOf(err)
		if code == proto.RateLimited && retryAfter(err) <= 0 {
			return code + " without Retry-After"
		}
		return code
	}
}

// retryAfter is the Retry-After of the answer err is, 0 when it has none.
func retryAfter(err error) time.Duration {
	var e *client.Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// fairQuotas are the quotas of the table a fairFlood fills, as flags of svrpd serve: what
// one address block and one network (an IPv4 /24 and /16) may hold. The per-client quota
// keeps its default, which one attacker address never reaches.
type fairQuotas struct{ perBlock, perNetwork int }

// flags are q as svrpd serve's flags for the table named table ("nodes",
// "bearer-sessions", "binding-sessions").
func (q fairQuotas) flags(table string) []string {
	return []string{fmt.Sprintf("--max-%s-per-block", table), fmt.Sprint(q.perBlock), fmt.Sprintf("--max-%s-per-network", table), fmt.Sprint(q.perNetwork)}
}

// fairFlood sends a table-filling attack fn from the attacker addresses, all of one /16, in
// two phases and returns the second's answers. First the 250 addresses of one address
// block, once each: exactly the block's quota is accepted, the rest refused. Then addrs
// addresses in addrs/250 blocks of the same network, once each: the network's quota is
// what they hold together, so exactly what the first block left of it is accepted, and the
// rest refused. Every entry accepted is in use, so none is displaced: each refusal is a 429
// with a Retry-After.
func fairFlood(t *testing.T, d *daemon, q fairQuotas, addrs int, fn func(c *client.Client) error) map[proto.Code]int {
	t.Helper()
	if one := flood(d, 0, 250, 1, codeOf(fn)); one[""] != q.perBlock || one[proto.RateLimited] != 250-q.perBlock {
		t.Fatalf("one block, 250 addresses: %v; want its quota %d accepted, the rest RATE_LIMITED with a Retry-After", one, q.perBlock)
	}
	codes := flood(d, 0, addrs, 1, codeOf(fn))
	if want := q.perNetwork - q.perBlock; codes[""] != want || codes[proto.RateLimited] != addrs-want {
		t.Fatalf("%d addresses of one network: %v; want %d accepted (the network's quota %d less the first block's), the rest RATE_LIMITED with a Retry-After",
			addrs, codes, want, q.perNetwork)
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
// address blocks of one network keep logging in against a lowered bearer-session table; one
// block alone stops at its quota, and the six together at the network's, never at the table's
// cap. An honest operator's logins from another network are accepted throughout and after,
// and the session it held before the attack, in use, is never ended for a newcomer. Memory
// stays bounded.
func TestFairRow4BearerSessionsFull(t *testing.T) {
	const capSessions, addrs = 300, 1500
	q := fairQuotas{perBlock: 120, perNetwork: 200}
	d := start(t, append([]string{"--max-bearer-sessions", fmt.Sprint(capSessions)}, q.flags("bearer-sessions")...)...)
	honestOp := newOperator(t)
	held, err := honestOp.Login(t.Context(), d.honest("127.0.0.2"))
	if err != nil {
		t.Fatalf("honest login before the attack: %v", err)
	}
	rssBefore := d.rssKiB()

	// The honest client logs out of each session it is done with, as a tidy client does.
	stopHonest := honest(t, "honest logins during the attack", 100*time.Millisecond, func() error {
		o, err := honestOp.Login(t.Context(), d.honest("127.0.0.3"))
		if err != nil {
			return err
		}
		_, err = o.Logout(t.Context())
		return err
	})
	codes := fairFlood(t, d, q, addrs, func(c *client.Client) error {
		_, err := newOperator(t).Login(t.Context(), c)
		return err
	})
	ran := stopHonest()
	if _, err := honestOp.Login(t.Context(), d.honest("127.0.0.4")); err != nil {
		t.Fatalf("honest login after the attack: %v", err)
	}
	if _, err := newOperator(t).Login(t.Context(), d.honest("127.0.0.5")); err != nil {
		t.Fatalf("a new honest operator's login after the attack: %v", err)
	}
	if !sessionAlive(t, held) {
		t.Fatal("the honest operator's session from before the attack was ended")
	}
	t.Logf("%d addresses in %d blocks of one network logging in: %v; %d honest logins during it, all accepted", addrs, (addrs+249)/250, codes, ran)
	d.bounded(rssBefore)
}

// TestFairRow5BindingSessionsFull: initiates of fresh node keys from 1,500 addresses in six
// address blocks of one network keep initiating against a lowered open binding-session
// table; one block alone stops at its quota, and the six together at the network's. Every
// open session is in use, so none is displaced: an honest node's initiates from another
// network are accepted throughout and after, and the session it opened before the attack
// stays open. Memory and disk stay bounded.
func TestFairRow5BindingSessionsFull(t *testing.T) {
	const capSessions, addrs = 200, 1500
	q := fairQuotas{perBlock: 80, perNetwork: 150}
	// The honest node initiates every 100 ms for as long as the attack lasts, which a loaded
	// machine stretches: its key's own initiate budget is out of the way, since the row is
	// about the table's quotas.
	d := start(t, append([]string{"--max-binding-sessions", fmt.Sprint(capSessions), "--initiate-key-limit", "1000000"}, q.flags("binding-sessions")...)...)
	ctx := context.Background()
	good := newNode(t, d.honest("127.0.0.2"))
	before, err := good.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatalf("honest initiate before the attack: %v", err)
	}
	rssBefore := d.rssKiB()

	stopHonest := honest(t, "honest initiates during the attack", 100*time.Millisecond, func() error {
		s, err := good.Initiate(ctx, client.InitiateOptions{})
		if err != nil {
			return err
		}
		_, err = good.Cancel(ctx, s.BindingSessionID)
		return err
	})
	codes := fairFlood(t, d, q, addrs, func(c *client.Client) error {
		return attack.Initiate(ctx, c, "")
	})
	ran := stopHonest()
	s, err := good.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatalf("honest initiate after the attack: %v", err)
	}
	for _, id := range []string{before.BindingSessionID, s.BindingSessionID} {
		if st, err := d.honest("127.0.0.2").Status(ctx, id); err != nil || st.State != "INITIATED" {
			t.Fatalf("an honest session after the attack: %+v, %v", st, err)
		}
	}
	t.Logf("%d addresses in %d blocks of one network initiating: %v; %d honest initiates during it, all accepted", addrs, (addrs+249)/250, codes, ran)
	d.bounded(rssBefore)
}
