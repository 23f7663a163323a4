package abuse

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// What the cases of rows 1, 7, 8 and 9 (node records, listings and replays) share beyond
// harness_test.go.

// memory returns the daemon's resident set now and its peak so far, in bytes (Linux).
func (d *daemon) memory(t *testing.T) (rss, peak int64) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Pid()))
	if err != nil {
		t.Skipf("no /proc to read the daemon's memory from: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// steady is a well-behaved operator and node on their own source address, whose requests
// during an attack must succeed.
type steady struct {
	node  *client.Node
	login func(ctx context.Context) error
}

// newSteady registers a steady node and prepares an operator that can log in, both talking
// from 127.0.0.2.
func newSteady(t *testing.T, d *daemon) *steady {
	t.Helper()
	c := d.api("127.0.0.2")
	nk := nodeKey("steady")
	h := &steady{node: &client.Node{Client: c, Key: nk.priv, DID: nk.did}}
	if _, err := h.node.Register(t.Context(), "203.0.113.200:7000", []string{"inference"}, "eu-west"); err != nil {
		t.Fatalf("the steady node registers: %v", err)
	}
	root, device := testkit.TextKey("abuse root"), testkit.TextKey("abuse device")
	dc, err := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{IssuedAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	h.login = func(ctx context.Context) error {
		_, err := c.Login(ctx, device, dc)
		return err
	}
	return h
}

// send makes one request with a JSON body (nil for none), as an attacker sends it: '<' as
// itself, not as \u003c.
func (d *daemon) send(t testing.TB, c *http.Client, method, path string, body any) attack.Answer {
	a := d.target().Send(context.Background(), c, method, path, body, nil)
	if a.Status == 0 {
		t.Errorf("%s %s: %s", method, path, a.Code)
	}
	return a
}

// target is the daemon as the attack rows address it.
func (d *daemon) target() *attack.Target {
	if d.tg == nil {
		d.tg = attack.NewTarget(d.URL, "")
	}
	return d.tg
}

// nodes returns GET /nodes as records, and its size in bytes.
func (d *daemon) nodes(t testing.TB, query string) ([]api.NodeView, int) {
	t.Helper()
	a := d.send(t, http.DefaultClient, "GET", "/nodes"+query, nil)
	if a.Status != http.StatusOK {
		t.Fatalf("GET /nodes%s: %s", query, a)
	}
	var list struct {
		Count int            `json:"count"`
		Nodes []api.NodeView `json:"nodes"`
	}
	if err := json.Unmarshal(a.Body, &list); err != nil || list.Count != len(list.Nodes) {
		t.Fatalf("GET /nodes%s: %v, count %d for %d records", query, err, list.Count, len(list.Nodes))
	}
	return list.Nodes, len(a.Body)
}

// node returns the record of key as GET /nodes lists it.
func (d *daemon) node(t testing.TB, key didkey.PublicKey) api.NodeView {
	t.Helper()
	list, _ := d.nodes(t, "")
	for _, n := range list {
		if n.PublicKey == key.Hex() {
			return n
		}
	}
	t.Fatalf("node %s is not listed", key.Hex()[:8])
	return api.NodeView{}
}

// testNode is a node key with its short DID.
type testNode struct {
	priv ed25519.PrivateKey
	key  didkey.PublicKey
	did  string
}

// nodeKey derives a node key from label, so that every run uses the same keys.
func nodeKey(label string) testNode {
	priv := testkit.TextKey("abuse node " + label)
	k, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	d, _ := didkey.NodeDID(k, didkey.FormFallback) // 10 hex: no short-body collisions among thousands
	return testNode{priv: priv, key: k, did: d.String()}
}

func sign(t testing.TB, priv ed25519.PrivateKey, m canonical.Message) string {
	t.Helper()
	sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// registration is a signed v1 registration (message 3).
func (n testNode) registration(t testing.TB, endpoint string) api.RegisterRequest {
	req := api.RegisterRequest{DID: n.did, PublicKey: n.key.Hex(), Endpoint: endpoint, Capabilities: []string{"inference"}, Region: "eu-west"}
	sig := sign(t, n.priv, canonical.Register{DID: req.DID, PublicKey: n.key.Base58(), Endpoint: endpoint, Capabilities: req.Capabilities, Region: req.Region})
	req.Signature = &sig
	return req
}

// registrationV2 is a signed v2 registration (message 10) at ts.
func (n testNode) registrationV2(t testing.TB, endpoint string, ts int64) api.RegisterRequest {
	req := n.registration(t, endpoint)
	sig := sign(t, n.priv, canonical.RegisterV2{DID: req.DID, PublicKey: n.key.Base58(), Endpoint: endpoint, Capabilities: req.Capabilities, Region: req.Region, TS: ts})
	req.Signature, req.TS = &sig, &ts
	return req
}

func (n testNode) heartbeat(t testing.TB, ts int64) api.HeartbeatRequest {
	return api.HeartbeatRequest{DID: n.did, TS: ts, Signature: sign(t, n.priv, canonical.Heartbeat{DID: n.did, TS: ts})}
}

// latencies collects durations and reports percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// parallel runs fn(i) for i in [0, n) on workers goroutines.
func parallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// mib formats bytes as MiB for the figures the cases log.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// jsonHas reports whether the JSON object raw has field equal to the string want.
func jsonHas(raw []byte, field, want string) bool {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	return m[field] == want
}

func decode(raw []byte, v any) bool { return json.Unmarshal(raw, v) == nil }
