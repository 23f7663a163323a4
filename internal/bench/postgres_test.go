package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/svrpdtest"
)

// --postgres measures each scenario on Badger, on PostgreSQL with one daemon in this process,
// and on two svrpd serve processes sharing the database with the clients split between them,
// and reports the statements per operation of both PostgreSQL runs.
func TestBenchPostgresTwoDaemons(t *testing.T) {
	url := pgtest.URL(t)
	if testing.Short() {
		t.Skip("builds svrpd and runs the load generator")
	}
	bin := svrpdtest.Binary(t)
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{
		"--postgres", url, "--spawn-binary", bin, "--scenario", "heartbeat", "--nodes", "50", "--clients", "4",
		"--duration", "300ms", "--ceiling-time", "0", "--json",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var targets []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var res benchResult
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("a result line is not JSON: %v\n%s", err, sc.Text())
		}
		targets = append(targets, res.Target)
		if res.Ops <= 0 || res.Errors != 0 {
			t.Errorf("%s: ops %d, errors %d %v; want some ops and no error", res.Target, res.Ops, res.Errors, res.ErrorsByCode)
		}
		if onPG := res.Target != "self-badger"; onPG != (res.StatementsPerOp != nil) {
			t.Errorf("%s: statements per op %v", res.Target, res.StatementsPerOp)
		}
		// The two daemons' CPU is theirs to report; without a ceiling there is no ratio.
		if spawned := res.Target == "spawn-postgres-2"; spawned != (res.ServerCPUS != nil && *res.ServerCPUS > 0) || res.CPUVsVerify != nil {
			t.Errorf("%s: server CPU %v s, cpu_vs_verify %v", res.Target, res.ServerCPUS, res.CPUVsVerify)
		}
	}
	if want := []string{"self-badger", "self-postgres", "spawn-postgres-2"}; !slices.Equal(targets, want) {
		t.Errorf("targets %q, want %q", targets, want)
	}
}
