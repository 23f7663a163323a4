package daemon

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
)

// The attacks of the edge: slow readers, parked HTTP/2 streams and rapid resets, each against
// a daemon capped at edgeCap connections, while an honest client asks for /health on new
// connections. They run where the kernel's buffers are an Internet link's: in a network
// namespace whose loopback has an MTU of 1500 (at loopback's usual 64 KiB the buffers take
// whole answers and hide a slow reader), which only root can make; elsewhere they skip.

const (
	edgeCap     = 32
	edgePerAddr = 8
	// edgeNetnsEnv, set, says the test runs inside the namespace atMTU1500 made for it.
	edgeNetnsEnv = "SVRP_EDGE_IN_NETNS"
)

// edgeAttackers are the attackers' addresses: four networks, each holding a client's cap.
var edgeAttackers = []string{"127.1.0.1", "127.2.0.1", "127.3.0.1", "127.4.0.1"}

var edgeNetnsSeq atomic.Int64

// atMTU1500 reports whether the calling test runs inside its namespace. Outside, it makes the
// namespace, runs the test again there (the test binary, told so by edgeNetnsEnv), fails the
// test when that run fails, and returns false; it skips the test without root or ip(8).
func atMTU1500(t *testing.T) bool {
	t.Helper()
	if os.Getenv(edgeNetnsEnv) != "" {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("this attack runs in a network namespace at MTU 1500, which only root can make")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("this attack makes its network namespace with ip(8), which is not installed")
	}
	name := fmt.Sprintf("edge-%d-%d", os.Getpid(), edgeNetnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "mtu", "1500", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo: %v\n%s", err, out)
	}
	cmd := exec.Command("ip", "netns", "exec", name, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), edgeNetnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the run inside the network namespace: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "edgeabuse_test.go") {
			t.Log(strings.TrimSpace(l))
		}
	}
	return false
}

// edgeConfig is a daemon capped at edgeCap connections, edgePerAddr per address.
func edgeConfig(t *testing.T) Config {
	c := serveConfig(t)
	c.DataDir, c.Memory = "", true
	c.MaxConnections, c.MaxConnectionsPerAddress = edgeCap, edgePerAddr
	return c
}

// honestGets asks for /health n times, each on a new connection from the address from(i)
// and returns how many were answered 200.
func honestGets(t *testing.T, tr *http.Transport, base string, n int, from func(i int) string) int {
	t.Helper()
	ok := 0
	for i := range n {
		res, err := honestClient(tr.Clone(), from(i)).Get(base + "/health")
		if err != nil {
			t.Logf("honest GET /health: %v", err)
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			ok++
		} else {
			t.Logf("honest GET /health: %d", res.StatusCode)
		}
	}
	return ok
}

func honestClient(tr *http.Transport, ip string) *http.Client {
	tr.DisableKeepAlives = true
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}).DialContext
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// oneHonest is one honest client's address; freshHonest(i) is the i-th of many, each
// holding no connection when it connects.
func oneHonest(int) string { return "127.0.0.1" }

func freshHonest(i int) string { return fmt.Sprintf("127.0.%d.%d", 1+i/200, 10+i%200) }

// waitFor polls cond until it holds, failing the test past the deadline.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEdgeSlowReaders: 4 addresses × 8 connections, each pipelining GET /openapi.json with
// a 4 KiB receive buffer and reading 3 KB a second, hold every slot; an honest client gets
// every one of its requests on new connections answered.
func TestEdgeSlowReaders(t *testing.T) {
	if !atMTU1500(t) {
		return
	}
	base := serve(t, edgeConfig(t))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reading atomic.Int64
	for _, ip := range edgeAttackers {
		for range edgePerAddr {
			wg.Add(1)
			go func() {
				defer wg.Done()
				attack.SlowRead(base, ip, stop, func(a attack.Answer) {
					if a.Status == http.StatusOK {
						reading.Add(1)
					}
				})
			}()
		}
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "every attack connection reading its answers", 30*time.Second, func() bool { return reading.Load() >= edgeCap })
	if ok := honestGets(t, &http.Transport{}, base, 16, oneHonest); ok != 16 {
		t.Fatalf("honest requests answered during the attack: %d/16; want all", ok)
	}
	t.Logf("honest 16/16 answered")
}

// tlsEdge serves edgeConfig over TLS with HTTP/2 and returns its host:port and an honest
// client's HTTP/2 transport.
func tlsEdge(t *testing.T, edit func(*Config)) (string, *http.Transport) {
	dir := t.TempDir()
	writeCert(t, dir, 1)
	c := edgeConfig(t)
	c.TLSCert, c.TLSKey = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if edit != nil {
		edit(&c)
	}
	addr := strings.TrimPrefix(serve(t, c), "http://")
	return addr, &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
}

// TestEdgeParkedH2Streams: 4 addresses × 8 connections over TLS with HTTP/2, each opening
// every stream a connection may — a GET with a flow-control window of 0, or a POST whose 4 KB
// body never ends — hold every slot and read nothing; an honest client on new connections
// gets every answer, the daemon's memory stays within its bound, and the parked answers are
// reset once they make no progress for the send timeout.
func TestEdgeParkedH2Streams(t *testing.T) {
	if !atMTU1500(t) {
		return
	}
	addr, tr := tlsEdge(t, func(c *Config) { c.Edge.SendTimeout = 2 * time.Second })
	var resets, goaways atomic.Int64
	base := inUse()
	var conns []*attack.H2Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, ip := range edgeAttackers {
		for range edgePerAddr {
			c, err := attack.DialH2(ip, addr, 0)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			go c.Drain(&resets, &goaways, nil)
			c.Park(h2Streams)
		}
	}
	if grew := inUse() - base; grew > edgeMemoryBound(edgeCap)+(8<<20) {
		t.Fatalf("the attack grew the heap and stacks by %d KiB; the bound is %d KiB", grew>>10, edgeMemoryBound(edgeCap)>>10)
	}
	// A client holding no connection is let in at once; one that holds one, once the
	// parked answers are past their due time at the floor rate.
	if ok := honestGets(t, tr, "https://"+addr, 10, freshHonest); ok != 10 {
		t.Fatalf("honest requests from fresh addresses answered during the attack: %d/10; want all", ok)
	}
	waitFor(t, "parked streams reset after the send timeout", 30*time.Second, func() bool { return resets.Load() > 0 })
	if ok := honestGets(t, tr, "https://"+addr, 10, oneHonest); ok != 10 {
		t.Fatalf("honest requests from one address answered during the attack: %d/10; want all", ok)
	}
	t.Logf("honest 20/20 answered; %d parked streams reset", resets.Load())
}

// TestEdgeRapidReset: a connection opening and at once resetting streams as fast as it can
// (CVE-2023-44487) runs at most its stream limit of handlers at a time; an honest client is
// answered meanwhile.
func TestEdgeRapidReset(t *testing.T) {
	if !atMTU1500(t) {
		return
	}
	addr, tr := tlsEdge(t, nil)
	before := runtime.NumGoroutine()
	var resets, goaways atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak atomic.Int64
	for _, ip := range edgeAttackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := attack.DialH2(ip, addr, 65535)
				if err != nil {
					return
				}
				go c.Drain(&resets, &goaways, nil)
				for {
					select {
					case <-stop:
						c.Close()
						return
					default:
					}
					id, err := c.Get("/openapi.json")
					if err == nil {
						err = c.Reset(id)
					}
					if err != nil {
						c.Close()
						break
					}
					if g := int64(runtime.NumGoroutine() - before); g > peak.Load() {
						peak.Store(g)
					}
				}
			}
		}()
	}
	ok := honestGets(t, tr, "https://"+addr, 10, oneHonest)
	close(stop)
	wg.Wait()
	if ok != 10 {
		t.Fatalf("honest requests answered during the attack: %d/10; want all", ok)
	}
	// Each attacker connection: its reader, the server's connection goroutines, at most
	// h2Streams handlers and as many queued; plus the honest client's.
	if bound := int64(len(edgeAttackers) * (8 + 5*h2Streams)); peak.Load() > bound {
		t.Fatalf("goroutines grew by %d under rapid reset; want at most %d", peak.Load(), bound)
	}
	t.Logf("honest 10/10 answered; goroutines grew by at most %d; %d GOAWAY", peak.Load(), goaways.Load())
}

// rss is the process's resident set now and at its peak, from /proc.
func rss(t *testing.T) (now, peak int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status to read the resident set from")
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				now = kb << 10
			} else {
				peak = kb << 10
			}
		}
	}
	return now, peak
}

// TestEdgeCheapFlood: heartbeats of a node that is not registered and requests for paths
// that name no endpoint, from 200 addresses of one /24, each on a new connection, cost their
// block its budget of malformed requests and are refused at the door past it; an honest
// client is answered throughout.
func TestEdgeCheapFlood(t *testing.T) {
	base := serve(t, edgeConfig(t))
	const senders, requests = 200, 2400
	heartbeat := []byte(fmt.Sprintf(`{"did":"did:svrp:n:0123abcd","ts":%d,"signature":"x"}`, time.Now().Unix()))
	var answered, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < requests; i += 16 {
				hc := honestClient(&http.Transport{}, fmt.Sprintf("127.5.0.%d", 1+i%senders))
				var res *http.Response
				var err error
				if i%2 == 0 {
					res, err = hc.Post(base+"/api/v1/heartbeat", "application/json", bytes.NewReader(heartbeat))
				} else {
					res, err = hc.Get(base + "/no/such/path")
				}
				if err != nil {
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusTooManyRequests {
					refused.Add(1)
				} else {
					answered.Add(1)
				}
			}
		}()
	}
	ok := honestGets(t, &http.Transport{}, base, 20, oneHonest)
	wg.Wait()
	if ok != 20 {
		t.Fatalf("honest requests answered during the flood: %d/20; want all", ok)
	}
	// The block's budget is 960 a minute; a window that turns during the run may add its own.
	if a := answered.Load(); a > 2*960 || refused.Load() < requests/2 {
		t.Fatalf("the flood got %d answers and %d refusals; want at most the block's budget answered", a, refused.Load())
	}
	t.Logf("honest 20/20 answered; the flood got %d answers, %d refusals", answered.Load(), refused.Load())
}
