package cli

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// inProcess is a registry in this process and an operator logged in to it through the CLI
// functions, for tests that feed a command's standard input.
type inProcess struct {
	t     *testing.T
	url   string
	opDir string
	key   string
}

func newInProcess(t *testing.T) *inProcess {
	t.Helper()
	svc, err := registry.New(registry.Config{Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	p := &inProcess{t: t, url: srv.URL, opDir: filepath.Join(dir, "op"), key: filepath.Join(dir, "node.seed")}
	p.ok(Operator, "init", "--dir", p.opDir)
	p.ok(Operator, "login", "--dir", p.opDir)
	p.ok(func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return Keygen(ctx, args, stdout, stderr)
	}, "--out", p.key)
	return p
}

// cmdFunc is the shape of the command functions that read standard input.
type cmdFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// ok runs a command function with --registry added and fails the test unless it exits 0.
func (p *inProcess) ok(run cmdFunc, args ...string) string {
	p.t.Helper()
	stdout, stderr, code := p.run(run, "", args...)
	if code != 0 {
		p.t.Fatalf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
	}
	return stdout
}

func (p *inProcess) run(run cmdFunc, stdin string, args ...string) (string, string, int) {
	p.t.Helper()
	stdout, stderr := &output{}, &output{}
	code := p.call(run, stdin, stdout, stderr, args...)
	return stdout.String(), stderr.String(), code
}

func (p *inProcess) call(run cmdFunc, stdin string, stdout, stderr *output, args ...string) int {
	if !slices.Contains(args, "--registry") {
		args = append(args, "--registry", p.url)
	}
	return run(p.t.Context(), args, strings.NewReader(stdin), stdout, stderr)
}

func TestNodeBindAsksOnStandardInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stdin  string
		exit   int
		state  string
		prompt int // how many times the question is asked
	}{
		{"yes", "y\n", 0, "ACTIVE", 1},
		{"no after a bad answer", "maybe\nN\n", 0, "REJECTED_BY_NODE", 2},
		{"end of input cancels", "", 1, "CANCELLED", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newInProcess(t)
			stdout, stderr := &output{}, &output{}
			done := make(chan int, 1)
			go func() {
				done <- p.call(Node, tc.stdin, stdout, stderr, "bind", "--key", p.key, "--poll", "20ms",
					"--task-type", "inference", "--single-limit", "5")
			}()
			m := stdout.waitFor(t, `binding session (\S+) opened[\s\S]*short code:\s+(\S+)\n\s+node DID:\s+(\S+)`)
			id, code, did := m[1], m[2], m[3]
			p.ok(Operator, "resolve", "--dir", p.opDir, "--node", did, code) // the code last: positional anywhere
			p.ok(Operator, "authorize", "--dir", p.opDir)
			var exit int
			select {
			case exit = <-done:
			case <-t.Context().Done():
				t.Fatal("node bind did not end")
			}
			if exit != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", exit, tc.exit, stdout, stderr)
			}
			if got := strings.Count(stdout.String(), "accept these terms? [y/n]"); got != tc.prompt {
				t.Errorf("asked %d times, want %d:\n%s", got, tc.prompt, stdout)
			}
			c, _ := client.New(p.url)
			st, err := c.Status(t.Context(), id)
			if err != nil || st.State != tc.state {
				t.Errorf("session state = %q (%v), want %s", st.State, err, tc.state)
			}
			if !strings.Contains(stdout.String(), "single limit:  5") {
				t.Errorf("the terms were not shown:\n%s", stdout)
			}
		})
	}
}

func TestOperatorNeedsASession(t *testing.T) {
	p := newInProcess(t)
	empty := t.TempDir()
	_, stderr, code := p.run(Operator, "", "nodes", "--dir", empty)
	if code != 1 || !strings.Contains(stderr, "NO_SESSION") || !strings.Contains(stderr, "hint: run: svrpd operator login --dir "+empty) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	stdout := p.ok(Operator, "nodes", "--dir", p.opDir, "--online-within", "60")
	if !strings.Contains(stdout, "has 0 bound nodes (online: seen within 60s)") {
		t.Errorf("nodes output:\n%s", stdout)
	}
	// A session kept for one registry is not sent to another.
	_, stderr, code = p.run(Operator, "", "credits", "--dir", p.opDir, "--registry", "http://127.0.0.1:1")
	if code != 1 || !strings.Contains(stderr, "NO_SESSION") {
		t.Errorf("session for another registry: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "k.seed")
	var stdout, stderr bytes.Buffer
	if code := Keygen(t.Context(), nil, &stdout, &stderr); code != 2 {
		t.Errorf("keygen without --out: exit %d, want 2", code)
	}
	if code := Keygen(t.Context(), []string{"--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, stderr.String())
	}
	first, _ := os.ReadFile(out)
	if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(first) {
		t.Fatalf("seed file is not 64 hex characters and a newline")
	}
	if strings.Contains(stdout.String(), strings.TrimSpace(string(first))) {
		t.Error("keygen printed the seed")
	}
	for _, label := range []string{"did:  ", "did (10-hex):", "did (full):", "public key (hex):", "public key (base58):", "fingerprint:"} {
		if !strings.Contains(stdout.String(), label) {
			t.Errorf("keygen output lacks %q:\n%s", label, stdout.String())
		}
	}
	stderr.Reset()
	if code := Keygen(t.Context(), []string{"--out", out}, &stdout, &stderr); code != 1 {
		t.Errorf("keygen over a key: exit %d, want 1", code)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(again, first) {
		t.Error("a refused keygen changed the file")
	}
	if code := Keygen(t.Context(), []string{"--out", out, "--force"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keygen --force: exit %d", code)
	}
	if again, _ := os.ReadFile(out); bytes.Equal(again, first) {
		t.Error("keygen --force kept the old key")
	}
	wantMode(t, out, 0o600)
}

// A seed written inside a git work tree (a .git folder, or the .git file of a linked work
// tree, in a folder above) draws a warning on stderr; one written elsewhere does not. The
// seed's folder is created, private, when missing.
func TestSeedInAGitWorkTreeWarns(t *testing.T) {
	outside := t.TempDir()
	repo, linked := filepath.Join(outside, "repo"), filepath.Join(outside, "linked")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(linked, ".git"), []byte("gitdir: elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		warn bool
	}{
		{filepath.Join(outside, "keys", "node.seed"), false},
		{filepath.Join(repo, "node.seed"), true},
		{filepath.Join(repo, "deep", "er", "node.seed"), true},
		{filepath.Join(linked, "op", "root.seed"), true},
	} {
		var stdout, stderr bytes.Buffer
		if code := Keygen(t.Context(), []string{"--out", tc.path}, &stdout, &stderr); code != 0 {
			t.Fatalf("keygen --out %s: exit %d: %s", tc.path, code, stderr.String())
		}
		wantMode(t, tc.path, 0o600)
		if got := strings.Contains(stderr.String(), "git work tree"); got != tc.warn {
			t.Errorf("keygen --out %s: warned %v, want %v: %q", tc.path, got, tc.warn, stderr.String())
		}
	}
	wantMode(t, filepath.Join(outside, "keys"), 0o700)
	var stdout, stderr bytes.Buffer
	if code := Operator(t.Context(), []string{"init", "--dir", filepath.Join(repo, "op")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("operator init: exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"root.seed", "device.seed"} {
		if !strings.Contains(stderr.String(), filepath.Join(repo, "op", f)+" is inside the git work tree "+repo) {
			t.Errorf("operator init inside a work tree does not warn of %s: %q", f, stderr.String())
		}
	}
}

func TestReadSeedQuotesNoContent(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.seed")
	secret := strings.Repeat("ab", 31) + "zz"
	os.WriteFile(f, []byte(secret), 0o600)
	_, err := readSeed(f, &bytes.Buffer{})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("err = %v; want a refusal that does not quote the file", err)
	}
	os.WriteFile(f, []byte(strings.Repeat("ab", 32)), 0o600)
	os.Chmod(f, 0o644)
	var warn bytes.Buffer
	if _, err := readSeed(f, &warn); err != nil || !strings.Contains(warn.String(), "chmod 600") {
		t.Errorf("a readable seed: err %v, warning %q", err, warn.String())
	}
}

func TestFailPrintsCodeAndHint(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&client.Error{Status: 401, ErrorCode: proto.NoSession, Message: "no session"},
			"svrpd x: NO_SESSION: no session\nhint: run: svrpd operator login --dir /ops\n"},
		{&client.TransportError{Method: "GET", Path: "/health", Err: context.DeadlineExceeded},
			"svrpd x: svrp client: GET /health: TRANSPORT_ERROR: context deadline exceeded\nhint: is a registry running at http://r? start one with: svrpd serve (or set --registry / SVRPD_REGISTRY)\n"},
		{os.ErrPermission, "svrpd x: permission denied\n"},
	} {
		var b bytes.Buffer
		if code := fail(&b, "x", tc.err, hintContext{dir: "/ops", registry: "http://r"}); code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if b.String() != tc.want {
			t.Errorf("fail(%v) printed\n%q\nwant\n%q", tc.err, b.String(), tc.want)
		}
	}
}

func TestSplitPositional(t *testing.T) {
	fs := cmdflag.New("t", &bytes.Buffer{})
	fs.String("dir", "", "")
	fs.Bool("yes", false, "")
	for _, tc := range []struct {
		args, pos, flags []string
	}{
		{[]string{"CODE", "--dir", "d"}, []string{"CODE"}, []string{"--dir", "d"}},
		{[]string{"--dir", "d", "CODE"}, []string{"CODE"}, []string{"--dir", "d"}},
		{[]string{"--yes", "CODE", "--dir=d"}, []string{"CODE"}, []string{"--yes", "--dir=d"}},
		{[]string{"--dir", "d", "--", "-CODE"}, []string{"-CODE"}, []string{"--dir", "d"}},
	} {
		pos, flags := splitPositional(fs, tc.args)
		if !slices.Equal(pos, tc.pos) || !slices.Equal(flags, tc.flags) {
			t.Errorf("splitPositional(%q) = %q, %q; want %q, %q", tc.args, pos, flags, tc.pos, tc.flags)
		}
	}
}

func TestCreditsAlwaysCarryTheStatements(t *testing.T) {
	for _, source := range []string{"not_yet_wired", "ledger"} {
		var b bytes.Buffer
		printCredits(&b, api.Credits{Unit: "test-credit", Source: source, Settled: api.Amount{Amount: 2, Meaning: "settled meaning"}})
		out := b.String()
		if !strings.Contains(out, "test unit: not cash, not redeemable, not convertible, and not a claim on future value") ||
			!strings.Contains(out, "settled meaning") || !strings.Contains(out, "never added up") {
			t.Errorf("source %s: output lacks a statement:\n%s", source, out)
		}
		if wired := !strings.Contains(out, "NOT YET WIRED"); wired != (source == "ledger") {
			t.Errorf("source %s: NOT YET WIRED shown = %v", source, !wired)
		}
	}
}
