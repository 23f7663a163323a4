package cli

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
)

// The walkthrough of the README, as a person with two terminals runs it: every step is a
// separate svrpd process, talking to a real daemon over a Badger store.
func TestCLIWalkthrough(t *testing.T) {
	bin := svrpdtest.Binary(t)
	work := t.TempDir()
	daemon := svrpdtest.Start(t, nil, "--data", filepath.Join(work, "data"))
	url := daemon.URL
	cli := &cliRunner{t: t, bin: bin, dir: work, env: svrpdtest.Env("SVRPD_REGISTRY=" + url)}
	opDir := filepath.Join(work, "operator")
	nodeKey := filepath.Join(work, "node.seed")

	// Terminal 1, the operator: an identity, then a session.
	prepared := filepath.Join(work, "revoke-laptop.json")
	out := cli.ok("operator", "init", "--dir", opDir, "--prepare-revocation", prepared)
	opDID := match(t, out, `operator DID:\s+(did:svrp:o:[0-9a-f]{8})`)
	revocationID := match(t, out, `revocation_id: (\S+) \(revokes this device credential`)
	if !strings.Contains(out, "NOT been sent") || !strings.Contains(out, "svrpd operator revoke --send "+prepared) {
		t.Errorf("init does not say the prepared revocation is unsent and how to send it:\n%s", out)
	}
	wantMode(t, prepared, 0o600)
	for _, f := range []string{"root.seed", "device.seed"} {
		wantMode(t, filepath.Join(opDir, f), 0o600)
	}
	out = cli.ok("operator", "login", "--dir", opDir)
	if got := match(t, out, `logged in as (\S+)`); got != opDID {
		t.Fatalf("logged in as %s, want %s", got, opDID)
	}
	wantMode(t, filepath.Join(opDir, "session"), 0o600)

	// Terminal 2, the node: a key, then the node running in the background.
	out = cli.ok("keygen", "--out", nodeKey)
	nodeDID := match(t, out, `did:\s+(did:svrp:n:[0-9a-f]{8})\n`)
	fingerprint := match(t, out, `fingerprint:\s+([0-9a-f]{4}(?::[0-9a-f]{4}){3})`)
	wantMode(t, nodeKey, 0o600)
	if _, stderr, code := cli.run(nil, "keygen", "--out", nodeKey); code != 1 || !strings.Contains(stderr, "--force") {
		t.Errorf("keygen over an existing key: exit %d, stderr %q; want 1 and a --force hint", code, stderr)
	}

	runner := cli.start(nil, "node", "run", "--key", nodeKey, "--endpoint", "127.0.0.1:9000", "--capability", "inference", "--every", "1s")
	runner.stdout.waitFor(t, `registered: endpoint 127\.0\.0\.1:9000 \(private\), signed=true`)
	runner.stdout.waitFor(t, `heartbeat: last_seen`)

	bind := cli.start(nil, "node", "bind", "--key", nodeKey, "--yes", "--poll", "100ms",
		"--task-type", "inference", "--single-limit", "10", "--daily-limit", "100")
	code := bind.stdout.waitFor(t, `short code:\s+([2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4})`)[1]
	if got := bind.stdout.waitFor(t, `node DID:\s+(\S+)`)[1]; got != nodeDID {
		t.Fatalf("node bind shows node DID %s beside the code, keygen printed %s", got, nodeDID)
	}
	if got := bind.stdout.waitFor(t, `fingerprint:\s+(\S+)`)[1]; got != fingerprint {
		t.Fatalf("node bind shows fingerprint %s, keygen printed %s", got, fingerprint)
	}
	bind.stdout.waitFor(t, regexp.QuoteMeta("svrpd operator resolve "+code+" --node "+nodeDID+" --dir DIR"))

	// Terminal 1: resolve the code, compare the fingerprint, authorize. The node's DID is
	// required and sent: naming another node, the right code is not found (and stays
	// usable: one failure is under the code's limit).
	if _, stderr, exit := cli.run(nil, "operator", "resolve", code, "--dir", opDir); exit != 2 || !strings.Contains(stderr, "--node DID is required") {
		t.Errorf("resolve without --node: exit %d, stderr %q; want 2 and --node required", exit, stderr)
	}
	otherDID := match(t, cli.ok("keygen", "--out", filepath.Join(work, "other.seed")), `did:\s+(did:svrp:n:[0-9a-f]{8})\n`)
	if _, stderr, exit := cli.run(nil, "operator", "resolve", code, "--node", otherDID, "--dir", opDir); exit != 1 || !strings.Contains(stderr, "NOT_FOUND") {
		t.Errorf("resolve naming another node: exit %d, stderr %q; want 1 and NOT_FOUND", exit, stderr)
	}
	out = cli.ok("operator", "resolve", code, "--node", nodeDID, "--dir", opDir)
	if got := match(t, out, `FINGERPRINT:\s+(\S+)`); got != fingerprint {
		t.Fatalf("operator sees fingerprint %s, the node shows %s", got, fingerprint)
	}
	if got := match(t, out, `node:\s+(\S+)`); got != nodeDID {
		t.Errorf("operator sees node %s, want %s", got, nodeDID)
	}
	for _, want := range []string{"task types:    inference", "single limit:  10", "daily limit:   100"} {
		if !strings.Contains(out, want) {
			t.Errorf("resolve output lacks %q:\n%s", want, out)
		}
	}
	out = cli.ok("operator", "authorize", "--dir", opDir)
	if !strings.Contains(out, "PENDING_NODE_ACCEPTANCE") {
		t.Errorf("authorize output:\n%s", out)
	}

	// Terminal 2: node bind shows the terms, accepts (--yes) and ends.
	if exit := bind.wait(t); exit != 0 {
		t.Fatalf("node bind exited %d\nstdout:\n%s\nstderr:\n%s", exit, bind.stdout, bind.stderr)
	}
	bound := bind.stdout.String()
	for _, want := range []string{"operator:      " + opDID, "single limit:  10", "binding ACTIVE: " + nodeDID + " is bound to " + opDID} {
		if !strings.Contains(bound, want) {
			t.Errorf("node bind output lacks %q:\n%s", want, bound)
		}
	}

	// Terminal 1: the node is listed, online, with its limits.
	out = cli.ok("operator", "nodes", "--dir", opDir)
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(nodeDID) + `\s+yes\s+\S+Z\s+inference\s+10\s+100\s+127\.0\.0\.1:9000$`)
	if !strings.Contains(out, "1 bound node") || !row.MatchString(out) {
		t.Errorf("operator nodes output:\n%s", out)
	}
	out = cli.ok("operator", "credits", "--dir", opDir)
	for _, want := range []string{"NOT YET WIRED: amounts are placeholders", "not cash", "never added up"} {
		if !strings.Contains(out, want) {
			t.Errorf("credits output lacks %q:\n%s", want, out)
		}
	}
	out = cli.ok("operator", "evidence", "--dir", opDir)
	if !strings.Contains(out, "count:     0") || !strings.Contains(out, "unknown") {
		t.Errorf("evidence output:\n%s", out)
	}

	// A used code fails with its protocol code and a hint, exit 1.
	_, stderr, exit := cli.run(nil, "operator", "resolve", code, "--node", nodeDID, "--dir", opDir)
	if exit != 1 || !strings.Contains(stderr, "NOT_FOUND") || !strings.Contains(stderr, "hint:") {
		t.Errorf("resolving a used code: exit %d, stderr %q", exit, stderr)
	}

	// Leaving, from the node's side: node bind named the session to unbind.
	session := match(t, bound, `svrpd node unbind (\S+) --key`)
	out = cli.ok("node", "unbind", session, "--key", nodeKey)
	if !strings.Contains(out, "unbound "+nodeDID+" from "+opDID) || !strings.Contains(out, "by the node") {
		t.Errorf("node unbind output:\n%s", out)
	}
	if out = cli.ok("operator", "nodes", "--dir", opDir); !strings.Contains(out, "0 bound nodes") {
		t.Errorf("after node unbind, operator nodes:\n%s", out)
	}
	if _, stderr, exit := cli.run(nil, "node", "unbind", session, "--key", nodeKey); exit != 1 || !strings.Contains(stderr, "BAD_STATE") {
		t.Errorf("unbinding twice: exit %d, stderr %q", exit, stderr)
	}

	// bindAgain runs node bind and the operator's side once more, returning the node's output.
	bindAgain := func() string {
		t.Helper()
		b := cli.start(nil, "node", "bind", "--key", nodeKey, "--yes", "--poll", "100ms", "--task-type", "inference")
		m := b.stdout.waitFor(t, `short code:\s+([2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4})\n\s+node DID:\s+(\S+)`)
		cli.ok("operator", "resolve", m[1], "--node", m[2], "--dir", opDir)
		cli.ok("operator", "authorize", "--dir", opDir)
		if exit := b.wait(t); exit != 0 {
			t.Fatalf("node bind exited %d\n%s\n%s", exit, b.stdout, b.stderr)
		}
		return b.stdout.String()
	}

	// From the operator's side, by the node's DID in its full spelling.
	bindAgain()
	out = cli.ok("operator", "unbind", fullNodeDID(t, nodeKey), "--dir", opDir)
	if !strings.Contains(out, "unbound "+nodeDID) || !strings.Contains(out, "by the operator") {
		t.Errorf("operator unbind output:\n%s", out)
	}
	if out = cli.ok("operator", "nodes", "--dir", opDir); !strings.Contains(out, "0 bound nodes") {
		t.Errorf("after operator unbind, operator nodes:\n%s", out)
	}

	// The laptop is lost: the revocation prepared at init is sent, no login needed.
	third := match(t, bindAgain(), `svrpd node unbind (\S+) --key`)
	out = cli.ok("operator", "revoke", "--send", prepared)
	for _, want := range []string{"revoked: credentials of " + opDID + " carrying revocation_id " + revocationID, "can no longer log in (DC_REVOKED)",
		"bearer sessions ended: 1", "bindings ended (1)", nodeDID + "  (binding session " + third + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("revoke output lacks %q:\n%s", want, out)
		}
	}
	if out = cli.ok("operator", "revoke", "--send", prepared); !strings.Contains(out, "already revoked") {
		t.Errorf("revoking twice:\n%s", out)
	}
	if _, stderr, exit := cli.run(nil, "operator", "nodes", "--dir", opDir); exit != 1 || !strings.Contains(stderr, "NO_SESSION") {
		t.Errorf("the revoked device's session: exit %d, stderr %q", exit, stderr)
	}
	if _, stderr, exit := cli.run(nil, "operator", "login", "--dir", opDir); exit != 1 || !strings.Contains(stderr, "DC_REVOKED") || !strings.Contains(stderr, "--root") {
		t.Errorf("the revoked device's login: exit %d, stderr %q", exit, stderr)
	}
	// A new device of the same operator, vouched for by the same root key, works.
	newDir := filepath.Join(work, "phone")
	out = cli.ok("operator", "init", "--dir", newDir, "--root", filepath.Join(opDir, "root.seed"))
	if got := match(t, out, `operator DID:\s+(\S+)`); got != opDID {
		t.Fatalf("the new device is for %s, want %s", got, opDID)
	}
	if _, err := os.Stat(filepath.Join(newDir, "root.seed")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("init --root copied the root key: %v", err)
	}
	cli.ok("operator", "login", "--dir", newDir)
	if out = cli.ok("operator", "nodes", "--dir", newDir); !strings.Contains(out, "0 bound nodes") {
		t.Errorf("after the revocation, operator nodes:\n%s", out)
	}
	// A revocation prepared from the directory, without sending it.
	out = cli.ok("operator", "revoke", "--dir", newDir, "--root", filepath.Join(opDir, "root.seed"), "--out", filepath.Join(work, "revoke-phone.json"))
	if !strings.Contains(out, "NOT been sent") {
		t.Errorf("revoke --out output:\n%s", out)
	}
	cli.ok("operator", "nodes", "--dir", newDir)
	out = cli.ok("operator", "logout", "--dir", newDir)
	if !strings.Contains(out, "logged out "+opDID) || !strings.Contains(out, "ended at the registry") {
		t.Errorf("logout output:\n%s", out)
	}
	if _, stderr, exit := cli.run(nil, "operator", "nodes", "--dir", newDir); exit != 1 || !strings.Contains(stderr, "NO_SESSION") {
		t.Errorf("after logout: exit %d, stderr %q", exit, stderr)
	}

	// Stopping: the node on SIGTERM, then the daemon, both cleanly.
	if exit := runner.stop(t); exit != 0 || !strings.Contains(runner.stdout.String(), "stopped") {
		t.Errorf("node run exited %d on SIGTERM\n%s", exit, runner.stdout)
	}
	if exit := daemon.Signal(t, syscall.SIGTERM); exit != 0 {
		t.Errorf("svrpd serve exited %d on SIGTERM\n%s", exit, daemon.Log)
	}

	// No secret reached any output: not the session token, not a seed, not the code in the
	// daemon's log.
	var s savedSession
	if b, err := os.ReadFile(filepath.Join(opDir, "session")); err != nil || json.Unmarshal(b, &s) != nil || s.Token == "" {
		t.Fatalf("reading the session file: %v", err)
	}
	secrets := map[string]string{"session token": s.Token}
	for name, f := range map[string]string{"root seed": filepath.Join(opDir, "root.seed"), "device seed": filepath.Join(opDir, "device.seed"), "node seed": nodeKey} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = strings.TrimSpace(string(b))
	}
	all := cli.transcript() + daemon.Log.String()
	for name, v := range secrets {
		if strings.Contains(all, v) {
			t.Errorf("the %s appears in the output", name)
		}
	}
	if strings.Contains(daemon.Log.String(), strings.ReplaceAll(code, "-", "")) {
		t.Error("the short code appears in the daemon's log")
	}
}

// fullNodeDID is the full spelling of the DID of the node whose seed file is path.
func fullNodeDID(t *testing.T, path string) string {
	t.Helper()
	key, err := readSeed(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	k, err := didkey.KeyFromEd25519(key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := didkey.NodeDID(k, didkey.FormFull)
	return d.String()
}

// stepTimeout bounds one step of the walkthrough; every step normally takes well under a
// second.
const stepTimeout = 30 * time.Second

// output collects what a process writes, safe to read while it runs.
type output struct{ testkit.Buffer }

// waitFor polls the output until it matches pattern, and returns the submatches.
func (o *output) waitFor(t *testing.T, pattern string) []string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(stepTimeout)
	for {
		if m := re.FindStringSubmatch(o.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output matching %q within %v; got:\n%s", pattern, stepTimeout, o.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proc is a process running in the background, with what it prints.
type proc struct {
	*svrpdtest.Process
	stdout, stderr *output
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(stepTimeout):
		t.Fatalf("%s did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.Cmd.Args, stepTimeout, p.stdout, p.stderr)
		return -1
	}
}

// stop sends SIGTERM and waits for the exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	p.Send(t, syscall.SIGTERM)
	return p.wait(t)
}

func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{stdout: &output{}, stderr: &output{}}
	if cmd.Stdout == nil {
		cmd.Stdout = p.stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.stderr
	}
	p.Process = svrpdtest.StartProcess(t, cmd)
	return p
}

// cliRunner runs svrpd commands and keeps everything they print.
type cliRunner struct {
	t   *testing.T
	bin string
	dir string
	env []string

	mu  sync.Mutex
	all []*output
}

func (c *cliRunner) command(stdin io.Reader, args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = c.dir, c.env, stdin
	return cmd
}

func (c *cliRunner) keep(p *proc) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, p.stdout, p.stderr)
	return p
}

// start runs a command in the background.
func (c *cliRunner) start(stdin io.Reader, args ...string) *proc {
	c.t.Helper()
	return c.keep(startProc(c.t, c.command(stdin, args...)))
}

// run runs a command to its end.
func (c *cliRunner) run(stdin io.Reader, args ...string) (stdout, stderr string, exit int) {
	c.t.Helper()
	p := c.start(stdin, args...)
	exit = p.wait(c.t)
	return p.stdout.String(), p.stderr.String(), exit
}

// ok runs a command that must succeed and returns its standard output.
func (c *cliRunner) ok(args ...string) string {
	c.t.Helper()
	stdout, stderr, exit := c.run(nil, args...)
	if exit != 0 {
		c.t.Fatalf("svrpd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), exit, stdout, stderr)
	}
	return stdout
}

// transcript is everything every command printed.
func (c *cliRunner) transcript() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, o := range c.all {
		b.WriteString(o.String())
	}
	return b.String()
}

func match(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %q in:\n%s", pattern, s)
	}
	return m[1]
}

func wantMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != mode {
		t.Errorf("%s has mode %04o, want %04o", path, st.Mode().Perm(), mode)
	}
}
