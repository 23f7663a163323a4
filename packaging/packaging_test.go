// Package packaging holds the ways svrpd is installed — the systemd unit here, the
// Dockerfile at the module's root, go install — and the tests that each still works.
package packaging

import (
	"archive/zip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/internal/svrpdtest"
)

func TestMain(m *testing.M) { svrpdtest.Main(m) }

// The unit keeps the hardening an operator expects of a network daemon.
func TestUnitHardening(t *testing.T) {
	unit := read(t, "svrpd.service")
	for _, want := range []string{
		"DynamicUser=yes", "StateDirectory=svrpd", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
		"WorkingDirectory=/var/lib/svrpd", "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure",
	} {
		if !strings.Contains(unit, "\n"+want+"\n") {
			t.Errorf("svrpd.service lacks %q", want)
		}
	}
}

// The service managers wait out svrpd's own shutdown bound before they kill it: the unit's
// TimeoutStopSec, and every docker run -d the Dockerfile and the README show, with
// --stop-timeout, since Docker's default is 10 s.
func TestStopTimeoutsCoverTheShutdown(t *testing.T) {
	unit := regexp.MustCompile(`(?m)^TimeoutStopSec=(\S+)$`).FindStringSubmatch(read(t, "svrpd.service"))
	if unit == nil {
		t.Fatal("svrpd.service sets no TimeoutStopSec")
	}
	if d, err := time.ParseDuration(unit[1]); err != nil || d <= daemon.DefaultShutdownTimeout {
		t.Errorf("TimeoutStopSec=%s, want more than the shutdown bound %v", unit[1], daemon.DefaultShutdownTimeout)
	}
	runs := 0
	stop := regexp.MustCompile(`--stop-timeout (\d+)`)
	for _, name := range []string{filepath.Join("..", "Dockerfile"), filepath.Join("..", "README.md")} {
		for _, line := range strings.Split(read(t, name), "\n") {
			if !strings.Contains(line, "docker run -d") {
				continue
			}
			runs++
			m := stop.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s: %q gives no --stop-timeout", name, strings.TrimSpace(line))
				continue
			}
			if n, _ := strconv.Atoi(m[1]); time.Duration(n)*time.Second <= daemon.DefaultShutdownTimeout {
				t.Errorf("%s: --stop-timeout %s, want more than the shutdown bound %v", name, m[1], daemon.DefaultShutdownTimeout)
			}
		}
	}
	if runs < 3 {
		t.Errorf("found %d docker run -d commands in the Dockerfile and the README, want at least 3", runs)
	}
}

// systemd-analyze verify finds nothing wrong with the unit, run with a real svrpd binary in
// place of the installed one: verify fails on an ExecStart whose binary is missing, as
// /usr/local/bin/svrpd is on a machine that only runs the tests.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit := strings.ReplaceAll(read(t, "svrpd.service"), "/usr/local/bin/svrpd", svrpdtest.Binary(t))
	path := filepath.Join(t.TempDir(), "svrpd.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "svrpd.service") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The Dockerfile builds a static binary and runs it unprivileged, with a volume and a
// health check. The image is built too where a container builder answers.
func TestDockerfile(t *testing.T) {
	df := read(t, filepath.Join("..", "Dockerfile"))
	for _, want := range []string{"CGO_ENABLED=0", "USER 65532:65532", "VOLUME /data", "HEALTHCHECK", `CMD ["/usr/local/bin/svrpd", "healthcheck"]`, "WORKDIR /data"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker: the image is not built")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if exec.CommandContext(ctx, docker, "info").Run() != nil {
		t.Skip("docker answers no daemon: the image is not built")
	}
	tag := "svrpd-test:" + time.Now().Format("20060102150405")
	build := exec.Command(docker, "build", "--build-arg", "VERSION=v0.0.0-test", "-t", tag, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	defer exec.Command(docker, "rmi", tag).Run()
	out, err := exec.Command(docker, "run", "--rm", tag, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "svrpd v0.0.0-test\n") {
		t.Errorf("docker run %s version: %v\n%s", tag, err, out)
	}
}

// go install github.com/svrp/svrp/svrpd@latest works from the module as it would be
// published: the tracked files, zipped as a module proxy serves them, installed with go
// install from that proxy, name their version in svrpd version. Nothing in go.mod (a
// replace, a retract of the latest) or in the tree (a file left untracked that the build
// needs) may stand in its way.
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds svrpd from a module zip")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command(git, "ls-files", "-z")
	list.Dir = root
	files, err := list.Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	const version = "v0.99.0"
	proxy := t.TempDir()
	dir := filepath.Join(proxy, "github.com", "svrp", "svrp", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // removed in the working tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create("github.com/svrp/svrp@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zf.Close()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".mod": mod,
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := t.TempDir()
	install := exec.Command(goBin, "install", "github.com/svrp/svrp/svrpd@latest")
	install.Dir = t.TempDir()
	// The module's dependencies come from the module cache, or from the public proxy.
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOPROXY=file://"+proxy+",https://proxy.golang.org",
		"GONOSUMDB=github.com/svrp/svrp", "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install github.com/svrp/svrp/svrpd@latest: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "svrpd"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "svrpd "+version+"\n") {
		t.Errorf("the installed svrpd version: %v\n%s", err, out)
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
