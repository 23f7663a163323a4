package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/client"
)

// At the default log level, a busy registry writes nothing per request or per node: 2,000
// registrations, as many heartbeats and the heartbeat flushes after them write no line beyond
// the start's. A line per request or per node would be thousands of lines at this count as
// at any larger one, so the count is kept to what shows that.
func TestQuietByDefault(t *testing.T) {
	testkit.Heavy(t)
	const nodes, workers = 2_000, 8
	var logs testkit.Buffer
	c := serveConfig(t)
	c.Limits.RegisterAddressLimit = nodes
	c.Limits.MaxNodesPerClient, c.Limits.MaxNodesPerBlock, c.Limits.MaxNodesPerNetwork = nodes, nodes, nodes
	if c.LogLevel != "info" || c.MetricsListen != MetricsOnMain {
		t.Fatalf("serveConfig's level is %q and its metrics %q, not the flags' defaults", c.LogLevel, c.MetricsListen)
	}
	base := serveLogged(t, c, NewLogger(&logs, c.LogLevel, c.LogFormat))
	atStart := strings.Count(logs.String(), "\n")

	errs := make(chan error, workers)
	testkit.Together(workers, func(w int) {
		cl, err := client.New(base)
		if err != nil {
			errs <- err
			return
		}
		ctx := context.Background()
		for i := w; i < nodes; i += workers {
			n, err := client.NewNode(cl, testkit.IndexKey(i), didkey.FormShort)
			if err == nil {
				_, err = n.Register(ctx, fmt.Sprintf("203.0.113.%d:%d", i%250+1, 1024+i), []string{"inference"}, "")
			}
			if err == nil {
				_, err = n.Heartbeat(ctx)
			}
			if err != nil {
				errs <- fmt.Errorf("node %d: %w", i, err)
				return
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Flushes run one after another, each counted when it ends and logging after that. Of
	// those counted from now, the second started after the last heartbeat, so it made them
	// all durable; once the third is counted, the second has logged whatever it had to.
	flushes := func() float64 {
		n, _ := sample(scrape(t, base+"/metrics"), "svrpd_heartbeat_flush_duration_seconds_count", nil)
		return n
	}
	after := flushes() + 3
	for deadline := time.Now().Add(testkit.WaitBound); flushes() < after; time.Sleep(c.FlushEvery / 4) {
		if time.Now().After(deadline) {
			t.Fatalf("no two heartbeat flushes within %v of the load's end", testkit.WaitBound)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	t.Logf("%d lines at start, %d after %d registrations and %d heartbeats", atStart, len(lines), nodes, nodes)
	if during := len(lines) - atStart; during > 0 {
		t.Errorf("%d lines written under load, want none:\n%s", during, strings.Join(lines[atStart:], "\n"))
	}
	if len(lines) > 5 {
		t.Errorf("%d lines in all, want a handful:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
