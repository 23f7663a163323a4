package cli

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
)

// TestREADMEWalkthrough runs the README's walkthrough as written: every "$ " line of its
// console blocks is run as a separate process in the terminal the text puts it in, and the
// lines the README shows under it must appear in what the process prints. Values that
// change from run to run (keys, DIDs, times, codes, the port) are matched by their shape;
// a short code or DID the README shows is replaced, in later commands, by the one printed
// where the README shows it.
//
// It runs in a git work tree standing for the checkout, with the repository's .gitignore,
// and a home folder outside it: when it ends, git sees nothing new in the checkout but its
// .gitignore, and no seed lies anywhere in it, ignored or not.
func TestREADMEWalkthrough(t *testing.T) {
	steps := readWalkthrough(t, filepath.Join("..", "..", "README.md"))
	bin := svrpdtest.Binary(t)
	checkout, home := checkoutAndHome(t)
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
	w := &walk{
		t:     t,
		dir:   checkout,
		home:  home,
		env:   svrpdtest.Env("HOME="+home, "SVRPD_LISTEN=127.0.0.1:"+port, "SVRPD_REGISTRY=http://127.0.0.1:"+port, "SVRPD_EVERY=1s", "SVRPD_POLL=200ms"),
		codes: map[string]string{},
		fg:    map[string]*walkProc{},
	}
	for _, s := range steps {
		w.step(s, bin)
	}
	w.finish()
	noSeedIn(t, checkout)
	if out := gitOut(t, checkout, "status", "--porcelain", "--untracked-files=all"); out != "?? .gitignore\n" {
		t.Errorf("the walkthrough left files that git add would take:\n%s", out)
	}
	for _, p := range append(w.bg, w.done...) {
		if strings.Contains(p.all.String(), "git work tree") {
			t.Errorf("%v warns of a seed in a git work tree:\n%s", p.p.Cmd.Args, p.all)
		}
	}
}

// checkoutAndHome makes two folders side by side: a git work tree holding the repository's
// .gitignore, and a home folder.
func checkoutAndHome(t *testing.T) (checkout, home string) {
	t.Helper()
	work := t.TempDir()
	checkout, home = filepath.Join(work, "checkout"), filepath.Join(work, "home")
	for _, d := range []string{checkout, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, ".gitignore"), ignore, 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, checkout, "init", "--quiet")
	return checkout, home
}

// gitOut runs git in dir and returns what it printed.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// seedFile is the content of a seed file as svrpd writes it.
var seedFile = regexp.MustCompile(`^[0-9a-f]{64}\n$`)

// noSeedIn fails t for each file under dir that is named or shaped like a seed file.
func noSeedIn(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".seed") || seedFile.Match(b) {
			t.Errorf("a seed was left in the work tree: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkStep is one command of the walkthrough, or (cmd == "") more output of the command
// running in the foreground of its terminal.
type walkStep struct {
	terminal string
	cmd      string
	output   []string
}

// readWalkthrough parses the README's walkthrough section into steps.
func readWalkthrough(t *testing.T, path string) []walkStep {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## Walkthrough")
	if start < 0 {
		t.Fatal("README has no walkthrough section")
	}
	text = text[start:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	var steps []walkStep
	terminal, inBlock := "setup", false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !inBlock && strings.HasPrefix(line, "**Terminal "):
			terminal = strings.TrimRight(strings.Fields(line)[1], ".*,")
		case strings.HasPrefix(line, "```console"):
			inBlock = true
			steps = append(steps, walkStep{terminal: terminal})
		case inBlock && strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock && strings.HasPrefix(line, "$ "):
			last := &steps[len(steps)-1]
			if last.cmd != "" || len(last.output) > 0 {
				steps = append(steps, walkStep{terminal: terminal})
				last = &steps[len(steps)-1]
			}
			last.cmd = strings.TrimPrefix(line, "$ ")
		case inBlock:
			steps[len(steps)-1].output = append(steps[len(steps)-1].output, line)
		}
	}
	if len(steps) < 10 {
		t.Fatalf("the walkthrough has only %d steps", len(steps))
	}
	return steps
}

type walkProc struct {
	p     *proc
	stdin *os.File
	all   *output // stdout and stderr as one terminal shows them
	want  int     // exit code the README shows: 1 after a hint, else 0
}

type walk struct {
	t     *testing.T
	dir   string
	home  string // the folder ~ names; the README shows it as /home/you
	env   []string
	path  []string
	bin   string
	codes map[string]string // short code or DID in the README -> the one of this run
	fg    map[string]*walkProc
	bg    []*walkProc
	done  []*walkProc // foreground commands that ended
}

func (w *walk) step(s walkStep, bin string) {
	t := w.t
	t.Helper()
	if s.cmd == "" {
		p := w.fg[s.terminal]
		if p == nil {
			t.Fatalf("terminal %s shows output but runs nothing: %q", s.terminal, s.output)
		}
		w.expect(p, s.output)
		return
	}
	cmd, background := strings.CutSuffix(s.cmd, " &")
	if prev := w.fg[s.terminal]; prev != nil {
		w.end(prev)
		delete(w.fg, s.terminal)
	}
	args := strings.Fields(cmd)
	switch {
	case len(args) == 5 && args[0] == "go" && args[1] == "build" && args[2] == "-o" && args[4] == "./svrpd":
		// The binary is built once per test process; it goes where the README puts it, and
		// that must not be a folder of the repository.
		if st, err := os.Stat(filepath.Join("..", "..", args[3])); err == nil && st.IsDir() {
			t.Fatalf("%s writes to %s, a folder of the repository", cmd, args[3])
		}
		dst := filepath.Join(w.dir, args[3])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, dst); err != nil {
			t.Fatal(err)
		}
		w.bin = dst
		return
	case cmd == `export PATH="$PWD/bin:$PATH"`:
		if w.bin == "" || filepath.Dir(w.bin) != filepath.Join(w.dir, "bin") {
			t.Fatalf("%s: the binary was not built into bin/", cmd)
		}
		w.env = append(w.env, "PATH="+filepath.Join(w.dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
		return
	case args[0] != "svrpd":
		t.Fatalf("the walkthrough runs %q, which this test does not know how to run", cmd)
	}
	for i, a := range args {
		if c, ok := w.codes[a]; ok {
			args[i] = c
		}
		if rest, ok := strings.CutPrefix(a, "~/"); ok {
			args[i] = filepath.Join(w.home, rest)
		}
	}
	path, err := lookPath("svrpd", w.env)
	if err != nil {
		t.Fatalf("%s: svrpd is not on PATH: %v", cmd, err)
	}
	c := exec.Command(path, args[1:]...)
	c.Dir, c.Env = w.dir, w.env
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdin = r
	all := &output{}
	c.Stdout, c.Stderr = all, all
	p := &walkProc{p: startProc(t, c), stdin: wr, all: all}
	r.Close()
	t.Cleanup(func() { wr.Close() })
	for _, l := range s.output {
		if strings.HasPrefix(l, "hint: ") {
			p.want = 1
		}
	}
	w.expect(p, s.output)
	if background {
		w.bg = append(w.bg, p)
	} else {
		w.fg[s.terminal] = p
	}
}

// expect waits until each README line appears in what p printed, answering a [y/n] prompt
// the way the README shows it.
func (w *walk) expect(p *walkProc, lines []string) {
	w.t.Helper()
	for _, l := range lines {
		if strings.TrimSpace(l) == "" || strings.TrimSpace(l) == "…" {
			continue
		}
		if q, answer, ok := strings.Cut(l, "[y/n] "); ok {
			p.all.waitFor(w.t, regexp.QuoteMeta(q+"[y/n]"))
			// A terminal echoes what the person types.
			p.all.Write([]byte(answer + "\n"))
			if _, err := p.stdin.WriteString(answer + "\n"); err != nil {
				w.t.Fatal(err)
			}
			continue
		}
		re, captured := shape(l)
		re = strings.ReplaceAll(re, readmeHome, regexp.QuoteMeta(w.home))
		m := p.all.waitFor(w.t, `(?m)^`+re+`$`)
		for group, shown := range captured {
			w.codes[shown] = m[group]
		}
	}
}

// end waits for a foreground command to finish with the exit code the README implies.
func (w *walk) end(p *walkProc) {
	w.t.Helper()
	if exit := p.p.wait(w.t); exit != p.want {
		w.t.Fatalf("%v exited %d, want %d:\n%s", p.p.Cmd.Args, exit, p.want, p.all)
	}
	w.done = append(w.done, p)
}

// readmeHome is the home folder the README's output shows.
const readmeHome = "/home/you"

// finish ends what still runs: the foreground commands, then the background ones (the
// node, then the registry) with SIGTERM, as Ctrl-C or kill would.
func (w *walk) finish() {
	w.t.Helper()
	for _, p := range w.fg {
		w.end(p)
	}
	for i := len(w.bg) - 1; i >= 0; i-- {
		if exit := w.bg[i].p.stop(w.t); exit != 0 {
			w.t.Errorf("%v exited %d on SIGTERM:\n%s", w.bg[i].p.Cmd.Args, exit, w.bg[i].all)
		}
	}
}

const shortCode = `[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}`

// volatile are the values that differ from run to run, each with the pattern that matches
// any of them.
var volatile = regexp.MustCompile(strings.Join([]string{
	`did:svrp:[0-9a-z:]+`,
	`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`,
	`[0-9a-f]{4}(?::[0-9a-f]{4}){3}`,
	shortCode,
	`bs-[0-9a-f]{8,}`,
	`rev-[0-9a-f]{8,}`,
	`[0-9a-f]{32,}`,
	`[1-9A-HJ-NP-Za-km-z]{32,}`,
	`127\.0\.0\.1:8080`,
	`…`,
	` {2,}`,
}, "|"))

// shape turns a README output line into a pattern: volatile values become their shape. It
// returns, by submatch index, the short codes and DIDs of the line the pattern captures.
func shape(line string) (string, map[int]string) {
	var b strings.Builder
	last, group := 0, 0
	captured := map[int]string{}
	for _, m := range volatile.FindAllStringIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[0]]))
		v := line[m[0]:m[1]]
		switch {
		case v == "…":
			b.WriteString(`.*`)
		case strings.TrimSpace(v) == "":
			b.WriteString(` {2,}`)
		case regexp.MustCompile(`^` + shortCode + `$`).MatchString(v):
			group++
			captured[group] = v
			b.WriteString(`(` + shortCode + `)`)
		case strings.HasPrefix(v, "did:svrp:"):
			group++
			captured[group] = v
			b.WriteString(`(did:svrp:[0-9a-z:]+)`)
		case v == "127.0.0.1:8080":
			b.WriteString(`127\.0\.0\.1:\d+`)
		default:
			b.WriteString(`\S+`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]))
	return b.String(), captured
}

// lookPath finds name in the PATH of env, as a shell started with env would.
func lookPath(name string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
