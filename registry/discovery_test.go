package registry_test

import (
	"bytes"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
)

func TestHealth(t *testing.T) {
	h := newHarness(t)
	status, raw := h.do("GET", "/health", nil, "")
	if status != http.StatusOK || string(raw) != `{"status":"ok","service":"svrpd","count":0,"store":"ok"}`+"\n" {
		t.Fatalf("empty registry: %d %s", status, raw)
	}
	h.ok("POST", "/api/v1/register", newNode(t, "a").registration(t, "203.0.113.7:7000"), "", nil)
	h.ok("POST", "/api/v1/register", newNode(t, "b").registration(t, "203.0.113.8:7000"), "", nil)
	// A re-registration is the same node, not a new one.
	h.ok("POST", "/api/v1/register", newNode(t, "a").registration(t, "203.0.113.9:7000"), "", nil)
	status, raw = h.do("GET", "/health", nil, "")
	if status != http.StatusOK || string(raw) != `{"status":"ok","service":"svrpd","count":2,"store":"ok"}`+"\n" {
		t.Fatalf("two nodes: %d %s", status, raw)
	}
}

// TestHealthStoreFault removes the store's directory under the registry: /health still
// answers 200 with its count, turns status to degraded and names the fault in store, reads
// keep working, and writes answer 503 STORE_UNAVAILABLE.
func TestHealthStoreFault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the disk is watched on Linux only")
	}
	h := newHarness(t)
	h.ok("POST", "/api/v1/register", newNode(t, "a").registration(t, "203.0.113.7:7000"), "", nil)
	if err := os.RemoveAll(h.dir); err != nil {
		t.Fatal(err)
	}
	status, raw := h.do("POST", "/api/v1/register", newNode(t, "b").registration(t, "203.0.113.8:7000"), "")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(raw), `"code":"STORE_UNAVAILABLE"`) {
		t.Errorf("register with the directory gone: %d %s", status, raw)
	}
	status, raw = h.do("GET", "/health", nil, "")
	if status != http.StatusOK || string(raw) != `{"status":"degraded","service":"svrpd","count":1,"store":"gone"}`+"\n" {
		t.Errorf("health with the directory gone: %d %s", status, raw)
	}
	if status, raw = h.do("GET", "/nodes", nil, ""); status != http.StatusOK {
		t.Errorf("GET /nodes with the directory gone: %d %s", status, raw)
	}
}

func TestReachability(t *testing.T) {
	tests := []struct {
		endpoint, want string
	}{
		{"203.0.113.7:7000", "public"},
		{"8.8.8.8:53", "public"},
		{"100.63.255.255:1", "public"},
		{"100.128.0.1:80", "public"},
		{"172.32.0.1:80", "public"},
		{"11.0.0.1:65535", "public"},
		{"[2001:db8::1]:443", "public"},
		{"node.example.org:7000", "public"},
		{"http://node.example.org", "public"},
		{"https://203.0.113.7:8443/api", "public"},
		{"0.0.0.0:80", "private"},
		{"10.1.2.3:7000", "private"},
		{"100.64.0.1:7000", "private"},
		{"100.127.255.255:7000", "private"},
		{"127.0.0.1:7000", "private"},
		{"169.254.10.10:7000", "private"},
		{"172.16.0.1:7000", "private"},
		{"172.31.255.255:7000", "private"},
		{"192.168.1.20:7000", "private"},
		{"[::]:7000", "private"},
		{"[::1]:7000", "private"},
		{"[fc00::1]:7000", "private"},
		{"[fd12:3456::1]:7000", "private"},
		{"[fe80::1]:7000", "private"},
		{"[::ffff:10.0.0.1]:7000", "private"},
		// A zone does not make a link-local address routable.
		{"[fe80::1%eth0]:7000", "private"},
		{"http://[fe80::1%25eth0]:7000/", "private"},
		{"localhost:7000", "private"},
		{"LocalHost:7000", "private"},
		{"mynode:7000", "private"},
		{"http://localhost:8080", "private"},
		{"http://10.0.0.5", "private"},
		{"https://gpu-box/", "private"},
		{"224.0.0.1:7000", "unroutable"},
		{"239.255.255.250:1900", "unroutable"},
		{"[ff02::1]:7000", "unroutable"},
		{"http://224.0.0.1:80", "unroutable"},
		{"node://name", "unroutable"},
		{"node.example.org", "unroutable"},
		{"203.0.113.7", "unroutable"},
		{"203.0.113.7:0", "unroutable"},
		{"203.0.113.7:65536", "unroutable"},
		{"203.0.113.7:-1", "unroutable"},
		{"203.0.113.7:+80", "unroutable"},
		{"203.0.113.7:http", "unroutable"},
		{":7000", "unroutable"},
		{"::1:7000", "unroutable"},
		{"[not-an-ip]:7000", "unroutable"},
		{"user@host.example:7000", "unroutable"},
		{"ftp://host.example:21", "unroutable"},
		{"http://", "unroutable"},
		{"", "unroutable"},
	}
	for _, tt := range tests {
		if got := api.Reachability(tt.endpoint); got != tt.want {
			t.Errorf("Reachability(%q) = %s, want %s", tt.endpoint, got, tt.want)
		}
	}
}

// listing is a registry holding four nodes with known first_seen, last_seen, capabilities,
// regions, reachability and signatures.
type listing struct {
	h                        *harness
	gpu, lan, unsigned, twin node
	t0, t1, t2, now          time.Time
	gpuSig, twinSig, lanSig  string
}

func newListing(t *testing.T) *listing {
	h := newHarness(t)
	l := &listing{h: h, gpu: newNode(t, "gpu"), lan: newNode(t, "lan"), unsigned: newNode(t, "unsigned"), twin: newNode(t, "twin")}
	l.t0 = h.now()
	// register signs r as it stands, registers it and returns the signature.
	register := func(n node, r api.RegisterRequest) string {
		r.Signature = signedReg(t, n, r)
		h.ok("POST", "/api/v1/register", r, "", nil)
		return *r.Signature
	}

	gpu := l.gpu.registration(t, "203.0.113.7:7000")
	gpu.Capabilities = []string{"inference", "health:ready"}
	l.gpuSig = register(l.gpu, gpu)

	// twin registers in the same second as gpu: the key decides their order.
	l.twinSig = register(l.twin, api.RegisterRequest{DID: l.twin.did, PublicKey: l.twin.key.Base58(), Endpoint: "twin.example.org:443"})

	h.clock.Advance(time.Minute)
	l.t1 = h.now()
	lan := l.lan.registration(t, "192.168.1.20:7000")
	lan.Region = "us-east"
	l.lanSig = register(l.lan, lan)

	h.clock.Advance(time.Minute)
	l.t2 = h.now()
	unsigned := l.unsigned.registration(t, "198.51.100.4:7000")
	unsigned.Capabilities = []string{"inference", "health:ready"}
	unsigned.Signature = sptr("not-a-signature")
	h.ok("POST", "/api/v1/register", unsigned, "", nil)

	// Ten minutes later gpu heartbeats; the others stay silent.
	h.clock.Advance(10 * time.Minute)
	l.now = h.now()
	h.ok("POST", "/api/v1/heartbeat", l.gpu.heartbeat(t, l.gpu.did, h.now()), "", nil)
	return l
}

// signedReg signs a registration over its current fields.
func signedReg(t *testing.T, n node, r api.RegisterRequest) *string {
	sig := sign(t, n.priv, canonical.Register{DID: r.DID, PublicKey: n.key.Base58(), Endpoint: r.Endpoint, Capabilities: r.Capabilities, Region: r.Region})
	return &sig
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func sptr(s string) *string { return &s }

func (l *listing) views() map[string]api.NodeView {
	return map[string]api.NodeView{
		"gpu": {
			DID: l.gpu.did, PublicKey: l.gpu.key.Hex(), Endpoint: "203.0.113.7:7000",
			Capabilities: []string{"inference", "health:ready"}, Region: sptr("eu-west"), Status: "active",
			LastSeen: stamp(l.now), FirstSeen: stamp(l.t0), Signature: sptr(l.gpuSig),
			SignaturePresent: true, SignatureVerified: true, Reachability: "public",
		},
		"twin": {
			DID: l.twin.did, PublicKey: l.twin.key.Hex(), Endpoint: "twin.example.org:443",
			Capabilities: []string{}, Region: nil, Status: "active",
			LastSeen: stamp(l.t0), FirstSeen: stamp(l.t0), Signature: sptr(l.twinSig),
			SignaturePresent: true, SignatureVerified: true, Reachability: "public",
		},
		"lan": {
			DID: l.lan.did, PublicKey: l.lan.key.Hex(), Endpoint: "192.168.1.20:7000",
			Capabilities: []string{"inference"}, Region: sptr("us-east"), Status: "active",
			LastSeen: stamp(l.t1), FirstSeen: stamp(l.t1), Signature: sptr(l.lanSig),
			SignaturePresent: true, SignatureVerified: true, Reachability: "private",
		},
		"unsigned": {
			DID: l.unsigned.did, PublicKey: l.unsigned.key.Hex(), Endpoint: "198.51.100.4:7000",
			Capabilities: []string{"inference", "health:ready"}, Region: sptr("eu-west"), Status: "active",
			LastSeen: stamp(l.t2), FirstSeen: stamp(l.t2), Signature: sptr("not-a-signature"),
			SignaturePresent: true, SignatureVerified: false, Reachability: "public",
		},
	}
}

func (l *listing) node(name string) node {
	return map[string]node{"gpu": l.gpu, "lan": l.lan, "unsigned": l.unsigned, "twin": l.twin}[name]
}

// TestNodesFilters reads GET /nodes, /peers and /api/v1/peers with every filter: all three
// list the same records in the same order.
func TestNodesFilters(t *testing.T) {
	l := newListing(t)
	views := l.views()
	first, second := "gpu", "twin"
	if bytes.Compare(l.twin.key[:], l.gpu.key[:]) < 0 {
		first, second = "twin", "gpu"
	}
	all := []string{first, second, "lan", "unsigned"}

	tests := []struct {
		query string
		want  []string
	}{
		{"", all},
		{"?online_within=0", []string{"gpu"}},
		{"?online_within=60", []string{"gpu"}},
		{"?online_within=599", []string{"gpu"}},
		// unsigned was last seen exactly 600 s ago: ≤ keeps it.
		{"?online_within=600", []string{"gpu", "unsigned"}},
		{"?online_within=660", []string{"gpu", "lan", "unsigned"}},
		{"?online_within=720", all},
		{"?capability=inference", []string{"gpu", "lan", "unsigned"}},
		{"?capability=inference&capability=health:ready", []string{"gpu", "unsigned"}},
		{"?capability=health:ready&capability=storage", nil},
		{"?capability=storage", nil},
		{"?region=eu-west", []string{"gpu", "unsigned"}},
		{"?region=us-east", []string{"lan"}},
		{"?region=EU-WEST", nil},
		{"?callable=1", []string{first, second}},
		{"?callable=0", all},
		{"?callable=1&capability=inference", []string{"gpu"}},
		{"?online_within=720&region=eu-west&capability=health:ready", []string{"gpu", "unsigned"}},
		{"?callable=1&online_within=60&capability=inference&region=eu-west", []string{"gpu"}},
		{"?online_within=60&region=us-east", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			h := l.h.in(t)
			want := []api.NodeView{}
			var lines strings.Builder
			for _, name := range tt.want {
				want = append(want, views[name])
				n := l.node(name)
				lines.WriteString(n.did + " " + n.key.Base58() + " " + views[name].Endpoint + "\n")
			}

			var nodes struct {
				Count int            `json:"count"`
				Nodes []api.NodeView `json:"nodes"`
			}
			h.ok("GET", "/nodes"+tt.query, nil, "", &nodes)
			if nodes.Count != len(want) {
				t.Errorf("/nodes count %d, want %d", nodes.Count, len(want))
			}
			if d := cmp.Diff(want, nodes.Nodes); d != "" {
				t.Errorf("/nodes (-want +got):\n%s", d)
			}

			var env struct {
				OK    bool           `json:"ok"`
				Data  []api.NodeView `json:"data"`
				Error *string        `json:"error"`
			}
			_, raw := h.do("GET", "/api/v1/peers"+tt.query, nil, "")
			if !strings.Contains(string(raw), `"error":null`) || !strings.HasPrefix(string(raw), `{"ok":true,"data":[`) {
				t.Errorf("/api/v1/peers envelope: %s", raw)
			}
			h.ok("GET", "/api/v1/peers"+tt.query, nil, "", &env)
			if d := cmp.Diff(want, env.Data); d != "" || !env.OK || env.Error != nil {
				t.Errorf("/api/v1/peers ok=%v error=%v (-want +got):\n%s", env.OK, env.Error, d)
			}

			req, _ := http.NewRequest("GET", h.srv.URL+"/peers"+tt.query, nil)
			resp, body := testkit.Do(t, h.srv.Client(), req)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("/peers: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if string(body) != lines.String() {
				t.Errorf("/peers:\n%q\nwant\n%q", body, lines.String())
			}
		})
	}
}

func TestNodesBadFilter(t *testing.T) {
	h := newHarness(t)
	for _, q := range []string{"online_within=abc", "online_within=-1", "online_within=1.5", "online_within=99999999999", "callable=2", "callable=yes"} {
		for _, path := range []string{"/nodes", "/peers", "/api/v1/peers"} {
			h.fails("GET", path+"?"+q, nil, "", http.StatusBadRequest, "BAD_REQUEST")
		}
	}
}

// TestNodesOrderKeepsFirstSeen checks that a re-registration keeps a node's place: the list
// is sorted by first_seen, which a re-registration does not change.
func TestNodesOrderKeepsFirstSeen(t *testing.T) {
	h := newHarness(t)
	a, b := newNode(t, "a"), newNode(t, "b")
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:1"), "", nil)
	h.clock.Advance(time.Second)
	h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:1"), "", nil)
	h.clock.Advance(time.Hour)
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.3:1"), "", nil)
	var nodes struct {
		Nodes []api.NodeView `json:"nodes"`
	}
	h.ok("GET", "/nodes", nil, "", &nodes)
	if len(nodes.Nodes) != 2 || nodes.Nodes[0].DID != a.did || nodes.Nodes[1].DID != b.did || nodes.Nodes[0].Endpoint != "203.0.113.3:1" {
		t.Fatalf("order: %+v", nodes.Nodes)
	}
}

// listedNodes returns GET /nodes.
func (h *harness) listedNodes() []api.NodeView {
	h.t.Helper()
	var nodes struct {
		Count int            `json:"count"`
		Nodes []api.NodeView `json:"nodes"`
	}
	h.ok("GET", "/nodes", nil, "", &nodes)
	if nodes.Count != len(nodes.Nodes) {
		h.t.Fatalf("/nodes count %d for %d records", nodes.Count, len(nodes.Nodes))
	}
	return nodes.Nodes
}
