package abuse

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/limits"
)

// largestRecordBytes bounds one record as GET /nodes writes it: every stored string at its
// cap, every byte of it one that JSON escapes to six (see package registry/limits).
const largestRecordBytes = 32 << 10

// largest is a grace-mode registration with every field at its cap, each byte a '<' that
// JSON writes as \u003c.
func largest(n testNode, signature string) api.RegisterRequest {
	caps := make([]string, 64)
	for i := range caps {
		caps[i] = fmt.Sprintf("%02d", i) + strings.Repeat("<", 62)
	}
	endpoint := strings.Repeat("<", 250) + ":7000"
	return api.RegisterRequest{
		DID: n.did, PublicKey: n.key.Hex(), Endpoint: endpoint, Capabilities: caps,
		Region: strings.Repeat("<", 256), Signature: &signature,
	}
}

// Row 1: huge signatures are refused before grace mode, records are bounded, and many
// concurrent listings with distinct filters share one build: the daemon's memory grows by
// a bounded amount and an honest operator keeps logging in.
func TestRow1BoundedRecordsAndListings(t *testing.T) {
	d := start(t)
	h := newSteady(t, d)
	attacker := from(addr(0))

	// 300 registrations with a 63 KB signature, from one address: all refused, none stored.
	// The first ones are read and refused as malformed; once the address has sent its
	// budget of malformed requests, the rest are refused before their body is read.
	for i := range 300 {
		r := nodeKey(fmt.Sprint("huge ", i)).registration(t, "203.0.113.40:7000")
		r.Signature = &attack.HugeSignature
		a := d.send(t, attacker, "POST", "/api/v1/register", r)
		want, code := http.StatusBadRequest, "BAD_REQUEST"
		if i >= limits.DefaultLimits().MalformedAddressLimit {
			want, code = http.StatusTooManyRequests, "RATE_LIMITED"
		}
		if a.Status != want || a.Code != code {
			t.Fatalf("registration %d with a 63 KB signature: %s, want %d %s", i, a, want, code)
		}
	}
	// The address stays refused, whatever it sends, for the rest of the minute.
	if a := d.send(t, attacker, "POST", "/api/v1/register", nodeKey("huge, then honest").registration(t, "203.0.113.40:7000")); a.Status != http.StatusTooManyRequests {
		t.Fatalf("a valid registration from the address that sent malformed ones: %s, want 429", a)
	}
	attacker = from(addr(1))
	if list, size := d.nodes(t, ""); len(list) != 1 {
		t.Fatalf("after 300 refused registrations %d nodes are listed (%d bytes)", len(list), size)
	}

	// 300 of the largest records that are allowed: the listing stays within node count ×
	// the largest record.
	for i := range 300 {
		a := d.send(t, attacker, "POST", "/api/v1/register", largest(nodeKey(fmt.Sprint("large ", i)), strings.Repeat("<", 256)))
		if a.Status != http.StatusOK {
			t.Fatalf("registration %d of a largest record: %s", i, a)
		}
	}
	list, size := d.nodes(t, "")
	if len(list) != 301 || size > len(list)*largestRecordBytes {
		t.Fatalf("GET /nodes lists %d nodes in %d bytes; bound %d", len(list), size, len(list)*largestRecordBytes)
	}

	// Without an attack: the honest operator's login latency.
	var quiet latencies
	for range 30 {
		start := time.Now()
		if err := h.login(t.Context()); err != nil {
			t.Fatalf("honest login: %v", err)
		}
		quiet.add(time.Since(start))
	}

	// 16 readers from 16 addresses, each asking with its own online_within values, while the
	// honest operator logs in. The readers run in a process of their own, as an attacker
	// would, so that their work does not slow the honest client's process.
	rss0, _ := d.memory(t)
	readers := startReaders(t, d, 16, 4*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	var attacked latencies
	for ctx.Err() == nil {
		start := time.Now()
		if err := h.login(t.Context()); err != nil {
			t.Errorf("honest login during the listings: %v", err)
		}
		attacked.add(time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	listings, sent := readers.wait(t)
	_, peak := d.memory(t)
	t.Logf("GET /nodes over 301 largest records: %d bytes; %d listings with distinct filters (%s sent); daemon RSS %s before, peak %s; honest login p50/p99 %v/%v quiet, %v/%v under the listings",
		size, listings, mib(sent), mib(rss0), mib(peak), quiet.pct(0.5), quiet.pct(0.99), attacked.pct(0.5), attacked.pct(0.99))
	// Before listings shared one build, each distinct filter built its own copy of the
	// listing: 16 readers held 16 copies at once. Now they share one snapshot (about the
	// listing's size) and a 32 KiB buffer each.
	if growth := peak - rss0; growth > 64<<20 {
		t.Fatalf("the daemon's peak memory grew by %s under the listings, bound 64 MiB", mib(growth))
	}
}

// Row 9: signed registrations spread over many addresses, each under its per-address limit,
// stop at the global node cap with 429 RATE_LIMITED and change nothing; the refusals are
// logged once, not once each; known nodes keep re-registering and heartbeating.
func TestRow9GlobalNodeCap(t *testing.T) {
	const maxNodes, addresses, perAddress = 1000, 30, 50
	d := start(t, wholeCap("nodes", maxNodes)...)
	h := newSteady(t, d)

	var ok, limited atomic.Int32
	parallel(addresses*perAddress, 16, func(i int) {
		n := nodeKey(fmt.Sprint("cap ", i))
		a := d.send(t, from(addr(i%addresses)), "POST", "/api/v1/register", n.registration(t, "203.0.113.30:7000"))
		switch {
		case a.Status == http.StatusOK:
			ok.Add(1)
		case a.Status == http.StatusTooManyRequests && a.Code == "RATE_LIMITED":
			limited.Add(1)
		default:
			t.Errorf("registration %d: %s", i, a)
		}
	})
	if int(ok.Load()) != maxNodes-1 || int(limited.Load()) != addresses*perAddress-maxNodes+1 {
		t.Fatalf("%d registrations accepted and %d refused with 429; want %d and %d", ok.Load(), limited.Load(), maxNodes-1, addresses*perAddress-maxNodes+1)
	}
	var health struct{ Count int }
	if a := d.send(t, http.DefaultClient, "GET", "/health", nil); a.Status != http.StatusOK || !decode(a.Body, &health) || health.Count != maxNodes {
		t.Fatalf("/health: %s, want count %d", a, maxNodes)
	}
	// The honest node is known: it re-registers and heartbeats while the table is full.
	if _, err := h.node.Register(t.Context(), "203.0.113.201:7000", []string{"inference"}, "eu-west"); err != nil {
		t.Fatalf("a known node re-registers at the cap: %v", err)
	}
	if _, err := h.node.Heartbeat(t.Context()); err != nil {
		t.Fatalf("a known node heartbeats at the cap: %v", err)
	}
	if n := len(d.lines("level=WARN", "global cap reached", "cap=nodes")); n != 1 {
		t.Fatalf("%d refusals were logged in %d warn lines, want 1 per minute", limited.Load(), n)
	}
	rss, peak := d.memory(t)
	t.Logf("%d registrations from %d addresses: %d accepted, %d refused with 429; daemon RSS %s, peak %s", addresses*perAddress, addresses, ok.Load(), limited.Load(), mib(rss), mib(peak))
}

// The load tool spreads row 9's attack and the reference registrations of rows 1 and 9 by
// the default register budgets that package attack keeps a copy of: they are the daemon's.
func TestRow9AttackKnowsTheDefaultRegisterBudgets(t *testing.T) {
	def := limits.DefaultLimits()
	for _, c := range []struct {
		name           string
		attack, daemon int
	}{
		{"RegisterAddressLimit", attack.DefaultRegisterAddressLimit, def.RegisterAddressLimit},
		{"AddressBlockFactor", attack.DefaultAddressBlockFactor, def.AddressBlockFactor},
		{"MaxNodesPerBlock", attack.DefaultMaxNodesPerBlock, def.MaxNodesPerBlock},
	} {
		if c.attack != c.daemon {
			t.Errorf("package attack takes the default %s to be %d; it is %d", c.name, c.attack, c.daemon)
		}
	}
}
