package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/client"
)

// TestLogCommands runs svrpd log verify and svrpd log monitor against a real daemon: the key
// printed at start is the one the commands pin, an entry a registration's answer named
// verifies, and a monitoring pass finds the registry as its log says.
func TestLogCommands(t *testing.T) {
	bin := svrpdtest.Binary(t)
	work := t.TempDir()
	daemon := svrpdtest.Start(t, nil, "--data", filepath.Join(work, "data"))
	cli := &cliRunner{t: t, bin: bin, dir: work, env: svrpdtest.Env("SVRPD_REGISTRY=" + daemon.URL)}

	c, err := client.New(daemon.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := client.NewNode(c, testkit.LabelKey(t, "node"), didkey.FormShort)
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Register(t.Context(), "203.0.113.5:7000", nil, "")
	if err != nil || res.LogIndex == nil {
		t.Fatalf("register = %+v, %v", res, err)
	}
	key := match(t, daemon.Log.String(), `log_key=(\S+)`)
	state := filepath.Join(work, "log.json")

	out := cli.ok("log", "verify", "--log-key", key, "--state", state, "0")
	if !strings.Contains(out, "entry 0: node "+n.DID+", in the log, every signature verifies") {
		t.Errorf("log verify:\n%s", out)
	}
	out = cli.ok("log", "monitor", "--state", state)
	if !strings.Contains(out, "replayed: 1 node DIDs") || !strings.Contains(out, "the registry serves what its log says") {
		t.Errorf("log monitor:\n%s", out)
	}
	if _, stderr, exit := cli.run(nil, "log", "verify", "--log-key", strings.Replace(key, "log/", "other/", 1), "--state", state, "0"); exit != 1 || !strings.Contains(stderr, "not the key kept") {
		t.Errorf("another key than the one kept: exit %d, %s", exit, stderr)
	}
}
