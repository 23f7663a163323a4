package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/client"
)

// At the default log level, a busy registry writes nothing per request or per node: 10,000
// registrations and as many heartbeats write no line beyond the start's.
func TestQuietByDefault(t *testing.T) {
	testkit.Heavy(t)
	const nodes, workers = 10_000, 8
	var logs testkit.Buffer
	c := serveConfig(t)
	c.Limits.RegisterAddressLimit = nodes
	c.Limits.MaxNodesPerClient, c.Limits.MaxNodesPerBlock, c.Limits.MaxNodesPerNetwork = nodes, nodes, nodes
	c.MetricsListen = ""
	if c.LogLevel != "info" {
		t.Fatalf("serveConfig's level is %q, not the flag's default", c.LogLevel)
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
	// Let a heartbeat flush and its log, if any, happen.
	time.Sleep(2 * registry.DefaultFlushEvery)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	t.Logf("%d lines at start, %d after %d registrations and %d heartbeats", atStart, len(lines), nodes, nodes)
	if during := len(lines) - atStart; during > 0 {
		t.Errorf("%d lines written under load, want none:\n%s", during, strings.Join(lines[atStart:], "\n"))
	}
	if len(lines) > 5 {
		t.Errorf("%d lines in all, want a handful:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
