package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/svrpdtest"
)

func TestMain(m *testing.M) { svrpdtest.Main(m) }

// The top-level help lists every command with one line, whichever way it is asked for, and
// on standard output with exit 0.
func TestTopLevelHelp(t *testing.T) {
	bin := svrpdtest.Binary(t)
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"-help"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("svrpd %s: %v", args[0], err)
		}
		for _, c := range commands() {
			line := regexp.MustCompile(`(?m)^  ` + c.name + `\s+\S.*$`)
			if !line.Match(out) {
				t.Errorf("svrpd %s does not list %q on a line of its own:\n%s", args[0], c.name, out)
			}
		}
		if bytes.Contains(out, []byte("-listen")) {
			t.Errorf("svrpd %s prints serve's flags instead of the commands:\n%s", args[0], out)
		}
	}
	// A command's own help is one step away.
	out, err := exec.Command(bin, "help", "serve").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("-listen")) || !bytes.Contains(out, []byte("-metrics-listen")) {
		t.Errorf("svrpd help serve: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "help", "nonsense").CombinedOutput(); exitCode(err) != 2 || !bytes.Contains(out, []byte(`unknown command "nonsense"`)) {
		t.Errorf("svrpd help nonsense: exit %d\n%s", exitCode(err), out)
	}
}

// svrpd version and --version print the same lines from the binary's build information.
func TestVersion(t *testing.T) {
	bin := svrpdtest.Binary(t)
	a, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("svrpd version and --version differ:\n%s\n%s", a, b)
	}
	want := regexp.MustCompile(`^svrpd \S+\n(  revision  [0-9a-f]{40}( \(with uncommitted changes\))?\n  time      \S+\n)?  module    github\.com/svrp/svrp\n  go        go1\.\S+\n$`)
	if !want.Match(a) {
		t.Errorf("svrpd version printed:\n%s", a)
	}
	if out, err := exec.Command(bin, "version", "extra").CombinedOutput(); exitCode(err) != 2 {
		t.Errorf("svrpd version extra: exit %d\n%s", exitCode(err), out)
	}
}

// What the build info of a release and of a checkout turn into.
func TestPrintVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"module version", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/svrp/svrp", Version: "v1.4.0"}},
			"svrpd v1.4.0\n  module    github.com/svrp/svrp\n  go        go1.26.0\n"},
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/svrp/svrp", Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "f64271a9759cc33c886fd876e2e8c1c2d226639d"}, {Key: "vcs.time", Value: "2026-11-23T12:58:09Z"}, {Key: "vcs.modified", Value: "true"},
		}}, "svrpd (devel)\n  revision  f64271a9759cc33c886fd876e2e8c1c2d226639d (with uncommitted changes)\n  time      2026-11-23T12:58:09Z\n  module    github.com/svrp/svrp\n  go        go1.26.0\n"},
	} {
		var b strings.Builder
		printVersion(&b, &tc.bi)
		if b.String() != tc.want {
			t.Errorf("%s: printed\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}

// An unknown command is a usage error that lists the commands.
func TestUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"serv"}, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "Commands:") {
		t.Errorf("svrpd serv: exit %d, stderr %q", code, stderr.String())
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A version given at build time names a build from a checkout; a module version wins.
func TestBuildVersion(t *testing.T) {
	defer func(v string) { buildVersion = v }(buildVersion)
	buildVersion = "v2.0.0-rc.1"
	for _, tc := range []struct{ module, want string }{
		{"(devel)", "svrpd v2.0.0-rc.1\n"},
		{"v1.4.0", "svrpd v1.4.0\n"},
	} {
		var b strings.Builder
		printVersion(&b, &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/svrp/svrp", Version: tc.module}})
		if first, _, _ := strings.Cut(b.String(), "  "); first != tc.want {
			t.Errorf("module version %s: printed %q, want %q first", tc.module, b.String(), tc.want)
		}
	}
}

// SIGHUP, which a service manager's reload sends, leaves a daemon without certificates
// serving.
func TestHangupKeepsServing(t *testing.T) {
	d := svrpdtest.Start(t, nil, "--memory")
	d.Send(t, syscall.SIGHUP)
	select {
	case <-d.Done():
		t.Fatalf("svrpd exited %d on SIGHUP:\n%s", d.Exit(), d.Log)
	case <-time.After(300 * time.Millisecond):
	}
	res, err := http.Get(d.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /health after SIGHUP: %d", res.StatusCode)
	}
	if code := d.Signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}
