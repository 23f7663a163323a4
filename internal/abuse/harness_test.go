// Package abuse holds the abuse suite: one test per way a stranger could try to exhaust the
// registry, each against a real svrpd process on Badger in a temporary directory, sending from
// many loopback source addresses (Linux routes all of 127.0.0.0/8 to lo). Each test is
// bounded in requests and time and asserts that the bound holds: the documented answer beyond
// a limit, nothing changed by a refused request, resources within bounds, and honest requests
// made during the attack answered.
//
// The attacks themselves — each row's setup, its requests and the bound it checks — are in
// package attack, which the tests here send with lowered limits and svrpd bench's abuse
// scenario floods a daemon with. A new row goes there, with a TestRow<N> test here.
package abuse

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/registry/client"
)

func TestMain(m *testing.M) { svrpdtest.Main(m) }

// daemon is a running svrpd serve.
type daemon struct {
	*svrpdtest.Daemon
	t    *testing.T
	data string
	// tg sends the attack rows' requests (package attack) to it.
	tg *attack.Target
}

// start runs svrpd serve on Badger in a temporary directory with the given extra flags and
// returns once it serves; the test's end stops it. Refusals are answered at once: the
// bounds must hold for an attacker that does not wait for its answers, which the refusal
// delay does not slow.
func start(t *testing.T, flags ...string) *daemon {
	t.Helper()
	return startOn(t, filepath.Join(t.TempDir(), "data"), flags...)
}

// startOn is start on the data directory data, which may hold a store already.
func startOn(t *testing.T, data string, flags ...string) *daemon {
	t.Helper()
	p := svrpdtest.Start(t, nil, append([]string{"--data", data, "--log-level", "info", "--log-format", "text", "--refusal-delay", "0"}, flags...)...)
	t.Cleanup(p.Stop)
	return &daemon{Daemon: p, t: t, data: data, tg: attack.NewTarget(p.URL, "")}
}

// restart stops d and runs svrpd serve again on its store with flags, in place of the
// flags it ran with.
func (d *daemon) restart(flags ...string) *daemon {
	d.t.Helper()
	d.Stop()
	return startOn(d.t, d.data, flags...)
}

// wholeCap is svrpd serve's flags that lower the cap of the table named table ("nodes",
// "bearer-sessions", "binding-sessions") to n and raise its quotas per client, block and
// network to the whole cap: for a row that reaches a global cap from one network, which the
// quotas, shares of the cap by default, would otherwise stop first.
func wholeCap(table string, n int) []string {
	out := []string{fmt.Sprintf("--max-%s", table), fmt.Sprint(n)}
	for _, level := range []string{"client", "block", "network"} {
		out = append(out, fmt.Sprintf("--max-%s-per-%s", table, level), fmt.Sprint(n))
	}
	return out
}

// lines returns the log lines that contain every one of parts.
func (d *daemon) lines(parts ...string) []string {
	var out []string
	for _, l := range d.Log.Lines() {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			out = append(out, l)
		}
	}
	return out
}

// from returns an HTTP client whose connections leave from the loopback address ip.
func from(ip string) *http.Client { return attack.From(ip) }

// addr is the i-th attacker address, 127.1.x.y; honest clients use 127.0.0.x.
func addr(i int) string { return attack.Addr(attack.Attackers, i) }

// api returns a registry client that sends from ip and never retries.
func (d *daemon) api(ip string) *client.Client {
	d.t.Helper()
	c, err := client.New(d.URL, client.WithHTTPClient(from(ip)), client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// honest returns a registry client that sends from ip on a new connection for every
// request, and never retries: an honest client whose idle connection the daemon cut at its
// connection cap under a flood (docs/protocol.md §8.1) would dial again, which the rows that
// assert every honest request answered must not count as a refusal.
func (d *daemon) honest(ip string) *client.Client {
	d.t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	c, err := client.New(d.URL, client.WithHTTPClient(hc), client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// post sends body as JSON and returns the status and the error code of the answer.
func (d *daemon) post(hc *http.Client, path string, body any, header http.Header) (int, string) {
	d.t.Helper()
	a := d.target().Send(d.t.Context(), hc, http.MethodPost, path, body, header)
	if a.Status == 0 {
		d.t.Fatalf("POST %s: %s", path, a.Code)
	}
	return a.Status, a.Code
}

// rssKiB is the daemon's resident set, in KiB.
func (d *daemon) rssKiB() int {
	d.t.Helper()
	rss, _ := d.memory(d.t)
	return int(rss >> 10)
}

// diskBytes is what the data directory occupies on disk (allocated blocks, so that
// Badger's sparse preallocated files count for what they hold).
func (d *daemon) diskBytes() int64 {
	d.t.Helper()
	var n int64
	filepath.Walk(d.data, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// newOperator is a fresh operator identity: anyone can make one.
func newOperator(t *testing.T) attack.Operator {
	t.Helper()
	o, err := attack.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// newNode is a fresh node key on c.
func newNode(t *testing.T, c *client.Client) *client.Node {
	t.Helper()
	n, err := attack.FreshNode(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// honest runs fn every interval, as the honest client making requests while an attack runs,
// until the stop it returns is called. stop waits for the run in progress, fails the test if
// any run failed (what names the runs) and returns how many ran.
func honest(t *testing.T, what string, interval time.Duration, fn func() error) (stop func() (ran int)) {
	quit := make(chan struct{})
	var mu sync.Mutex
	var f, r int
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := fn()
			mu.Lock()
			r++
			if err != nil {
				f++
				if firstErr == nil {
					firstErr = err
				}
			}
			mu.Unlock()
			select {
			case <-quit:
				return
			case <-time.After(interval):
			}
		}
	}()
	return func() int {
		t.Helper()
		close(quit)
		<-done
		mu.Lock()
		defer mu.Unlock()
		if f > 0 {
			t.Fatalf("%d of %d %s failed: %v", f, r, what, firstErr)
		}
		return r
	}
}
