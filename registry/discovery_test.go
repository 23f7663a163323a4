package registry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
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

// TestRegisterGraceMode sends registrations whose signature is missing, null, not base58,
// the wrong length or wrong: each is recorded, unsigned, with the string as given.
func TestRegisterGraceMode(t *testing.T) {
	h := newHarness(t)
	quoted := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	tests := []struct {
		name string
		// signature returns the JSON of the signature field (nil leaves it out) and the
		// string the record must keep.
		signature func(n node, req api.RegisterRequest) (json.RawMessage, *string)
	}{
		{"missing", func(node, api.RegisterRequest) (json.RawMessage, *string) { return nil, nil }},
		{"null", func(node, api.RegisterRequest) (json.RawMessage, *string) { return json.RawMessage("null"), nil }},
		{"empty string", func(node, api.RegisterRequest) (json.RawMessage, *string) { return quoted(""), sptr("") }},
		{"not base58", func(node, api.RegisterRequest) (json.RawMessage, *string) {
			return quoted("0OIl-not-base58"), sptr("0OIl-not-base58")
		}},
		{"base58 of 32 bytes", func(node, api.RegisterRequest) (json.RawMessage, *string) {
			s := base58.Encode(make([]byte, 32))
			return quoted(s), &s
		}},
		{"base58 of 65 bytes", func(node, api.RegisterRequest) (json.RawMessage, *string) {
			s := base58.Encode(make([]byte, 65))
			return quoted(s), &s
		}},
		{"over another message", func(n node, req api.RegisterRequest) (json.RawMessage, *string) {
			s := *n.registration(t, "203.0.113.8:7000").Signature
			return quoted(s), &s
		}},
		{"by another key", func(n node, req api.RegisterRequest) (json.RawMessage, *string) {
			s := *signedReg(t, newNode(t, "another"), req)
			return quoted(s), &s
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			h.clock.Advance(time.Second) // so the new record sorts last
			n := newNode(t, "n")
			req := n.registration(t, "203.0.113.7:7000")
			sig, stored := tt.signature(n, req)
			body := toTree(t, req)
			body.del([]string{"signature"})
			if sig != nil {
				body.set([]string{"signature"}, rawMarker)
			}
			var res api.RegisterResult
			h.ok("POST", "/api/v1/register", body.encode(t, string(sig)), "", &res)
			if !res.OK || !res.Registered || res.Signed || !res.IDBound {
				t.Fatalf("result %+v", res)
			}
			if d := cmp.Diff(stored, res.Data.Signature); d != "" {
				t.Errorf("stored signature (-want +got):\n%s", d)
			}
			if res.Data.SignaturePresent != (stored != nil) || res.Data.SignatureVerified {
				t.Errorf("present=%v verified=%v", res.Data.SignaturePresent, res.Data.SignatureVerified)
			}
			list := h.listedNodes()
			if len(list) != i+1 || cmp.Diff(res.Data, list[len(list)-1]) != "" {
				t.Errorf("GET /nodes does not end with the record: %+v", list)
			}
		})
	}
	t.Run("signed", func(t *testing.T) {
		h := h.in(t)
		var res api.RegisterResult
		h.ok("POST", "/api/v1/register", newNode(t, "n").registration(t, "203.0.113.7:7000"), "", &res)
		if !res.Signed || !res.Data.SignaturePresent || !res.Data.SignatureVerified {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("signature not a string", func(t *testing.T) {
		h := h.in(t)
		n := newNode(t, "n")
		for _, v := range []string{"42", "true", `["x"]`, `{"s":"x"}`} {
			h.fails("POST", "/api/v1/register", toTree(t, n.registration(t, "203.0.113.7:7000")).withRaw(t, v, "signature"), "", http.StatusBadRequest, "BAD_REQUEST")
		}
		if got := len(h.listedNodes()); got != len(tests)+1 {
			t.Fatalf("%d records after refused registrations, want %d", got, len(tests)+1)
		}
	})
}

// TestRegisterNoDowngrade: once a key's record verified, an unverified registration for it
// is refused and changes nothing; an unverified record may still be upgraded.
func TestRegisterNoDowngrade(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")

	// Unverified records stay in grace mode: re-registering unsigned is fine.
	unsigned := n.registration(t, "203.0.113.7:7000")
	unsigned.Signature = nil
	h.ok("POST", "/api/v1/register", unsigned, "", nil)
	h.ok("POST", "/api/v1/register", unsigned, "", nil)

	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", &res)
	if !res.Signed {
		t.Fatalf("signed registration: %+v", res)
	}
	before := h.listedNodes()

	h.clock.Advance(time.Minute)
	hijack := n.registration(t, "198.51.100.66:7000")
	for name, sig := range map[string]*string{
		"missing":                     nil,
		"garbage":                     sptr("garbage"),
		"old signature":               res.Data.Signature,
		"tampered":                    sptr(tamperSig(t, *hijack.Signature)),
		"another key":                 signedReg(t, newNode(t, "attacker"), hijack),
		"wrong length":                sptr(base58.Encode(make([]byte, 63))),
		"empty":                       sptr(""),
		"missing, under the full DID": nil,
	} {
		t.Run(name, func(t *testing.T) {
			req := hijack
			req.Signature = sig
			if name == "missing, under the full DID" {
				req.DID = n.fullDID()
			}
			h.in(t).fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		})
	}
	if d := cmp.Diff(before, h.listedNodes()); d != "" {
		t.Fatalf("a refused registration changed the record (-before +after):\n%s", d)
	}
	// The owner can still move its node.
	h.ok("POST", "/api/v1/register", hijack, "", &res)
	if res.Data.Endpoint != "198.51.100.66:7000" || !res.Signed {
		t.Fatalf("owner's re-registration: %+v", res)
	}
}

func TestRegisterStrict(t *testing.T) {
	h := newHarness(t, strictSignatures())
	for name, sig := range map[string]*string{
		"missing":   nil,
		"garbage":   sptr("garbage"),
		"wrong key": signedReg(t, newNode(t, "other"), newNode(t, "n").registration(t, "203.0.113.7:7000")),
	} {
		t.Run(name, func(t *testing.T) {
			req := newNode(t, "n").registration(t, "203.0.113.7:7000")
			req.Signature = sig
			h.in(t).fails("POST", "/api/v1/register", req, "", http.StatusUnauthorized, "BAD_SIGNATURE")
		})
	}
	if n := len(h.listedNodes()); n != 0 {
		t.Fatalf("strict mode recorded %d unverified registrations", n)
	}
	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", newNode(t, "n").registration(t, "203.0.113.7:7000"), "", &res)
	if !res.Signed || len(h.listedNodes()) != 1 {
		t.Fatalf("strict mode refused a signed registration: %+v", res)
	}
}

// TestReregistration: a re-registration updates the DID spelling, endpoint, capabilities,
// region, signature and last_seen, and keeps first_seen.
func TestReregistration(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	first := h.now()
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)

	h.clock.Advance(90 * time.Minute)
	again := api.RegisterRequest{
		DID: n.fullDID(), PublicKey: n.key.Base58(), Endpoint: "https://gpu.example.org",
		Capabilities: []string{"storage", "proof"},
	}
	again.Signature = signedReg(t, n, again)
	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", again, "", &res)
	want := api.NodeView{
		DID: n.fullDID(), PublicKey: n.key.Hex(), Endpoint: "https://gpu.example.org",
		Capabilities: []string{"storage", "proof"}, Region: nil, Status: "active",
		LastSeen: stamp(h.now()), FirstSeen: stamp(first), Signature: again.Signature,
		SignaturePresent: true, SignatureVerified: true, Reachability: "public",
	}
	if d := cmp.Diff(want, res.Data); d != "" {
		t.Fatalf("answer (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]api.NodeView{want}, h.listedNodes()); d != "" {
		t.Fatalf("GET /nodes (-want +got):\n%s", d)
	}
	// The record now answers to the full spelling, and still to the short one.
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.fullDID(), h.now()), "", nil)
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now()), "", nil)
}

func vectorNode(t *testing.T, seedHex string) node {
	priv := testkit.SeedKey(seedHex)
	k := pub(priv)
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	return node{priv: priv, key: k, did: d.String()}
}

// TestRegisterDIDVectors registers every node DID of dids.json: each positive spelling is
// accepted, each negative gets its code and records nothing.
func TestRegisterDIDVectors(t *testing.T) {
	v := testkit.DIDs(t)
	h := newHarness(t)
	for _, neg := range didNegatives(t, "POST /api/v1/register", 50) {
		t.Run(neg.ID, func(t *testing.T) {
			req := api.RegisterRequest{DID: neg.DID, PublicKey: neg.PublicKey, Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"}}
			h.in(t).fails("POST", "/api/v1/register", req, "", neg.Expected.HTTP, neg.Expected.Code)
		})
	}
	if got := len(h.listedNodes()); got != 0 {
		t.Fatalf("refused DIDs left %d records", got)
	}

	// Positives: every node spelling of a key names one record. The collision keys are left
	// to TestRegisterCollision, since one of them under a short DID excludes the other.
	seeds := map[string]string{}
	for _, k := range v.Keys {
		seeds[k.Name] = k.SeedHex
	}
	keys := map[string]bool{}
	for _, p := range v.Positive {
		name := strings.Split(p.ID, "/")[0]
		if p.Role != "node" || strings.HasPrefix(name, "collision") {
			continue
		}
		keys[p.PublicKey] = true
		t.Run(p.ID, func(t *testing.T) {
			req := api.RegisterRequest{DID: p.DID, PublicKey: p.PublicKey, Endpoint: "203.0.113.7:7000"}
			if seed, ok := seeds[name]; ok {
				req.Signature = signedReg(t, vectorNode(t, seed), req)
			}
			var res api.RegisterResult
			h.in(t).ok("POST", "/api/v1/register", req, "", &res)
			k, err := didkey.DecodeKey(p.PublicKey)
			if err != nil || res.Data.PublicKey != k.Hex() || res.Data.DID != p.DID || res.Signed != (req.Signature != nil) {
				t.Fatalf("answer %+v", res)
			}
		})
	}
	distinct := map[string]bool{}
	for k := range keys {
		dk, _ := didkey.DecodeKey(k)
		distinct[dk.Hex()] = true
	}
	if got := len(h.listedNodes()); got != len(distinct) {
		t.Fatalf("%d records for %d keys", got, len(distinct))
	}
}

// TestRegisterCollision uses the two keys of dids.json that share the short body 60121c8f.
// Once one has a record under any spelling, the other cannot take the short DID, but can
// register under its 10-hex or full DID.
func TestRegisterCollision(t *testing.T) {
	v := testkit.DIDs(t)
	sides := map[string]testkit.CollisionKey{"first": v.Collision.First, "second": v.Collision.Second}
	for _, order := range [][2]string{{"first", "second"}, {"second", "first"}} {
		holderSide, otherSide := sides[order[0]], sides[order[1]]
		holder, other := vectorNode(t, holderSide.SeedHex), vectorNode(t, otherSide.SeedHex)
		if holder.did != holderSide.DIDShort || other.did != otherSide.DIDShort || holder.key.ShortBody() != v.Collision.ShortBody || other.key.ShortBody() != v.Collision.ShortBody {
			t.Fatalf("collision vectors do not share %s", v.Collision.ShortBody)
		}
		spellings := func(n node, s testkit.CollisionKey) map[string]string {
			return map[string]string{"short": s.DIDShort, "fallback": s.DIDFallback, "full": n.fullDID()}
		}
		for _, form := range []string{"short", "fallback", "full"} {
			t.Run(order[0]+" holds "+form, func(t *testing.T) {
				h := newHarness(t)
				reg := func(n node, did string) api.RegisterRequest {
					r := api.RegisterRequest{DID: did, PublicKey: n.key.Base58(), Endpoint: "203.0.113.7:7000"}
					r.Signature = signedReg(t, n, r)
					return r
				}
				h.ok("POST", "/api/v1/register", reg(holder, spellings(holder, holderSide)[form]), "", nil)
				h.clock.Advance(time.Second)
				h.fails("POST", "/api/v1/register", reg(other, otherSide.DIDShort), "", http.StatusConflict, "DID_COLLISION")
				if got := len(h.listedNodes()); got != 1 {
					t.Fatalf("a colliding registration was recorded: %d records", got)
				}
				// Another tag on the same short body is the same short body.
				h.fails("POST", "/api/v1/register", reg(other, "did:svrp:h:"+v.Collision.ShortBody), "", http.StatusConflict, "DID_COLLISION")
				h.ok("POST", "/api/v1/register", reg(other, otherSide.DIDFallback), "", nil)
				h.ok("POST", "/api/v1/register", reg(other, other.fullDID()), "", nil)
				// Still refused once the other key has a record of its own.
				h.fails("POST", "/api/v1/register", reg(other, otherSide.DIDShort), "", http.StatusConflict, "DID_COLLISION")
				list := h.listedNodes()
				if len(list) != 2 || list[1].DID != other.fullDID() {
					t.Fatalf("records: %+v", list)
				}
				// Each key heartbeats under its unambiguous spellings.
				h.ok("POST", "/api/v1/heartbeat", other.heartbeat(t, otherSide.DIDFallback, h.now()), "", nil)
				h.ok("POST", "/api/v1/heartbeat", holder.heartbeat(t, holderSide.DIDFallback, h.now()), "", nil)
				h.ok("POST", "/api/v1/heartbeat", holder.heartbeat(t, holder.fullDID(), h.now()), "", nil)
				// The shared short DID names the key registered under exactly it, and
				// nothing when neither was.
				if form == "short" {
					h.ok("POST", "/api/v1/heartbeat", holder.heartbeat(t, holderSide.DIDShort, h.now()), "", nil)
					h.fails("POST", "/api/v1/heartbeat", other.heartbeat(t, otherSide.DIDShort, h.now()), "", http.StatusUnauthorized, "BAD_SIGNATURE")
				} else {
					h.fails("POST", "/api/v1/heartbeat", holder.heartbeat(t, holderSide.DIDShort, h.now()), "", http.StatusNotFound, "UNKNOWN_DID")
					h.fails("POST", "/api/v1/heartbeat", other.heartbeat(t, otherSide.DIDShort, h.now()), "", http.StatusNotFound, "UNKNOWN_DID")
				}
			})
		}
	}
}

// TestRegisterAddressLimit: a client address may register RegisterAddressLimit new keys
// per hour; re-registrations of known keys do not count.
func TestRegisterAddressLimit(t *testing.T) {
	h := newHarness(t, registerAddressLimit(2))
	a, b, c := newNode(t, "a"), newNode(t, "b"), newNode(t, "c")
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:1"), "", nil)
	h.clock.Advance(10 * time.Minute)
	h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:1"), "", nil)
	h.fails("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	for range 5 {
		h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:2"), "", nil)
		h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:2"), "", nil)
	}
	if got := len(h.listedNodes()); got != 2 {
		t.Fatalf("%d records, want 2", got)
	}
	// The hour counts from the first new key.
	h.clock.Advance(50*time.Minute - time.Second)
	h.fails("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	h.clock.Advance(time.Second)
	h.ok("POST", "/api/v1/register", c.registration(t, "203.0.113.3:1"), "", nil)
}

// TestRegisterBadRequest covers shapes and limits beyond the vectors, and the order of the
// checks: DID before field limits before the collision.
func TestRegisterBadRequest(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	valid := n.registration(t, "203.0.113.7:7000")
	without := func(field string) []byte {
		body := toTree(t, valid)
		body.del([]string{field})
		return body.encode(t, "")
	}
	with := func(field, raw string) []byte { return toTree(t, valid).withRaw(t, raw, field) }
	tests := []struct {
		name string
		body any
		code string
	}{
		{"empty body", "", "BAD_REQUEST"},
		{"array", "[]", "BAD_REQUEST"},
		{"not JSON", "{did:", "BAD_REQUEST"},
		{"trailing garbage", string(with("region", `"eu-west"`)) + "x", "BAD_REQUEST"},
		{"no did", without("did"), "BAD_REQUEST"},
		{"no public_key", without("public_key"), "BAD_REQUEST"},
		{"no endpoint", without("endpoint"), "BAD_REQUEST"},
		{"did a number", with("did", "7"), "BAD_REQUEST"},
		{"public_key null", with("public_key", "null"), "BAD_REQUEST"},
		{"region empty", with("region", `""`), "BAD_REQUEST"},
		{"region a number", with("region", "1"), "BAD_REQUEST"},
		{"endpoint with NBSP", with("endpoint", `"203.0.113.7\u00a0:7000"`), "BAD_REQUEST"},
		{"endpoint with NEL", with("endpoint", `"203.0.113.7\u0085:7000"`), "BAD_REQUEST"},
		{"endpoint with ideographic space", with("endpoint", `"203.0.113.7\u3000:7000"`), "BAD_REQUEST"},
		{"endpoint with line separator", with("endpoint", `"203.0.113.7\u2028:7000"`), "BAD_REQUEST"},
		{"endpoint with paragraph separator", with("endpoint", `"203.0.113.7\u2029:7000"`), "BAD_REQUEST"},
		// DID comes first: a bad DID with a bad endpoint is a DID failure.
		{"bad DID and bad endpoint", api.RegisterRequest{DID: "did:web:x", PublicKey: n.key.Hex(), Endpoint: "a b"}, "ID_BINDING_REQUIRED"},
		{"unbound DID and bad endpoint", api.RegisterRequest{DID: newNode(t, "m").did, PublicKey: n.key.Hex(), Endpoint: "a b"}, "ID_BINDING_FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := http.StatusBadRequest
			if tt.code != "BAD_REQUEST" {
				status = http.StatusUnauthorized
			}
			h.in(t).fails("POST", "/api/v1/register", tt.body, "", status, tt.code)
		})
	}
	if got := len(h.listedNodes()); got != 0 {
		t.Fatalf("%d records after refused registrations", got)
	}
	// Field limits come before the collision check.
	v := testkit.DIDs(t)
	holder, other := vectorNode(t, v.Collision.First.SeedHex), vectorNode(t, v.Collision.Second.SeedHex)
	h.ok("POST", "/api/v1/register", api.RegisterRequest{DID: holder.did, PublicKey: holder.key.Hex(), Endpoint: "203.0.113.7:7000"}, "", nil)
	h.fails("POST", "/api/v1/register", api.RegisterRequest{DID: other.did, PublicKey: other.key.Hex(), Endpoint: " "}, "", http.StatusBadRequest, "BAD_REQUEST")
}

// rejectValue is the case's offending value as JSON text, sent as is.
func rejectValue(t *testing.T, c testkit.Reject) string {
	if c.RawValue != "" {
		return c.RawValue
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(c.Fields, &fields); err != nil {
		t.Fatalf("%s: fields: %v", c.ID, err)
	}
	v, ok := fields[c.Field]
	if !ok {
		t.Fatalf("%s: no value for %s", c.ID, c.Field)
	}
	return string(v)
}

// rejectVectors returns the cases of rejects.json for one message.
func rejectVectors(t *testing.T, message int) []testkit.Reject {
	var out []testkit.Reject
	for _, c := range testkit.Rejects(t).Cases {
		if c.Message == message {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("rejects.json has no case for message %d", message)
	}
	return out
}

// didNegatives returns the negative cases of dids.json sent to endpoint; fewer than least
// fails the test.
func didNegatives(t *testing.T, endpoint string, least int) []testkit.DIDCase {
	var out []testkit.DIDCase
	for _, neg := range testkit.DIDs(t).Negative {
		if neg.Endpoint == endpoint {
			out = append(out, neg)
		}
	}
	if len(out) < least {
		t.Fatalf("dids.json has %d cases for %s, want at least %d", len(out), endpoint, least)
	}
	return out
}

// TestRegisterRejects sends every message-3 case of rejects.json, the offending value put in
// an otherwise valid registration: 400, and nothing recorded.
func TestRegisterRejects(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	for _, c := range rejectVectors(t, 3) {
		t.Run(c.ID, func(t *testing.T) {
			body := toTree(t, n.registration(t, "203.0.113.7:7000")).withRaw(t, rejectValue(t, c), c.Field)
			h.in(t).fails("POST", "/api/v1/register", body, "", c.Expected.HTTP, c.Expected.Code)
		})
	}
	if got := len(h.listedNodes()); got != 0 {
		t.Fatalf("%d records after refused registrations", got)
	}
}

func TestHeartbeat(t *testing.T) {
	h := newHarness(t)
	n, stranger := newNode(t, "n"), newNode(t, "stranger")
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	fallback, _ := didkey.NodeDID(n.key, didkey.FormFallback)
	otherTag := "did:svrp:h:" + n.key.ShortBody()

	withKey := func(r api.HeartbeatRequest, key string) api.HeartbeatRequest {
		r.PublicKey = &key
		return r
	}
	tests := []struct {
		name   string
		req    func(now time.Time) any
		status int
		code   string // "" for success
	}{
		// First, while no heartbeat is remembered: later ones may not go back (docs/protocol.md §10.3).
		{"ts 300 s behind", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(-300*time.Second)) }, 200, ""},
		{"short", func(now time.Time) any { return n.heartbeat(t, n.did, now) }, 200, ""},
		{"fallback", func(now time.Time) any { return n.heartbeat(t, fallback.String(), now) }, 200, ""},
		{"full", func(now time.Time) any { return n.heartbeat(t, n.fullDID(), now) }, 200, ""},
		{"short under another tag", func(now time.Time) any { return n.heartbeat(t, otherTag, now) }, 200, ""},
		{"with hex key", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), n.key.Hex()) }, 200, ""},
		{"with base58 key", func(now time.Time) any { return withKey(n.heartbeat(t, n.fullDID(), now), n.key.Base58()) }, 200, ""},
		{"ts 301 s behind", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(-301*time.Second)) }, 401, "STALE_TS"},
		{"ts 301 s ahead", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(301*time.Second)) }, 401, "STALE_TS"},
		{"ts 0", func(now time.Time) any { return n.heartbeat(t, n.did, time.Unix(0, 0)) }, 401, "STALE_TS"},
		{"public_key of another node", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), stranger.key.Hex()) }, 401, "ID_BINDING_FAILED"},
		{"public_key of 31 bytes", func(now time.Time) any {
			return withKey(n.heartbeat(t, n.did, now), base58.Encode(n.key[:31]))
		}, 401, "ID_BINDING_FAILED"},
		{"public_key not a key", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), "0xnope") }, 401, "ID_BINDING_FAILED"},
		{"public_key sent empty", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), "") }, 401, "ID_BINDING_FAILED"},
		{"never registered", func(now time.Time) any { return stranger.heartbeat(t, stranger.did, now) }, 404, "UNKNOWN_DID"},
		{"never registered, full DID", func(now time.Time) any { return stranger.heartbeat(t, stranger.fullDID(), now) }, 404, "UNKNOWN_DID"},
		{"never registered and stale", func(now time.Time) any { return stranger.heartbeat(t, stranger.did, now.Add(-time.Hour)) }, 404, "UNKNOWN_DID"},
		{"stale and badly signed", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now.Add(-time.Hour))
			r.Signature = tamperSig(t, r.Signature)
			return r
		}, 401, "STALE_TS"},
		{"tampered signature", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = tamperSig(t, r.Signature)
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signed by another key", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = stranger.heartbeat(t, n.did, now).Signature
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signature over another ts", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = n.heartbeat(t, n.did, now.Add(time.Second)).Signature
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signature over another spelling", func(now time.Time) any {
			r := n.heartbeat(t, n.fullDID(), now)
			r.Signature = n.heartbeat(t, n.did, now).Signature
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signature not base58", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = "0OIl"
			return r
		}, 401, "BAD_SIGNATURE"},
		{"another method", func(now time.Time) any { return n.heartbeat(t, "did:key:z6Mk", now) }, 401, "ID_BINDING_REQUIRED"},
		{"not a DID", func(now time.Time) any { return n.heartbeat(t, n.key.Hex(), now) }, 401, "ID_BINDING_REQUIRED"},
		{"bad grammar", func(now time.Time) any { return n.heartbeat(t, strings.ToUpper(n.did[:10])+n.did[10:], now) }, 401, "ID_BINDING_REQUIRED"},
		{"uppercase body", func(now time.Time) any { return n.heartbeat(t, "did:svrp:n:"+strings.ToUpper(n.key.ShortBody()), now) }, 401, "ID_BINDING_FAILED"},
		{"9-hex body", func(now time.Time) any { return n.heartbeat(t, fallback.String()[:len(fallback.String())-1], now) }, 401, "ID_BINDING_FAILED"},
		{"operator tag", func(now time.Time) any { return n.heartbeat(t, "did:svrp:o:"+n.key.ShortBody(), now) }, 401, "ID_BINDING_FAILED"},
		// A control character breaks the DID grammar, which is checked first (see
		// parseNodeDID).
		{"DID with LF", func(now time.Time) any {
			return api.HeartbeatRequest{DID: n.did + "\n", TS: now.Unix(), Signature: signLines(n.priv, "service-node-heartbeat:v1", n.did+"\n", strconv.FormatInt(now.Unix(), 10))}
		}, 401, "ID_BINDING_FAILED"},
		{"missing ts", func(now time.Time) any {
			return map[string]any{"did": n.did, "signature": n.heartbeat(t, n.did, now).Signature}
		}, 400, "BAD_REQUEST"},
		{"missing signature", func(now time.Time) any { return map[string]any{"did": n.did, "ts": now.Unix()} }, 400, "BAD_REQUEST"},
		{"ts a fraction", func(now time.Time) any {
			return toTree(t, n.heartbeat(t, n.did, now)).withRaw(t, "1.5", "ts")
		}, 400, "BAD_REQUEST"},
		{"public_key a number", func(now time.Time) any {
			return toTree(t, n.heartbeat(t, n.did, now)).withRaw(t, "1", "public_key")
		}, 400, "BAD_REQUEST"},
		// Last, as the ts it leaves remembered is ahead of every row's: from here on any
		// heartbeat at now is older than the last, refused before its signature is looked at.
		{"ts 300 s ahead", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(300*time.Second)) }, 200, ""},
		{"older than the last, and badly signed", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = tamperSig(t, r.Signature)
			return r
		}, 401, "STALE_TS"},
	}
	for _, c := range rejectVectors(t, 4) {
		tests = append(tests, struct {
			name   string
			req    func(now time.Time) any
			status int
			code   string
		}{c.ID, func(now time.Time) any {
			return toTree(t, n.heartbeat(t, n.did, now)).withRaw(t, rejectValue(t, c), c.Field)
		}, c.Expected.HTTP, c.Expected.Code})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			h.clock.Advance(time.Second)
			before := h.listedNodes()[0].LastSeen
			// Listings may be cached for the rest of the second they were built in, so each
			// look after the heartbeat is taken a second later.
			if tt.code != "" {
				h.fails("POST", "/api/v1/heartbeat", tt.req(h.now()), "", tt.status, tt.code)
				h.clock.Advance(time.Second)
				if after := h.listedNodes()[0].LastSeen; after != before {
					t.Fatalf("a failed heartbeat moved last_seen from %s to %s", before, after)
				}
				return
			}
			var res api.HeartbeatResult
			h.ok("POST", "/api/v1/heartbeat", tt.req(h.now()), "", &res)
			at := stamp(h.now())
			h.clock.Advance(time.Second)
			if listed := h.listedNodes()[0].LastSeen; !res.OK || res.LastSeen != at || listed != at {
				t.Fatalf("heartbeat answered %+v; record last_seen %s; heartbeat at %s", res, listed, at)
			}
		})
	}
}
