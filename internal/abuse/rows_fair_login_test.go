package abuse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// signedLogin is o's login over challenge, signed by its device key.
func signedLogin(t *testing.T, o attack.Operator, challenge string) authn.Login {
	t.Helper()
	l := authn.Login{DeviceCredential: o.Credential, Challenge: challenge, IssuedAt: canonical.FormatTime(time.Now())}
	var err error
	l.Signature, err = canonical.Sign(o.Device, canonical.DefaultPrefix, canonical.Login{
		OperatorDID: o.Credential.OperatorDID, DevicePublicKey: o.Credential.DevicePublicKey, Challenge: challenge, IssuedAt: l.IssuedAt,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFairRow2LoginFailureTablesFull: more addresses than the login-failure tables track,
// each failing logins that name made-up operators, fill the tables; an honest operator's
// correct login from its own address is accepted throughout and after, because a key the
// tables do not track counts as fresh, not as a share of an overflow count. The tables'
// bound is lowered with --max-tracked-clients; the daemon's memory stays bounded.
func TestFairRow2LoginFailureTablesFull(t *testing.T) {
	const tracked, addrs, perAddr = 128, 500, 3
	d := start(t, "--max-tracked-clients", fmt.Sprint(tracked))
	honestOp := newOperator(t)
	if _, err := honestOp.Login(t.Context(), d.api("127.0.0.2")); err != nil {
		t.Fatalf("honest login before the attack: %v", err)
	}
	rssBefore := d.rssKiB()

	stopHonest := honest(t, "honest logins during the attack", 200*time.Millisecond, func() error {
		_, err := honestOp.Login(t.Context(), d.api("127.0.0.2"))
		return err
	})
	codes := flood(d, 0, addrs, perAddr, func(c *client.Client) proto.Code { return badLogin(t, c, newOperator(t)) })
	ran := stopHonest()
	if codes[proto.BadSignature] == 0 {
		t.Fatalf("the attack's logins: %v; want failures", codes)
	}
	if _, err := honestOp.Login(t.Context(), d.api("127.0.0.3")); err != nil {
		t.Fatalf("honest login from a fresh address after the attack: %v", err)
	}
	rssAfter := d.rssKiB()
	t.Logf("%d addresses × %d failed logins: %v; %d honest logins during it, all accepted; RSS %d → %d KiB",
		addrs, perAddr, codes, ran, rssBefore, rssAfter)
	if rssAfter-rssBefore > 64<<10 {
		t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
	}
}

// TestFairRow9FailuresNamingAVictim: 60 failed logins naming a victim operator's DID from
// three addresses, and one failure of the victim's own (a spent challenge), leave the
// victim's next correct login from its own address accepted. The addresses that failed are
// the ones refused for that DID.
func TestFairRow9FailuresNamingAVictim(t *testing.T) {
	d := start(t)
	victim := newOperator(t)
	codes := map[proto.Code]int{}
	for i := range 60 {
		codes[badLogin(t, d.api(addr(i%3)), victim)]++
	}
	if codes[proto.RateLimited] == 0 {
		t.Fatalf("60 failures naming one DID from 3 addresses: %v; want the senders refused at last", codes)
	}
	home := d.api("127.0.0.4")
	ch, err := home.Challenge(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := home.DeviceLogin(context.Background(), signedLogin(t, victim, ch.Challenge)); err != nil {
		t.Fatalf("the victim's login: %v", err)
	}
	if _, err := home.DeviceLogin(context.Background(), signedLogin(t, victim, ch.Challenge)); client.CodeOf(err) != proto.BadChallenge {
		t.Fatalf("the victim's spent challenge: %v; want BAD_CHALLENGE", err)
	}
	if _, err := victim.Login(t.Context(), home); err != nil {
		t.Fatalf("the victim's correct login after strangers' failures naming it: %v", err)
	}
	if _, err := victim.Login(t.Context(), d.api(addr(0))); client.CodeOf(err) != proto.RateLimited {
		t.Fatalf("a login naming the victim from an address that spent the budget: %v; want RATE_LIMITED", err)
	}
	t.Logf("strangers' attempts: %v; the victim logged in from its own address", codes)
}
