package abuse

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// strangerRevocations has each of addrs addresses send perAddr revocations signed by root
// keys of their own, which never log in, and counts the answers by code.
func strangerRevocations(t *testing.T, d *daemon, first, addrs, perAddr int) map[proto.Code]int {
	t.Helper()
	return flood(d, first, addrs, perAddr, func(c *client.Client) proto.Code {
		r, err := client.NewRevocation(testkit.RandomKey(), "", "rev-made-up", time.Time{}, nil)
		if err != nil {
			t.Error(err)
			return ""
		}
		_, err = c.Revoke(context.Background(), r)
		return client.CodeOf(err)
	})
}

// TestFairRow7RevocationListFull: strangers on many addresses fill the revocation list
// (lowered with --max-revocations) with revocations under root keys of their own. An
// operator who has logged in revokes its stolen credential while they keep at it: the
// revocation is recorded, the thief's session ends and its next login is DC_REVOKED. The
// daemon's memory stays bounded. Once a sweep has found the oldest unproven revocations, a
// newcomer takes the place of one.
//
// No sweep runs until the flood is over: a sweep on a full list finds the places newcomers
// take, so one that fell inside a flood slowed by a busy machine would let every stranger
// in. The daemon runs again with sweeps for the last step.
func TestFairRow7RevocationListFull(t *testing.T) {
	const listSize, addrs, perAddr = 300, 400, 2
	// The strangers send from one /16: its quota is lifted to the list's, so that they fill
	// the list as many networks would.
	flags := []string{"--max-revocations", fmt.Sprint(listSize), "--revocations-per-network", fmt.Sprint(listSize)}
	d := start(t, append(flags, "--sweep-every", "24h")...)
	ctx := context.Background()
	honestOp := newOperator(t)
	home := d.api("127.0.0.2")
	if _, err := honestOp.Login(t.Context(), home); err != nil {
		t.Fatal(err)
	}
	device := testkit.RandomKey()
	stolenCred, err := client.IssueDeviceCredential(honestOp.Root, device.Public().(ed25519.PublicKey), client.CredentialOptions{IssuedAt: time.Now().Add(-time.Minute), RevocationID: "rev-stolen"})
	if err != nil {
		t.Fatal(err)
	}
	stolen := attack.Operator{Root: honestOp.Root, Device: device, Credential: stolenCred}
	thief := d.api("127.3.0.1")
	thiefSession, err := stolen.Login(t.Context(), thief)
	if err != nil {
		t.Fatal(err)
	}
	rssBefore := d.rssKiB()

	filled := strangerRevocations(t, d, 0, addrs, perAddr)
	if filled[""] != listSize || filled[proto.RateLimited] != addrs*perAddr-listSize {
		t.Fatalf("strangers' revocations: %v; want the list full at %d and the rest refused", filled, listSize)
	}
	var wave map[proto.Code]int
	done := make(chan struct{})
	go func() {
		defer close(done)
		wave = strangerRevocations(t, d, addrs, addrs, perAddr)
	}()
	res, err := home.Revoke(ctx, revocationOf(t, stolen, "rev-stolen"))
	<-done
	if err != nil {
		t.Fatalf("the operator's revocation of its stolen credential on a full list: %v", err)
	}
	if wave[""] != 0 {
		t.Errorf("strangers' revocations on the full list before any sweep: %v; want all refused", wave)
	}
	if res.EndedSessions != 1 {
		t.Errorf("the revocation ended %d sessions, want the thief's", res.EndedSessions)
	}
	if _, err := thiefSession.Nodes(ctx, 0); client.CodeOf(err) != proto.NoSession {
		t.Errorf("the thief's session after the revocation: %v; want NO_SESSION", err)
	}
	if _, err := stolen.Login(t.Context(), thief); client.CodeOf(err) != proto.DCRevoked {
		t.Fatalf("the thief's login after the revocation: %v; want DC_REVOKED", err)
	}
	if _, err := honestOp.Login(t.Context(), home); err != nil {
		t.Fatalf("the operator's own device after the revocation: %v", err)
	}
	rssAfter := d.rssKiB()
	t.Logf("strangers: %v, then %v during the operator's revocation; RSS %d → %d KiB", filled, wave, rssBefore, rssAfter)
	if rssAfter-rssBefore > 64<<10 {
		t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
	}

	// A newcomer takes the place of the list's oldest unproven revocation, once a sweep has
	// found it: newcomers, each on an address of its own, try until the sweep has run. A
	// refused one changes nothing.
	d = d.restart(append(flags, "--sweep-every", "1s")...)
	for i, deadline := 0, time.Now().Add(testkit.WaitBound); ; i++ {
		newcomer := strangerRevocations(t, d, 5*250+i, 1, 1)
		if newcomer[""] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("a stranger from a new block on the full list, %v after the flood: %v; want it recorded", testkit.WaitBound, newcomer)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}
