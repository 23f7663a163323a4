package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// The abuse scenario: for each way of attacking the registry that the abuse suite covers
// (rows 1–10), a fresh daemon with its default limits serves honest operators logging in
// and honest nodes sending heartbeats, first alone and then while the row's attack runs, and
// the two sets of latencies are reported side by side with the daemon's peak resident set.
// For the rows that grow the store (1, 2 and 9) a second daemon then holds as many honest
// records as the attack got accepted, and its peak is the reference for the attack's.
//
// Unlike the other scenarios, requests are signed as they are sent, by the registry's own Go
// client, and honest and attacking clients send from many loopback addresses (127.2.x.y and
// 127.1.x.y) so that per-address limits see them as the strangers they would be.

// abuseRow is one attack.
type abuseRow struct {
	n    int
	what string
	// flags, added to svrpd serve's, change a default limit that setup could not live with.
	flags []string
	// setup runs before the honest baseline; attack runs until stop is closed, sending from
	// as many goroutines as it likes, and counts its answers in a.
	setup  func(a *abuseRun) error
	attack func(a *abuseRun, stop <-chan struct{})
	// reference, for rows that grow the store, puts count honest records into a fresh daemon.
	reference func(a *abuseRun, count int) error
	// accepted reads, after the attack, how many records it made the registry keep.
	accepted func(a *abuseRun) int
}

// abuseRun is one row's daemon and clients.
type abuseRun struct {
	b        *bench
	ctx      context.Context
	d        *benchDaemon
	url      string
	nodes    []*client.Node // honest nodes, registered in setup
	nodeKeys []ed25519.PrivateKey
	op       abuseOperator // the honest operator
	codes    sync.Map      // answer code → *atomic.Int64, for the attack's requests
	sent     atomic.Int64
	state    any // what setup leaves for the attack
	onHold   []net.Conn

	mu      sync.Mutex
	clients map[string]*client.Client // one per source address, so connections are reused
}

type abuseOperator struct {
	device ed25519.PrivateKey
	cred   authn.DeviceCredential
}

// abuseAddr is the i-th address of a group: 127.<group>.x.y.
func abuseAddr(group, i int) string {
	return fmt.Sprintf("127.%d.%d.%d", group, i/250%250, i%250+1)
}

const (
	honestGroup = 2 // honest clients: 127.2.x.y
	attackGroup = 1 // attackers: 127.1.x.y
	// abusePhase is how long each phase (honest alone, honest under attack) runs.
	abusePhase = 5 * time.Second
	// honestWorkers log in and heartbeat concurrently; each pauses honestPause between
	// rounds, as honest clients do not hammer.
	honestWorkers = 4
	honestPause   = 5 * time.Millisecond
	honestNodes   = 200
)

func abuseHTTP(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
}

func (a *abuseRun) client(ip string) *client.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[ip]; ok {
		return c
	}
	c, _ := client.New(a.url, client.WithHTTPClient(abuseHTTP(ip)), client.WithRetry(client.RetryPolicy{}), client.WithPrefix(a.b.cfg.prefix))
	if a.clients == nil {
		a.clients = map[string]*client.Client{}
	}
	a.clients[ip] = c
	return c
}

func (a *abuseRun) count(err error) {
	a.sent.Add(1)
	code := string(client.CodeOf(err))
	if err == nil {
		code = "200"
	}
	v, _ := a.codes.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (a *abuseRun) countCode(status int, code string) {
	a.sent.Add(1)
	if status == http.StatusOK {
		code = "200"
	}
	v, _ := a.codes.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (a *abuseRun) answers() map[string]int64 {
	out := map[string]int64{}
	a.codes.Range(func(k, v any) bool { out[k.(string)] = v.(*atomic.Int64).Load(); return true })
	return out
}

func newAbuseOperator() (abuseOperator, error) {
	_, root, _ := ed25519.GenerateKey(rand.Reader)
	dpub, device, _ := ed25519.GenerateKey(rand.Reader)
	cred, err := client.IssueDeviceCredential(root, dpub, client.CredentialOptions{IssuedAt: time.Now().Add(-time.Minute)})
	return abuseOperator{device: device, cred: cred}, err
}

func (a *abuseRun) newNode(c *client.Client) *client.Node {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	n, _ := client.NewNode(c, key, didkey.FormShort)
	return n
}

// spawnAbuse starts a daemon with its default limits, but for what flags change.
func (b *bench) spawnAbuse(ctx context.Context, flags ...string) (*abuseRun, func(), error) {
	dir, err := os.MkdirTemp("", "svrpd-bench-abuse-")
	if err != nil {
		return nil, nil, err
	}
	level, _ := daemon.ParseLevel(b.cfg.logLevel)
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data", dir, "--prefix", b.cfg.prefix, "--log-level", "info", "--log-format", "text"}
	if b.cfg.cpuProfile != "" {
		args = append(args, "--debug-listen", "127.0.0.1:0")
	}
	args = append(args, flags...)
	d, err := spawnDaemon(ctx, b.start, b.daemonBin, args, b.stderr, level, daemonServeTimeout)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	a := &abuseRun{b: b, ctx: ctx, d: d, url: "http://" + d.addr}
	return a, func() {
		for _, c := range a.onHold {
			c.Close()
		}
		if err := d.stop(); err != nil {
			fmt.Fprintf(b.stderr, "svrpd bench: %v\n", err)
			b.stopFailed = true
		}
		os.RemoveAll(dir)
	}, nil
}

// honestSetup registers the honest nodes and makes the honest operator.
func (a *abuseRun) honestSetup() error {
	var err error
	if a.op, err = newAbuseOperator(); err != nil {
		return err
	}
	for i := range honestNodes {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		n, err := a.addHonestNode(key)
		if err != nil {
			return err
		}
		if _, err := n.Register(a.ctx, fmt.Sprintf("198.51.100.%d:7000", i%250+1), []string{"inference"}, ""); err != nil {
			return fmt.Errorf("registering honest node %d: %w", i, err)
		}
	}
	return nil
}

// addHonestNode adds the honest node of key, sending from an address of its own.
func (a *abuseRun) addHonestNode(key ed25519.PrivateKey) (*client.Node, error) {
	n, err := client.NewNode(a.client(abuseAddr(honestGroup, 1000+len(a.nodes))), key, didkey.FormShort)
	if err != nil {
		return nil, err
	}
	a.nodes = append(a.nodes, n)
	a.nodeKeys = append(a.nodeKeys, key)
	return n, nil
}

// honestPhase runs the honest workers for d and returns their login and heartbeat latencies
// and failures. Logins rotate over many addresses, as many operators would.
func (a *abuseRun) honestPhase(d time.Duration, salt int) (login, beat *histogram, failed map[string]int64) {
	login, beat = &histogram{}, &histogram{}
	failed = map[string]int64{}
	var mu sync.Mutex
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range honestWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && a.ctx.Err() == nil; i++ {
				c := a.client(abuseAddr(honestGroup, (salt*honestWorkers+w)*50+i%50))
				t0 := time.Now()
				_, lerr := c.Login(a.ctx, a.op.device, a.op.cred)
				lt := time.Since(t0)
				n := a.nodes[(w*97+i)%len(a.nodes)]
				t1 := time.Now()
				_, herr := n.Heartbeat(a.ctx)
				ht := time.Since(t1)
				mu.Lock()
				login.record(lt)
				beat.record(ht)
				for _, e := range []error{lerr, herr} {
					if e != nil {
						failed[string(client.CodeOf(e))]++
					}
				}
				mu.Unlock()
				time.Sleep(honestPause)
			}
		}()
	}
	wg.Wait()
	return login, beat, failed
}

// abuseResult is one row's figures.
type abuseResult struct {
	Row                 int              `json:"row"`
	What                string           `json:"what"`
	LoginP50Base        float64          `json:"login_p50_ms_without"`
	LoginP99Base        float64          `json:"login_p99_ms_without"`
	LoginP50Attack      float64          `json:"login_p50_ms_under_attack"`
	LoginP99Attack      float64          `json:"login_p99_ms_under_attack"`
	BeatP50Base         float64          `json:"heartbeat_p50_ms_without"`
	BeatP99Base         float64          `json:"heartbeat_p99_ms_without"`
	BeatP50Attack       float64          `json:"heartbeat_p50_ms_under_attack"`
	BeatP99Attack       float64          `json:"heartbeat_p99_ms_under_attack"`
	LoginP99Ratio       float64          `json:"login_p99_ratio"`
	BeatP99Ratio        float64          `json:"heartbeat_p99_ratio"`
	HonestFailures      map[string]int64 `json:"honest_failures_under_attack"`
	AttackSent          int64            `json:"attack_requests"`
	AttackAnswers       map[string]int64 `json:"attack_answers"`
	DaemonPeakMB        float64          `json:"daemon_rss_peak_mb"`
	Accepted            int              `json:"accepted_records,omitempty"`
	ReferencePeakMB     float64          `json:"reference_rss_peak_mb,omitempty"`
	PeakOverReference   float64          `json:"peak_over_reference,omitempty"`
	IdleCPUPercent      *float64         `json:"idle_cpu_percent,omitempty"`
	AttackSetupFailures string           `json:"setup_error,omitempty"`
}

// runAbuse runs every row in turn.
func (b *bench) runAbuse(ctx context.Context) ([]abuseResult, error) {
	var out []abuseResult
	rows, err := pickAbuseRows(abuseRows(), b.cfg.abuseRows)
	if err != nil {
		return nil, err
	}
	for _, row := range rows {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		fmt.Fprintf(b.text, "\nrow %d: %s\n", row.n, row.what)
		res, err := b.runAbuseRow(ctx, row)
		if err != nil {
			return out, fmt.Errorf("row %d: %w", row.n, err)
		}
		b.reportAbuse(res)
		out = append(out, *res)
	}
	return out, nil
}

// pickAbuseRows returns the rows named in list ("1,3"), or all of them when list is empty.
func pickAbuseRows(all []abuseRow, list string) ([]abuseRow, error) {
	if list == "" {
		return all, nil
	}
	var out []abuseRow
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		i := slices.IndexFunc(all, func(r abuseRow) bool { return r.n == n })
		if err != nil || i < 0 {
			return nil, fmt.Errorf("--abuse-rows: %q is not a row of the abuse suite (1 to %d)", f, len(all))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func (b *bench) runAbuseRow(ctx context.Context, row abuseRow) (*abuseResult, error) {
	a, stop, err := b.spawnAbuse(ctx, row.flags...)
	if err != nil {
		return nil, err
	}
	// stop is replaced once the rows that need a reference daemon have stopped this one.
	defer func() { stop() }()
	res := &abuseResult{Row: row.n, What: row.what}
	if row.n == 10 {
		// Idle cost first, before anything is stored or sent.
		time.Sleep(2 * time.Second)
		const idle = 10 * time.Second
		c0, err := processCPU(a.d.pid)
		if err != nil {
			return nil, err
		}
		time.Sleep(idle)
		c1, err := processCPU(a.d.pid)
		if err != nil {
			return nil, err
		}
		p := round(100*(c1-c0).Seconds()/idle.Seconds(), 3)
		res.IdleCPUPercent = &p
	}
	if err := a.honestSetup(); err != nil {
		return nil, err
	}
	if row.setup != nil {
		if err := row.setup(a); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}
	base, err := a.honestElsewhere(abusePhase, 0)
	if err != nil {
		return nil, err
	}
	before, err := a.d.memory()
	if err != nil {
		return nil, err
	}
	watch := a.d.watchPeak(before)
	stopProfile := func() error { return nil }
	if b.cfg.cpuProfile != "" {
		// The daemon's profile of the attack window, one file a row.
		path := fmt.Sprintf("%s.row%d", b.cfg.cpuProfile, row.n)
		if stopProfile, err = startDaemonProfile(ctx, a.d.debugAddr, path, abusePhase); err != nil {
			return nil, err
		}
	}
	halt := make(chan struct{})
	attacked := make(chan struct{})
	go func() {
		defer close(attacked)
		if row.attack != nil {
			row.attack(a, halt)
		}
	}()
	under, err := a.honestElsewhere(abusePhase, 1)
	close(halt)
	<-attacked
	if err != nil {
		return nil, err
	}
	if err := stopProfile(); err != nil {
		return nil, err
	}
	peak, _, _, _, err := watch.finish()
	if err != nil {
		return nil, err
	}
	res.LoginP50Base, res.LoginP99Base = ms(base.LoginP50), ms(base.LoginP99)
	res.LoginP50Attack, res.LoginP99Attack = ms(under.LoginP50), ms(under.LoginP99)
	res.BeatP50Base, res.BeatP99Base = ms(base.BeatP50), ms(base.BeatP99)
	res.BeatP50Attack, res.BeatP99Attack = ms(under.BeatP50), ms(under.BeatP99)
	if res.LoginP99Base > 0 {
		res.LoginP99Ratio = round(res.LoginP99Attack/res.LoginP99Base, 2)
	}
	if res.BeatP99Base > 0 {
		res.BeatP99Ratio = round(res.BeatP99Attack/res.BeatP99Base, 2)
	}
	res.HonestFailures = under.Failed
	res.AttackSent = a.sent.Load()
	res.AttackAnswers = a.answers()
	res.DaemonPeakMB = peak
	if row.accepted != nil && row.reference != nil {
		res.Accepted = row.accepted(a)
		stop()
		stop = func() {}
		ref, refStop, err := b.spawnAbuse(ctx)
		if err != nil {
			return nil, err
		}
		defer refStop()
		rb, err := ref.d.memory()
		if err != nil {
			return nil, err
		}
		w := ref.d.watchPeak(rb)
		if err := ref.honestSetup(); err != nil {
			return nil, err
		}
		if err := row.reference(ref, res.Accepted); err != nil {
			return nil, fmt.Errorf("reference: %w", err)
		}
		ref.honestPhase(abusePhase, 2)
		rp, _, _, _, err := w.finish()
		if err != nil {
			return nil, err
		}
		res.ReferencePeakMB = rp
		if rp > 0 {
			res.PeakOverReference = round(peak/rp, 2)
		}
	}
	return res, nil
}

func (b *bench) reportAbuse(r *abuseResult) {
	fmt.Fprintf(b.text, "  honest login      p50 %7.2f ms  p99 %7.2f ms  without;  p50 %7.2f ms  p99 %7.2f ms  under attack (p99 ×%.2f)\n",
		r.LoginP50Base, r.LoginP99Base, r.LoginP50Attack, r.LoginP99Attack, r.LoginP99Ratio)
	fmt.Fprintf(b.text, "  honest heartbeat  p50 %7.2f ms  p99 %7.2f ms  without;  p50 %7.2f ms  p99 %7.2f ms  under attack (p99 ×%.2f)\n",
		r.BeatP50Base, r.BeatP99Base, r.BeatP50Attack, r.BeatP99Attack, r.BeatP99Ratio)
	fmt.Fprintf(b.text, "  attack: %d requests, answers %v; honest failures under attack %v\n", r.AttackSent, r.AttackAnswers, r.HonestFailures)
	fmt.Fprintf(b.text, "  daemon peak RSS %.1f MB", r.DaemonPeakMB)
	if r.ReferencePeakMB > 0 {
		fmt.Fprintf(b.text, "; an honest registry holding the %d accepted records peaks at %.1f MB (×%.2f)", r.Accepted, r.ReferencePeakMB, r.PeakOverReference)
	}
	if r.IdleCPUPercent != nil {
		fmt.Fprintf(b.text, "; idle CPU %.3f %% of a core", *r.IdleCPUPercent)
	}
	fmt.Fprintln(b.text)
	line, _ := json.Marshal(r)
	fmt.Fprintln(b.stdout, string(line))
}

// flood runs fn from workers goroutines until stop is closed.
func flood(workers int, stop <-chan struct{}, fn func(w, i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}

func (a *abuseRun) nodeCount() int {
	h, err := a.client("127.0.0.1").Health(a.ctx)
	if err != nil {
		fmt.Fprintf(a.b.stderr, "svrpd bench: abuse: counting nodes: %v\n", err)
		return 0
	}
	return h.Count
}

func abuseRows() []abuseRow {
	hugeSig := strings.Repeat("<", 63<<10) // with the rest, just under the 64 KiB body limit
	registerHonest := func(a *abuseRun, count int) error {
		var next atomic.Int64
		return parallelN(8, func(w int) error {
			for i := next.Add(1); i <= int64(count); i = next.Add(1) {
				// 500 keys per address, under the 600 an address may register per hour.
				n := a.newNode(a.client(abuseAddr(3, int(i/500))))
				if _, err := n.Register(a.ctx, "203.0.113.1:7000", []string{"inference"}, ""); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return []abuseRow{
		{n: 1, what: "unsigned registrations with a 63 KB signature from one address, and listings with many online_within values",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				c := a.client(abuseAddr(attackGroup, 1))
				hc := abuseHTTP(abuseAddr(attackGroup, 1))
				flood(4, stop, func(w, i int) {
					if w == 0 {
						// One listing reader per distinct filter value.
						_, err := c.Nodes(a.ctx, api.NodeFilter{OnlineWithin: time.Duration(i%600+1) * time.Second})
						a.count(err)
						return
					}
					// Written by hand: the Go client would escape each '<' as six bytes.
					n := a.newNode(c)
					did, _ := didkey.NodeDID(n.PublicKey(), didkey.FormShort)
					body := `{"did":"` + did.String() + `","public_key":"` + n.PublicKey().Hex() + `","endpoint":"203.0.113.1:7000","capabilities":[],"signature":"` + hugeSig + `"}`
					res, err := hc.Post(a.url+"/api/v1/register", "application/json", strings.NewReader(body))
					if err != nil {
						a.count(err)
						return
					}
					var e struct{ Code string }
					json.NewDecoder(res.Body).Decode(&e)
					res.Body.Close()
					a.countCode(res.StatusCode, e.Code)
				})
			},
			accepted:  func(a *abuseRun) int { return a.nodeCount() - honestNodes },
			reference: registerHonest,
		},
		{n: 2, what: "binding initiates with a fresh key each, from one address and then 40",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				flood(8, stop, func(w, i int) {
					c := a.client(abuseAddr(attackGroup, w*5+i/200%5))
					_, err := a.newNode(c).Initiate(a.ctx, client.InitiateOptions{})
					a.count(err)
				})
			},
			accepted: func(a *abuseRun) int { return int(a.answers()["200"]) },
			reference: func(a *abuseRun, count int) error {
				var next atomic.Int64
				return parallelN(8, func(w int) error {
					for i := next.Add(1); i <= int64(count); i = next.Add(1) {
						c := a.client(abuseAddr(3, int(i/100)))
						if _, err := a.newNode(c).Initiate(a.ctx, client.InitiateOptions{}); err != nil {
							return err
						}
					}
					return nil
				})
			},
		},
		{n: 3, what: "one key with 1,000 finished sessions, then 8 threads initiating and cancelling for it",
			// Room in the key's initiate budget for its history, and for 100 more.
			flags: []string{"--initiate-key-limit", "1100"},
			setup: func(a *abuseRun) error {
				n := a.newNode(a.client(abuseAddr(attackGroup, 0)))
				for i := range 1000 {
					c := a.client(abuseAddr(attackGroup, i/100))
					me := &client.Node{Client: c, Key: n.Key, DID: n.DID}
					s, err := me.Initiate(a.ctx, client.InitiateOptions{})
					if err != nil {
						return err
					}
					if _, err := me.Cancel(a.ctx, s.BindingSessionID); err != nil {
						return err
					}
				}
				a.state = n
				return nil
			},
			attack: func(a *abuseRun, stop <-chan struct{}) {
				n := a.state.(*client.Node)
				flood(8, stop, func(w, i int) {
					me := &client.Node{Client: a.client(abuseAddr(attackGroup, 100+w*10+i/100%10)), Key: n.Key, DID: n.DID}
					s, err := me.Initiate(a.ctx, client.InitiateOptions{})
					a.count(err)
					if err == nil {
						_, err = me.Cancel(a.ctx, s.BindingSessionID)
						a.count(err)
					}
				})
			},
		},
		{n: 4, what: "idle keep-alive connections, as many as 64 addresses can open",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				host := a.d.addr
				for i := 0; i < 64*80; i++ {
					select {
					case <-stop:
						return
					default:
					}
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(abuseAddr(attackGroup, i%64))}, Timeout: time.Second}
					c, err := d.Dial("tcp", host)
					a.sent.Add(1)
					if err != nil {
						a.count(err)
						continue
					}
					fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: svrpd\r\n\r\n")
					a.onHold = append(a.onHold, c)
				}
				<-stop
			},
		},
		{n: 5, what: "garbage login signatures with a self-made identity, from one address",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				mallory, _ := newAbuseOperator()
				c := a.client(abuseAddr(attackGroup, 1))
				flood(4, stop, func(w, i int) {
					ch, err := c.Challenge(a.ctx)
					if err != nil {
						a.count(err)
						return
					}
					_, err = c.DeviceLogin(a.ctx, authn.Login{DeviceCredential: mallory.cred, Challenge: ch.Challenge,
						IssuedAt: canonical.FormatTime(time.Now()), Signature: "1111111111111111111111111111111111111111111111111111111111111111"})
					a.count(err)
				})
			},
		},
		{n: 6, what: "wrong short codes from 1,000 addresses with one bearer",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				mallory, _ := newAbuseOperator()
				o, err := a.client(abuseAddr(attackGroup, 1)).Login(a.ctx, mallory.device, mallory.cred)
				if err != nil {
					a.count(err)
					return
				}
				flood(8, stop, func(w, i int) {
					c := a.client(abuseAddr(attackGroup, (w*125+i)%1000))
					_, err := c.Resolve(a.ctx, o.Token, api.ResolveRequest{ShortCode: abuseCode(w*1_000_000 + i)})
					a.count(err)
				})
			},
		},
		{n: 7, what: "an honest node's registration, copied and re-posted from many addresses",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				views, err := a.client("127.0.0.1").Nodes(a.ctx, api.NodeFilter{})
				if err != nil || len(views) == 0 {
					a.count(err)
					return
				}
				v := views[0]
				region := ""
				if v.Region != nil {
					region = *v.Region
				}
				req := api.RegisterRequest{DID: v.DID, PublicKey: v.PublicKey, Endpoint: v.Endpoint, Capabilities: v.Capabilities, Region: region, Signature: v.Signature}
				flood(4, stop, func(w, i int) {
					_, err := a.client(abuseAddr(attackGroup, w*100+i%100)).Register(a.ctx, req)
					a.count(err)
				})
			},
		},
		{n: 8, what: "a captured heartbeat replayed by a third party",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				n := a.nodes[0]
				ts := time.Now().Unix()
				did, _ := didkey.NodeDID(n.PublicKey(), didkey.FormShort)
				sig, _ := canonical.Sign(n.Key, a.b.cfg.prefix, canonical.Heartbeat{DID: did.String(), TS: ts})
				req := api.HeartbeatRequest{DID: did.String(), TS: ts, Signature: sig}
				flood(4, stop, func(w, i int) {
					_, err := a.client(abuseAddr(attackGroup, w*100+i%100)).Heartbeat(a.ctx, req)
					a.count(err)
				})
			},
		},
		{n: 9, what: "signed registrations of fresh keys spread over 400 addresses",
			attack: func(a *abuseRun, stop <-chan struct{}) {
				flood(8, stop, func(w, i int) {
					c := a.client(abuseAddr(attackGroup, (w*50+i)%400))
					_, err := a.newNode(c).Register(a.ctx, "203.0.113.1:7000", []string{"inference"}, "")
					a.count(err)
				})
			},
			accepted:  func(a *abuseRun) int { return a.nodeCount() - honestNodes },
			reference: registerHonest,
		},
		{n: 10, what: "nothing: an idle daemon (idle CPU measured before setup), then honest load alone"},
	}
}

// abuseCode is the i-th of a sequence of well-formed short codes, none of them issued.
func abuseCode(i int) string {
	const a = binding.ShortCodeAlphabet
	b := []byte("ZZZZZZZZ")
	for j := range 6 {
		b[j] = a[i%len(a)]
		i /= len(a)
	}
	return string(b)
}

// parallelN runs fn(0..n-1) concurrently and returns the first error.
func parallelN(n int, fn func(w int) error) error {
	errs := make(chan error, n)
	for w := range n {
		go func() { errs <- fn(w) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
