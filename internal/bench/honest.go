package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/svrp/svrp/authn"
)

// The honest clients of the abuse scenario run in a process of their own, started for each
// phase: in the bench's process they would share its Go scheduler with the attack's
// goroutines, and their latency would count the attack's own work as the registry's. As
// their own process they compete with the attacker and the daemon for the cores as three
// processes would on the kernel's terms, which favour the client that sleeps between
// requests.

// honestSpec is what one honest phase needs: the registry, the honest operator and nodes,
// and how long to run.
type honestSpec struct {
	URL        string                 `json:"url"`
	Prefix     string                 `json:"prefix"`
	Phase      time.Duration          `json:"phase"`
	Salt       int                    `json:"salt"`
	Device     []byte                 `json:"device_seed"`
	Credential authn.DeviceCredential `json:"credential"`
	Nodes      [][]byte               `json:"node_seeds"`
}

// honestReport is what one honest phase measured.
type honestReport struct {
	LoginP50, LoginP99 time.Duration
	BeatP50, BeatP99   time.Duration
	Failed             map[string]int64
}

// honestElsewhere runs one honest phase in a child process (this executable's bench with
// --abuse-honest) and returns what it measured.
func (a *abuseRun) honestElsewhere(d time.Duration, salt int) (honestReport, error) {
	spec := honestSpec{URL: a.url, Prefix: a.b.cfg.prefix, Phase: d, Salt: salt,
		Device: a.op.device.Seed(), Credential: a.op.cred}
	for _, k := range a.nodeKeys {
		spec.Nodes = append(spec.Nodes, k.Seed())
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return honestReport{}, err
	}
	cmd := exec.CommandContext(a.ctx, a.b.daemonBin, "bench", "--abuse-honest")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = a.b.stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	err = a.b.start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return honestReport{}, fmt.Errorf("the honest clients' process: %w", err)
	}
	var r honestReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return honestReport{}, fmt.Errorf("the honest clients' process answered %q: %w", out.Bytes(), err)
	}
	return r, nil
}

// runHonest is "svrpd bench --abuse-honest": one honest phase from the spec on stdin, its
// report as JSON on stdout.
func runHonest(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec honestSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintf(stderr, "svrpd bench --abuse-honest: reading the spec: %v\n", err)
		return 2
	}
	a := &abuseRun{b: &bench{cfg: benchConfig{prefix: spec.Prefix}}, ctx: ctx, url: spec.URL,
		op: abuseOperator{device: ed25519.NewKeyFromSeed(spec.Device), cred: spec.Credential}}
	for i, seed := range spec.Nodes {
		if _, err := a.addHonestNode(ed25519.NewKeyFromSeed(seed)); err != nil {
			fmt.Fprintf(stderr, "svrpd bench --abuse-honest: node %d: %v\n", i, err)
			return 1
		}
	}
	login, beat, failed := a.honestPhase(spec.Phase, spec.Salt)
	err := json.NewEncoder(stdout).Encode(honestReport{
		LoginP50: login.quantile(0.5), LoginP99: login.quantile(0.99),
		BeatP50: beat.quantile(0.5), BeatP99: beat.quantile(0.99), Failed: failed,
	})
	if err != nil {
		fmt.Fprintf(stderr, "svrpd bench --abuse-honest: %v\n", err)
		return 1
	}
	return 0
}
