package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

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
