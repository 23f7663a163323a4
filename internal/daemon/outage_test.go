package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/postgres"
)

// outageEnv turns on the test that stops the machine's PostgreSQL cluster: every other test
// on that server fails while it is down, so CI runs it and a developer asks for it.
const outageEnv = "SVRPD_TEST_PG_OUTAGE"

// outageFor is how long the cluster stays stopped.
const outageFor = 3 * time.Second

// pgCluster stops and starts the local PostgreSQL cluster with pg_ctlcluster.
type pgCluster struct{ version string }

func localCluster(t *testing.T) pgCluster {
	t.Helper()
	if os.Getenv(outageEnv) != "1" {
		t.Skipf("%s=1 is not set: the test that stops PostgreSQL is skipped", outageEnv)
	}
	needRoot(t, "stopping PostgreSQL")
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		t.Skip("pg_ctlcluster is not installed")
	}
	versions, _ := filepath.Glob("/etc/postgresql/*")
	if len(versions) != 1 {
		t.Skipf("want one PostgreSQL version under /etc/postgresql, found %v", versions)
	}
	return pgCluster{filepath.Base(versions[0])}
}

func (c pgCluster) ctl(action string) error {
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", c.version, "main", action).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctlcluster %s: %v: %s", action, err, out)
	}
	return nil
}

// running reports whether the cluster answers.
func (c pgCluster) running() bool {
	return exec.Command("pg_isready", "-q", "-h", "127.0.0.1").Run() == nil
}

// outageLedger is what the writers and the readiness probe saw, with when.
type outageLedger struct {
	mu       sync.Mutex
	acked    []didkey.PublicKey
	statuses map[int]int
	noRetry  int // 503s without Retry-After
	written  []time.Time
	refused  []time.Time // 503s
	ready    []readyProbe
}

type readyProbe struct {
	at     time.Time
	status int
}

// recorder is the writers' transport: it notes every answer's status and Retry-After.
type recorder struct{ l *outageLedger }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.URL.Path == "/ready" {
		return res, err
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.statuses[res.StatusCode]++
	if res.StatusCode == http.StatusServiceUnavailable {
		r.l.refused = append(r.l.refused, time.Now())
		if res.Header.Get("Retry-After") == "" {
			r.l.noRetry++
		}
	}
	return res, nil
}

// TestPostgresOutage stops the PostgreSQL cluster for a few seconds while four writers
// register nodes through a daemon (see runOutage).
func TestPostgresOutage(t *testing.T) {
	cluster := localCluster(t)
	url := pgtest.Schema(t)
	// Registered after the schema's cleanup, so run before it: the cluster is started again
	// whatever happened.
	t.Cleanup(func() {
		if !cluster.running() {
			if err := cluster.ctl("start"); err != nil {
				t.Errorf("restarting PostgreSQL: %v", err)
			}
		}
	})
	runOutage(t, url, func() error { return cluster.ctl("stop") }, func() error { return cluster.ctl("start") })
}

// TestPostgresConnectionsCut is the outage as the daemon sees it, without stopping the
// server: its connections go through a proxy that cuts them all and refuses new ones for a
// few seconds.
func TestPostgresConnectionsCut(t *testing.T) {
	url := pgtest.Schema(t)
	px := newCutProxy(t, "127.0.0.1:5432")
	runOutage(t, strings.Replace(url, "127.0.0.1:5432", px.addr(), 1), px.cut, px.restore)
}

// runOutage serves a daemon on the database at url while four writers register nodes,
// calls down, waits outageFor and calls up, and checks that no answer is a 500, that
// writes are refused with 503 and Retry-After while the database is down, that /ready
// follows, that writes are taken again within 2 s of the database being back, and that
// every acknowledged registration is in the database.
func runOutage(t *testing.T, url string, down, up func() error) {
	c := serveConfig(t)
	c.DataDir, c.Postgres, c.MetricsListen = "", url, ""
	c.Limits.RegisterAddressLimit = 1_000_000
	c.Limits.MaxNodesPerClient, c.Limits.MaxNodesPerBlock, c.Limits.MaxNodesPerNetwork = 1_000_000, 1_000_000, 1_000_000
	var logs testkit.Buffer
	base := serveLogged(t, c, NewLogger(&logs, c.LogLevel, c.LogFormat))

	l := &outageLedger{statuses: map[int]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := client.New(base, client.WithHTTPClient(&http.Client{Transport: recorder{l}, Timeout: 10 * time.Second}), client.WithRetry(client.RetryPolicy{}))
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := testkit.IndexKey(w*1_000_000 + i)
				n, err := client.NewNode(cl, key, didkey.FormShort)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := n.Register(context.Background(), fmt.Sprintf("203.0.113.%d:%d", w+1, 1024+i), nil, ""); err == nil {
					l.mu.Lock()
					l.acked = append(l.acked, n.PublicKey())
					l.written = append(l.written, time.Now())
					l.mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			res, err := http.Get(base + "/ready")
			if err != nil {
				continue
			}
			res.Body.Close()
			l.mu.Lock()
			l.ready = append(l.ready, readyProbe{time.Now(), res.StatusCode})
			l.mu.Unlock()
		}
	}()

	time.Sleep(time.Second)
	stopped := time.Now()
	if err := down(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	downAt := time.Now()
	time.Sleep(outageFor)
	if err := up(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	backAt := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("stop took %v, start took %v; answers by status %v; %d acknowledged", downAt.Sub(stopped).Round(time.Millisecond), backAt.Sub(downAt.Add(outageFor)).Round(time.Millisecond), l.statuses, len(l.acked))
	if n := l.statuses[http.StatusInternalServerError]; n > 0 {
		t.Errorf("%d answers were 500", n)
	}
	for status, n := range l.statuses {
		if status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Errorf("%d answers were %d", n, status)
		}
	}
	if l.noRetry > 0 {
		t.Errorf("%d answers 503 had no Retry-After", l.noRetry)
	}
	if len(inWindow(l.refused, downAt, backAt)) == 0 {
		t.Error("no write was refused with 503 while the database was down")
	}
	firstWrite := after(l.written, backAt)
	if firstWrite.IsZero() {
		t.Fatal("no write was taken after the database came back")
	}
	t.Logf("writes back %v after the database", firstWrite.Sub(backAt).Round(time.Millisecond))
	if d := firstWrite.Sub(backAt); d > 2*time.Second {
		t.Errorf("writes came back %v after the database, want within 2 s", d)
	}
	var notReady, readyAgain bool
	var readyAt time.Time
	for _, p := range l.ready {
		if p.at.After(downAt.Add(time.Second)) && p.at.Before(backAt) && p.status == http.StatusServiceUnavailable {
			notReady = true
		}
		if p.at.After(backAt) && p.status == http.StatusOK && readyAt.IsZero() {
			readyAgain, readyAt = true, p.at
		}
	}
	if !notReady {
		t.Error("/ready never answered 503 while the database was down")
	}
	if !readyAgain {
		t.Error("/ready did not answer 200 after the database came back")
	} else {
		t.Logf("/ready back %v after the database", readyAt.Sub(backAt).Round(time.Millisecond))
	}
	t.Logf("the daemon's log:\n%s", logs.String())
	if !strings.Contains(logs.String(), `msg="store reachable again"`) {
		t.Error("the log does not say the store is back")
	}
	if n := strings.Count(logs.String(), "\n"); n > 20 {
		t.Errorf("the outage wrote %d log lines, want a few:\n%s", n, logs.String())
	}

	// Every acknowledged registration is in the database.
	p, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	missing := 0
	err = p.View(context.Background(), func(tx store.Tx) error {
		for _, k := range l.acked {
			if _, err := tx.Node(k); err != nil {
				missing++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged registrations are not in the database", missing, len(l.acked))
	}
}

// inWindow returns the times in ts between from and to.
func inWindow(ts []time.Time, from, to time.Time) []time.Time {
	var out []time.Time
	for _, t := range ts {
		if t.After(from) && t.Before(to) {
			out = append(out, t)
		}
	}
	return out
}

// after returns the first of ts after from, or the zero time.
func after(ts []time.Time, from time.Time) time.Time {
	var first time.Time
	for _, t := range ts {
		if t.After(from) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// cutProxy forwards TCP connections to a server until cut, which closes every one of them
// and refuses new ones until restore.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			continue
		}
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// track records a pair of connections, or closes them when the proxy was cut meanwhile.
func (p *cutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cutProxy) cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	return nil
}

func (p *cutProxy) restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	return nil
}
