package abuse

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/client"
)

// resolveNamed sends a resolve of code naming the node did, from ip, and returns its code.
func resolveNamed(d *daemon, ip, token, code, did string) string {
	_, c := d.post(from(ip), "/v1/bindings/resolve", map[string]string{"short_code": code, "node_did": did},
		http.Header{"Authorization": {"Bearer " + token}})
	return c
}

// TestFairRow3ResolveGlobalBudget: self-made operators, each on an address of its own, fail
// resolves until the global failed-resolve budget is spent (shortened: the cap lowered with
// --resolve-global-limit, the attack scaled to it). Resolves without node_did are then
// refused for everyone, as before; but an honest operator's resolve of the right code naming
// its node succeeds while the attack goes on, and so does one after strangers exhausted that
// node's own budget. The daemon's memory stays bounded.
func TestFairRow3ResolveGlobalBudget(t *testing.T) {
	const global, perAddr, attackers = 300, 30, 12 // 12 × 30 failures spend a budget of 300
	d := start(t, "--resolve-global-limit", fmt.Sprint(global))
	ctx := context.Background()
	rssBefore := d.rssKiB()

	node := newNode(t, d.api("127.0.0.2"))
	honest, err := newOperator(t).Login(t.Context(), d.api("127.0.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, attackers)
	for i := range tokens {
		o, err := newOperator(t).Login(t.Context(), d.api(addr(i)))
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = o.Token
	}

	// The attack: each operator fails perAddr resolves from its own address, all at once,
	// and keeps sending until the test ends. An attacker whose connection the daemon cut
	// sends again: only the answers count.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	spent := make(chan struct{}, attackers)
	target := d.target()
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := from(addr(i))
			for g, answered := 0, 0; ; g++ {
				a := target.Resolve(context.Background(), hc, tokens[i], wrongCode(i*10_000+g), nil)
				c := a.Code
				if a.Status == 0 {
					c = "connection cut"
				} else {
					answered++
				}
				mu.Lock()
				seen[c]++
				mu.Unlock()
				if a.Status != 0 && answered == perAddr {
					spent <- struct{}{}
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	for range attackers {
		<-spent
	}
	mu.Lock()
	failures := seen["NOT_FOUND"]
	mu.Unlock()
	if failures < global {
		t.Fatalf("the attack failed %d resolves; the global budget is %d", failures, global)
	}

	// The global budget is spent: a resolve without node_did is refused, a real code
	// included — the rule of §5.4, unchanged.
	first, err := node.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := resolveAs(d, "127.0.0.3", honest.Token, first.ShortCode, nil); c != "RATE_LIMITED" {
		t.Fatalf("a resolve without node_did past the global budget: %s; want RATE_LIMITED", c)
	}
	// Naming its node, the honest operator resolves it, the attack still running.
	if v, err := honest.ResolveNode(ctx, node.DID, first.ShortCode); err != nil || v.BindingSessionID != first.BindingSessionID {
		t.Fatalf("honest resolve naming the node during the attack: %+v, %v", v, err)
	}

	// Strangers fail naming the honest node from addresses of their own: past the node's
	// budget they are refused, and the operator from a clean address still resolves.
	second, err := node.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]int{}
	for i := range 8 {
		ip := addr(100 + i)
		o, err := newOperator(t).Login(t.Context(), d.api(ip))
		if err != nil {
			t.Fatal(err)
		}
		for g := range 3 {
			named[resolveNamed(d, ip, o.Token, wrongCode(500_000+i*10+g), node.DID)]++
		}
	}
	// Five failures spend the node's budget; after it each fresh address gets one try.
	if named["NOT_FOUND"] != 5+(8-2) || named["RATE_LIMITED"] != 24-named["NOT_FOUND"] {
		t.Fatalf("strangers naming the node from 8 addresses, 3 each: %v; want the node's 5, then one per fresh address", named)
	}
	if v, err := honest.ResolveNode(ctx, node.DID, second.ShortCode); err != nil || v.BindingSessionID != second.BindingSessionID {
		t.Fatalf("honest resolve after strangers spent the node's budget: %+v, %v", v, err)
	}

	if grown := d.rssKiB() - rssBefore; grown > 64<<10 {
		t.Fatalf("the daemon's memory grew by %d KiB during the attack", grown)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("attack answers %v; strangers naming the node %v; RSS %d KiB", seen, named, d.rssKiB())
}
