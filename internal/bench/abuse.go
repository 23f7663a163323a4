package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/pause"
	"github.com/svrp/svrp/registry/client"
)

// The abuse scenario: for each row of the abuse suite, a fresh daemon with its default limits
// serves honest operators logging in and honest nodes sending heartbeats, first alone and then
// while the row's attack runs, and the two sets of latencies are reported side by side with
// the daemon's peak resident set. The attack shares this machine with the daemon, as the
// honest clients do; in the field its sending would cost its own machines.

const (
	// abusePhase is how long each phase (honest alone, honest under attack) runs.
	abusePhase = 5 * time.Second
	// honestWorkers log in and heartbeat concurrently, each pausing honestPause between
	// rounds, as honest clients do not hammer.
	honestWorkers = 4
	honestPause   = 5 * time.Millisecond
	honestNodes   = 200
)

func pickRows(list string) ([]attack.Row, error) {
	rows, err := attack.Pick(list)
	if err != nil {
		return nil, fmt.Errorf("--abuse-rows: %w", err)
	}
	return rows, nil
}

// abuse runs every chosen row in turn.
func (b *bench) abuse(ctx context.Context) error {
	rows, err := pickRows(b.cfg.abuseRows)
	if err != nil {
		return err
	}
	for _, row := range rows {
		fmt.Fprintf(b.text, "\nrow %d: %s\n", row.N, row.What)
		res, err := b.abuseRow(ctx, row)
		if err != nil {
			return fmt.Errorf("row %d: %w", row.N, err)
		}
		b.print(res)
	}
	return nil
}

func (b *bench) abuseRow(ctx context.Context, row attack.Row) (*result, error) {
	flags := slices.Clone(row.Flags)
	var certPEM []byte
	if row.TLS {
		dir, err := os.MkdirTemp("", "svrpd-bench-tls-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		var args []string
		if args, certPEM, err = attack.SelfSigned(dir); err != nil {
			return nil, fmt.Errorf("the daemon's certificate: %w", err)
		}
		flags = append(flags, args...)
	}
	t, err := b.target(ctx, 16, flags)
	if err != nil {
		return nil, err
	}
	// stop is replaced once a row that needs a reference daemon has stopped this one.
	stop := t.stop
	defer func() { stop() }()
	tg, err := newTarget(t.base, b.cfg.prefix, certPEM)
	if err != nil {
		return nil, err
	}
	res := &result{Scenario: fmt.Sprintf("abuse row %d", row.N), Target: t.label, Figures: map[string]float64{}}
	if row.N == 10 {
		// Idle cost first, before anything is stored or sent.
		pause.For(ctx, 2*time.Second)
		share, err := t.d.cpuOver(ctx, 10*time.Second)
		if err != nil {
			return nil, err
		}
		res.Figures["idle_cpu_percent"] = round(100*share, 3)
	}
	hs, err := b.honestSetup(ctx, tg, certPEM)
	if err != nil {
		return nil, err
	}
	var state any
	if row.Setup != nil {
		if state, err = row.Setup(ctx, tg); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}
	alone, err := b.honestElsewhere(ctx, hs, "", 0)
	if err != nil {
		return nil, err
	}
	nodes := tg.Nodes(ctx)
	t.d.resetPeak()
	halt := make(chan struct{})
	attacked := make(chan struct{})
	var mu sync.Mutex
	answers := map[string]int64{}
	held := make(chan struct{})
	go func() {
		defer close(attacked)
		if row.Attack != nil {
			row.Attack(ctx, tg, state, halt, func(a attack.Answer) {
				mu.Lock()
				answers[a.Outcome()]++
				if row.Holds > 0 && a.Outcome() == "200" && answers["200"] == int64(row.Holds) {
					close(held)
				}
				mu.Unlock()
			})
		}
	}()
	if row.Holds > 0 {
		if err := holding(ctx, held, attacked); err != nil {
			close(halt)
			<-attacked
			return nil, err
		}
	}
	under, err := b.honestElsewhere(ctx, hs, " under attack", 1)
	close(halt)
	<-attacked
	if err != nil {
		return nil, err
	}
	_, peak, err := t.d.memory()
	if err != nil {
		return nil, err
	}
	stored := 0
	if row.Stored != nil {
		stored = row.Stored(ctx, tg, answers, nodes)
		res.Figures["stored_records"] = float64(stored)
	}
	// The attack as a phase: its ops are the requests answered 200, the rest are by answer.
	took := under[0].DurationS
	accepted := answers["200"]
	delete(answers, "200")
	res.Phases = append(append(alone, under...), phase{Name: "attack", Ops: accepted, OpsPerS: round(float64(accepted)/took, 1), Failed: answers, DurationS: took})
	res.setRatio("login_p99_ratio", under[0].P99ms, alone[0].P99ms)
	res.setRatio("heartbeat_p99_ratio", under[1].P99ms, alone[1].P99ms)
	res.Figures["daemon_peak_mb"] = peak
	if row.Stored == nil {
		return res, nil
	}
	stop()
	stop = func() {}
	ref, err := b.target(ctx, 16, nil)
	if err != nil {
		return nil, err
	}
	defer ref.stop()
	rtg := attack.NewTarget(ref.base, b.cfg.prefix)
	ref.d.resetPeak()
	rhs, err := b.honestSetup(ctx, rtg, nil)
	if err != nil {
		return nil, err
	}
	if err := row.Reference(ctx, rtg, stored); err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	if _, err := b.honestElsewhere(ctx, rhs, "", 2); err != nil {
		return nil, err
	}
	_, rpeak, err := ref.d.memory()
	if err != nil {
		return nil, err
	}
	res.Figures["reference_peak_mb"] = rpeak
	res.setRatio("peak_over_reference", peak, rpeak)
	return res, nil
}

// holdBound bounds the wait for an attack's connections to open; holdSettle is the wait
// after, in which the answers the connections asked for as they opened are written.
const (
	holdBound  = 30 * time.Second
	holdSettle = time.Second
)

// holding waits until the attack holds its connections (held is closed) and holdSettle more.
func holding(ctx context.Context, held, attacked <-chan struct{}) error {
	t := time.NewTimer(holdBound)
	defer t.Stop()
	select {
	case <-held:
	case <-attacked:
		return errors.New("the attack stopped before it held its connections")
	case <-t.C:
		return fmt.Errorf("the attack did not hold its connections within %v", holdBound)
	case <-ctx.Done():
		return ctx.Err()
	}
	return pause.For(ctx, holdSettle)
}

// honestSpec is what one honest phase needs: the registry, the honest operator and nodes,
// and how long to run.
type honestSpec struct {
	URL        string        `json:"url"`
	Prefix     string        `json:"prefix"`
	Phase      time.Duration `json:"phase"`
	Salt       int           `json:"salt"`
	Suffix     string        `json:"suffix"`
	Operator   []byte        `json:"device_seed"`
	Credential []byte        `json:"credential"`
	Nodes      [][]byte      `json:"node_seeds"`
	Cert       []byte        `json:"cert,omitempty"` // the daemon's, in PEM, when it serves TLS
}

// newTarget is the registry at url, its clients trusting certPEM when it serves TLS.
func newTarget(url, prefix string, certPEM []byte) (*attack.Target, error) {
	tg := attack.NewTarget(url, prefix)
	if certPEM != nil {
		tc, err := attack.Trusting(certPEM)
		if err != nil {
			return nil, err
		}
		tg.TLS = tc
	}
	return tg, nil
}

// honestSetup makes the honest operator and registers the honest nodes, each from an address
// of its own; certPEM is the daemon's certificate when it serves TLS.
func (b *bench) honestSetup(ctx context.Context, tg *attack.Target, certPEM []byte) (honestSpec, error) {
	op, err := attack.NewOperator()
	if err != nil {
		return honestSpec{}, err
	}
	cred, err := json.Marshal(op.Credential)
	if err != nil {
		return honestSpec{}, err
	}
	hs := honestSpec{URL: tg.URL, Prefix: tg.Prefix, Operator: op.Device.Seed(), Credential: cred, Cert: certPEM}
	for i := range honestNodes {
		n, err := attack.FreshNode(tg.Client(attack.Addr(attack.Honest, 1000+i)))
		if err != nil {
			return honestSpec{}, err
		}
		if _, err := n.Register(ctx, fmt.Sprintf("198.51.100.%d:7000", i%250+1), []string{"inference"}, ""); err != nil {
			return honestSpec{}, fmt.Errorf("registering honest node %d: %w", i, err)
		}
		hs.Nodes = append(hs.Nodes, n.Key.Seed())
	}
	return hs, nil
}

// honestBinary is the svrpd whose bench runs the honest clients: this executable, which speaks
// this bench's spec whatever build --spawn-binary serves; tests, whose executable is not
// svrpd, set it.
var honestBinary string

// honestElsewhere runs one honest phase in a child process (svrpd bench --abuse-honest) and
// returns its login and heartbeat phases. As a process of their own, the honest clients do
// not share bench's Go scheduler with the attack's goroutines, whose work would otherwise
// count in their latency.
func (b *bench) honestElsewhere(ctx context.Context, hs honestSpec, suffix string, salt int) ([]phase, error) {
	hs.Phase, hs.Salt, hs.Suffix = abusePhase, salt, suffix
	in, err := json.Marshal(hs)
	if err != nil {
		return nil, err
	}
	bin := honestBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, bin, "bench", "--abuse-honest")
	cmd.Env = daemonEnv()
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = b.stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the honest clients' process: %w", err)
	}
	var phases []phase
	if err := json.Unmarshal(out.Bytes(), &phases); err != nil || len(phases) != 2 {
		return nil, fmt.Errorf("the honest clients' process answered %q: %v", out.Bytes(), err)
	}
	return phases, nil
}

// runHonest is "svrpd bench --abuse-honest": one honest phase from the spec on stdin, its
// login and heartbeat phases as JSON on stdout. Logins rotate over many addresses, as many
// operators would.
func runHonest(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	var hs honestSpec
	var op attack.Operator
	err := json.NewDecoder(stdin).Decode(&hs)
	if err == nil {
		err = json.Unmarshal(hs.Credential, &op.Credential)
	}
	if err != nil {
		fmt.Fprintf(stderr, "svrpd bench --abuse-honest: reading the spec: %v\n", err)
		return 2
	}
	op.Device = ed25519.NewKeyFromSeed(hs.Operator)
	tg, err := newTarget(hs.URL, hs.Prefix, hs.Cert)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd bench --abuse-honest: %v\n", err)
		return 2
	}
	var nodes []*client.Node
	for i, seed := range hs.Nodes {
		n, err := client.NewNode(tg.Client(attack.Addr(attack.Honest, 1000+i)), ed25519.NewKeyFromSeed(seed), didkey.FormShort)
		if err != nil {
			fmt.Fprintf(stderr, "svrpd bench --abuse-honest: node %d: %v\n", i, err)
			return 1
		}
		nodes = append(nodes, n)
	}
	var mu sync.Mutex
	var login, beat latencies
	failed := [2]map[string]int64{{}, {}}
	deadline := time.Now().Add(hs.Phase)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range honestWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				c := tg.Client(attack.Addr(attack.Honest, (hs.Salt*honestWorkers+w)*50+i%50))
				t0 := time.Now()
				_, lerr := op.Login(ctx, c)
				lt := time.Since(t0)
				t1 := time.Now()
				// Each worker beats nodes of its own, as each node runs one heartbeat loop: two
				// workers beating one node could deliver its later ts first, and the earlier
				// one would then be refused as stale, which no honest node sees.
				_, herr := nodes[w+honestWorkers*((i*97)%(len(nodes)/honestWorkers))].Heartbeat(ctx)
				ht := time.Since(t1)
				mu.Lock()
				login, beat = append(login, lt), append(beat, ht)
				for k, e := range []error{lerr, herr} {
					if e != nil {
						failed[k][string(client.CodeOf(e))]++
					}
				}
				mu.Unlock()
				time.Sleep(honestPause)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	var phases []phase
	for k, l := range []latencies{login, beat} {
		slices.Sort(l)
		p := phase{Name: []string{"honest login", "honest heartbeat"}[k] + hs.Suffix, DurationS: round(elapsed, 3),
			P50ms: ms(l.quantile(0.5)), P99ms: ms(l.quantile(0.99))}
		if len(failed[k]) > 0 {
			p.Failed = failed[k]
		}
		p.Ops = int64(len(l)) - p.failures()
		p.OpsPerS = round(float64(p.Ops)/elapsed, 1)
		phases = append(phases, p)
	}
	if err := json.NewEncoder(stdout).Encode(phases); err != nil {
		fmt.Fprintf(stderr, "svrpd bench --abuse-honest: %v\n", err)
		return 1
	}
	return 0
}
