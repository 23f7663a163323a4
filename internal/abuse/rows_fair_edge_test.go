package abuse

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// TestFairRow1MadeUpMethods: tens of thousands of requests from one address, each with a
// different made-up HTTP method, add no metric series: the method label is one HTTP defines
// or "other". /metrics stays small, the daemon's memory bounded, and an honest client is
// answered during the flood.
func TestFairRow1MadeUpMethods(t *testing.T) {
	const flood = 20_000
	d := start(t)
	host := strings.TrimPrefix(d.URL, "http://")
	rssBefore := d.rssKiB()

	stopHonest := honest(t, "honest requests during the flood", 100*time.Millisecond, func() error { return getOK(from("127.0.0.5"), d.URL+"/health") })
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr(0))}}
	c, err := dialer.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Pipelined: the writer runs ahead of the answers, as a flood would.
	go func() {
		w := bufio.NewWriter(c)
		for i := range flood {
			fmt.Fprintf(w, "M%07dX /nodes HTTP/1.1\r\nHost: svrpd\r\n\r\n", i)
		}
		w.Flush()
	}()
	r := bufio.NewReader(c)
	statuses := map[int]int{}
	for range flood {
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("after %v: %v", statuses, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		statuses[res.StatusCode]++
	}
	ran := stopHonest()

	res, err := from("127.0.0.6").Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	series, methods := 0, map[string]bool{}
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, "svrpd_http_requests_total{") {
			continue
		}
		series++
		if _, rest, ok := strings.Cut(l, `method="`); ok {
			m, _, _ := strings.Cut(rest, `"`)
			methods[m] = true
		}
	}
	rssAfter := d.rssKiB()
	t.Logf("%d made-up methods: answers %v; /metrics %d bytes, %d request series, methods %v; RSS %d → %d KiB; %d honest requests",
		flood, statuses, len(body), series, methods, rssBefore, rssAfter, ran)
	if statuses[http.StatusMethodNotAllowed] != flood {
		t.Fatalf("answers to made-up methods: %v; want %d 405s", statuses, flood)
	}
	if !methods["other"] || len(methods) > 3 || series > 10 {
		t.Fatalf("request series %d, methods %v: made-up methods became labels", series, methods)
	}
	if len(body) > 256<<10 {
		t.Fatalf("/metrics is %d bytes", len(body))
	}
	if rssAfter-rssBefore > 64<<10 {
		t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
	}
}

// getOK gets url with hc and wants 200.
func getOK(hc *http.Client, url string) error {
	res, err := hc.Get(url)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, res.StatusCode)
	}
	return nil
}

// TestFairRow6SlowConnections: addresses holding as many connections as they may, each
// sending its headers or its body a byte at a time, and connecting again whenever one is
// cut, fill the connection cap (lowered with --max-connections); an honest client that sends
// its requests promptly, on a new connection each, gets every one answered, because at the
// cap the connections that have not delivered a request within --request-grace are cut
// first, from the group holding the most.
func TestFairRow6SlowConnections(t *testing.T) {
	const total, perAddr, attackers, honestRequests = 96, 12, 16, 80
	const requestGrace = 300 * time.Millisecond
	d := start(t, "--max-connections", fmt.Sprint(total), "--max-connections-per-address", fmt.Sprint(perAddr),
		"--request-grace", requestGrace.String())
	host := strings.TrimPrefix(d.URL, "http://")
	rssBefore := d.rssKiB()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dials, cuts atomic.Int64
	slow := func(ip string, body bool) {
		defer wg.Done()
		dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := dialer.Dial("tcp", host)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			dials.Add(1)
			start := "GET /health HTTP/1.1\r\nHost: svrpd\r\nX-Slow: "
			if body {
				start = "POST /v1/auth/device-login HTTP/1.1\r\nHost: svrpd\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"
			}
			_, err = io.WriteString(c, start)
			for err == nil {
				select {
				case <-stop:
					c.Close()
					return
				case <-time.After(100 * time.Millisecond):
				}
				c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err = io.WriteString(c, "a"); err == nil {
					// A cut connection may still take writes; a read sees the close.
					c.SetReadDeadline(time.Now().Add(time.Millisecond))
					var b [1]byte
					if _, rerr := c.Read(b[:]); rerr != nil && !isTimeout(rerr) {
						err = rerr
					}
				}
			}
			cuts.Add(1)
			c.Close()
		}
	}
	for a := range attackers {
		for i := range perAddr {
			wg.Add(1)
			go slow(addr(a), i%2 == 1)
		}
	}
	// The attack holds the cap, then its connections pass their grace.
	for deadline := time.Now().Add(testkit.WaitBound); dials.Load() < total; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("the attack made %d connections within %v, short of the cap of %d", dials.Load(), testkit.WaitBound, total)
		}
	}
	time.Sleep(requestGrace)

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}}).DialContext,
	}}
	ok := 0
	var first error
	for range honestRequests {
		if err := getOK(hc, d.URL+"/health"); err != nil {
			if first == nil {
				first = err
			}
		} else {
			ok++
		}
		time.Sleep(25 * time.Millisecond)
	}
	rssAfter := d.rssKiB()
	close(stop)
	wg.Wait()
	t.Logf("%d addresses × %d slow connections (cap %d): %d dials, %d cut; honest %d of %d; RSS %d → %d KiB",
		attackers, perAddr, total, dials.Load(), cuts.Load(), ok, honestRequests, rssBefore, rssAfter)
	if ok != honestRequests {
		t.Fatalf("the honest client got %d of %d requests through: %v", ok, honestRequests, first)
	}
	if rssAfter-rssBefore > 64<<10 {
		t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestFairRow10ClientAddressHeader: behind a trusted proxy, a client adding its own
// X-Forwarded-For beside the Forwarded its proxy writes does not choose its address; a proxy
// that writes addresses with ports (ip:port, [v6]:port) still tells its clients apart. So a
// client that spends its failed-login budget is refused whatever it writes, and an honest
// client behind the same proxy logs in.
func TestFairRow10ClientAddressHeader(t *testing.T) {
	const failures = 5
	for _, c := range []struct {
		header string
		proxy  func(client string) http.Header // what the proxy adds, naming the client
	}{
		{"Forwarded", func(client string) http.Header {
			return http.Header{"Forwarded": {`for="` + client + `";proto=http`}}
		}},
		{"X-Forwarded-For", func(client string) http.Header {
			return http.Header{"X-Forwarded-For": {client}}
		}},
	} {
		t.Run(c.header, func(t *testing.T) {
			d := start(t, "--trusted-proxy", "127.0.0.9/32", "--client-address-header", c.header,
				"--login-failure-address-limit", fmt.Sprint(failures))
			proxy := from("127.0.0.9")
			rssBefore := d.rssKiB()
			login := func(o attack.Operator, good bool, client string, spoof string) (int, string) {
				ch, err := d.api("127.0.0.10").Challenge(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				l := signedLogin(t, o, ch.Challenge)
				if !good {
					l.Signature = "1111111111111111111111111111111111111111111111111111111111111111"
				}
				h := c.proxy(client)
				if spoof != "" {
					// The client's own header: for Forwarded, an X-Forwarded-For; for
					// X-Forwarded-For, an earlier hop the proxy appends after.
					if c.header == "Forwarded" {
						h.Set("X-Forwarded-For", spoof)
					} else {
						h.Set("X-Forwarded-For", spoof+", "+client)
					}
				}
				return d.post(proxy, "/v1/auth/device-login", l, h)
			}
			attacker, honestOp := newOperator(t), newOperator(t)
			codes := map[string]int{}
			for i := range 4 * failures {
				_, code := login(attacker, false, "198.51.100.7:5555", fmt.Sprintf("203.0.113.%d", i+1))
				codes[code]++
			}
			if codes[string(proto.BadSignature)] != failures || codes[string(proto.RateLimited)] != 3*failures {
				t.Fatalf("failed logins from one client naming itself in a header of its own: %v; want %d failures, then RATE_LIMITED", codes, failures)
			}
			// Its correct login is refused too: the budget is its own.
			if _, code := login(attacker, true, "198.51.100.7:6000", "192.0.2.1"); code != string(proto.RateLimited) {
				t.Fatalf("the spender's correct login: %q; want RATE_LIMITED", code)
			}
			// Another client of the same proxy, IPv6 in brackets with a port, logs in.
			if status, code := login(honestOp, true, "[2001:db8:1:2::1]:443", ""); status != http.StatusOK {
				t.Fatalf("an honest client behind the proxy: %d %s", status, code)
			}
			if status, code := login(honestOp, true, "198.51.100.8:5555", ""); status != http.StatusOK {
				t.Fatalf("an honest IPv4 client behind the proxy, with a port: %d %s", status, code)
			}
			if rssAfter := d.rssKiB(); rssAfter-rssBefore > 64<<10 {
				t.Fatalf("RSS grew by %d KiB", rssAfter-rssBefore)
			}
			t.Logf("behind a proxy writing %s: the spoofing client's logins %v; honest clients logged in", c.header, codes)
		})
	}
}
