package console_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/internal/hints"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/client"
)

// findChromium returns the browser the tests drive: $SVRPD_CHROMIUM, else the first of the
// usual names on $PATH.
func findChromium() string {
	if p := os.Getenv("SVRPD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// startSvrpd runs a real svrpd with a Badger store in a temporary directory and returns its
// base URL; it stops when the test ends.
func startSvrpd(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg := daemon.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), Prefix: "service", SweepEvery: time.Minute,
		LogLevel: "warn", LogFormat: "text", Console: true,
	}
	go func() { done <- daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	select {
	case addr := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("svrpd: %v", err)
			}
		})
		return "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("svrpd did not start: %v", err)
	}
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns its context. Every
// console error, uncaught exception and browser log entry of level error (a Content
// Security Policy violation among them) is collected; the test fails on any at its end.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	bin := findChromium()
	if bin == "" && os.Getenv("SVRPD_CHROMIUM_REQUIRED") != "" {
		t.Fatal("no Chromium found, and SVRPD_CHROMIUM_REQUIRED is set: install one (Debian: apt-get install chromium) or set SVRPD_CHROMIUM")
	}
	if bin == "" {
		t.Skip("no Chromium found: the console's browser tests need one (Debian: apt-get install chromium; or set SVRPD_CHROMIUM to a Chromium binary)")
	}
	// A fresh profile, removed by hand: Chromium's helper processes may still write to it for
	// a moment after the browser is gone, which t.TempDir's cleanup would report.
	profile, err := os.MkdirTemp("", "svrpd-console-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // root in a container has no user namespace for the sandbox
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true), // a screenshot then shows the page's whole width
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	// Each step has a bound of its own (run, poll); this one only ends a test whose steps all
	// crawl, and leaves room for a machine busy with other work.
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	var mu sync.Mutex
	var problems []string
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if a, ok := e.Request.Headers["Authorization"].(string); ok {
				bearerMu.Lock()
				lastBearer = strings.TrimPrefix(a, "Bearer ")
				bearerMu.Unlock()
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				problems = append(problems, fmt.Sprintf("console.error: %v", e.Args))
			}
		case *log.EventEntryAdded:
			// A failed fetch of an API error answer is logged as a network error; the page
			// shows those itself. Anything else at error level is a fault of the page.
			if e.Entry.Level == log.LevelError && e.Entry.Source != log.SourceNetwork {
				problems = append(problems, fmt.Sprintf("%s: %s", e.Entry.Source, e.Entry.Text))
			}
		}
	})
	// The page acts as the focused window, as a person's would: :focus matches and keys reach
	// the focused element even when another window has the desktop's focus.
	if err := chromedp.Run(ctx, log.Enable(), runtime.Enable(), network.Enable(), emulation.SetFocusEmulationEnabled(true)); err != nil {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(profile)
		t.Fatalf("starting %s: %v", bin, err)
	}
	// take hands the reports so far to a test that expects some, and forgets them.
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		p := problems
		problems = nil
		return p
	}
	t.Cleanup(func() {
		mu.Lock()
		for _, p := range problems {
			t.Errorf("browser reported %s", p)
		}
		mu.Unlock()
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		for i := 0; i < 50 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return ctx, take
}

// lastBearer is the last bearer token the page sent, read off the wire so the test can check
// that logout ended the session at the registry.
var (
	bearerMu   sync.Mutex
	lastBearer string
)

func bearer() string {
	bearerMu.Lock()
	defer bearerMu.Unlock()
	return lastBearer
}

// shotsDir is where the screenshots go: $SVRPD_CONSOLE_SHOTS, else a directory named after
// the test under the system's temporary directory, which outlives the test so that a person
// can look at them.
func shotsDir(t *testing.T) string {
	dir := os.Getenv("SVRPD_CONSOLE_SHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "svrpd-console-shots", t.Name())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

type size struct {
	name          string
	width, height int64
	mobile        bool
}

var (
	desktop = size{"desktop", 1280, 900, false}
	phone   = size{"phone", 390, 844, true}
)

// resize sets the page's viewport to s and waits until the page is laid out at that width,
// with every chart shown drawn to its new width.
func resize(t *testing.T, ctx context.Context, s size) {
	t.Helper()
	emulate := chromedp.EmulateViewport(s.width, s.height)
	if s.mobile {
		emulate = chromedp.EmulateViewport(s.width, s.height, chromedp.EmulateMobile, chromedp.EmulateScale(2))
	}
	if err := run(ctx, emulate); err != nil {
		t.Fatalf("resizing to %s: %v", s.name, err)
	}
	poll(t, ctx, fmt.Sprintf(`window.innerWidth === %d && [...document.querySelectorAll('.chart')].every((c) => !c.offsetParent || c.dataset.width === String(c.clientWidth))`, s.width))
}

// screenshots takes the current view at desktop and at phone width, then goes back to the
// desktop size.
func screenshots(t *testing.T, ctx context.Context, dir, view string) {
	t.Helper()
	for _, s := range []size{desktop, phone} {
		resize(t, ctx, s)
		var png []byte
		var overflow bool
		if err := run(ctx,
			chromedp.Evaluate(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &overflow),
			chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatalf("screenshot %s %s: %v", view, s.name, err)
		}
		if overflow {
			t.Errorf("%s view at %s width scrolls sideways", view, s.name)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.png", view, s.name)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resize(t, ctx, desktop)
}

// run runs actions with a bound of its own, so that a step that never comes fails fast.
func run(ctx context.Context, actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// logIn fills the login form with fill and submits it; the console must then show the bind
// view, logged in as opDID.
func logIn(t *testing.T, ctx context.Context, opDID string, fill ...chromedp.Action) {
	t.Helper()
	submit := []chromedp.Action{chromedp.Click("#login-button", chromedp.ByQuery), chromedp.WaitVisible("#view-bind", chromedp.ByQuery)}
	if err := run(ctx, append(fill, submit...)...); err != nil {
		t.Fatalf("logging in: %v (error shown: %q)", err, textNow(ctx, "#error"))
	}
	if who := textOf(t, ctx, "#who"); !strings.Contains(who, opDID) {
		t.Errorf("logged in as %q, want %s", who, opDID)
	}
}

// answer readies the code field with ready, resolves code naming the node nodeDID, answers
// the request with button, and waits until the session shows state.
func answer(t *testing.T, ctx context.Context, ready chromedp.Action, code, nodeDID, button, state string) {
	t.Helper()
	if err := run(ctx,
		ready,
		chromedp.SetValue("#node-did", nodeDID, chromedp.ByQuery),
		chromedp.SendKeys("#code", code+kb.Enter, chromedp.ByQuery),
		chromedp.WaitVisible("#request", chromedp.ByQuery),
		chromedp.Click(button, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#progress-state", state)
}

// evalInConsole opens the console at base and, once it is ready, runs script in the page,
// awaiting the promise it returns, into out.
func evalInConsole(t *testing.T, ctx context.Context, base, script string, out any) {
	t.Helper()
	if err := run(ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`body[data-ready="yes"]`, chromedp.ByQuery),
		chromedp.Evaluate(script, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	); err != nil {
		t.Fatal(err)
	}
}

// textOf waits until the element is visible and returns its text.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	if err := run(ctx, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Text(sel, &s, chromedp.ByQuery)); err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// waitText waits until the element's text is want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.trim() === %q; })()`, sel, want)
	if err := chromedp.Run(ctx, chromedp.Poll(js, nil, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("waiting for %s to read %q (it reads %q): %v", sel, want, textNow(ctx, sel), err)
	}
}

func textNow(ctx context.Context, sel string) string {
	var s string
	chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel), &s))
	return strings.TrimSpace(s)
}

func num(v float64) *float64 { return &v }

// operatorFiles writes an operator's device.seed and credential.json as the CLI does.
func operatorFiles(t *testing.T) (dir, operatorDID string) {
	t.Helper()
	_, root, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	devPub, dev, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := client.IssueDeviceCredential(root, devPub, client.CredentialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := json.MarshalIndent(dc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "device.seed"), []byte(hex.EncodeToString(dev.Seed())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "credential.json"), append(cred, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, dc.OperatorDID
}

func newNode(t *testing.T, ctx context.Context, c *client.Client) *client.Node {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, err := client.NewNode(c, key, didkey.FormShort)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Register(ctx, "127.0.0.1:9000", []string{"inference"}, "eu-west"); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConsoleBindsANode walks the console's whole journey in a real browser against a real
// svrpd: log in with a device key made here, resolve a code a node opened, compare the
// fingerprint, authorize, let the node accept, and see it listed online; then a wrong code,
// a rejected and a cancelled request, the credits view, unbind and logout.
func TestConsoleBindsANode(t *testing.T) {
	ctx, _ := browser(t)
	base := startSvrpd(t)
	shots := shotsDir(t)
	opDir, opDID := operatorFiles(t)

	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := newNode(t, nctx, c)
	ini, err := node.Initiate(nctx, client.InitiateOptions{
		DeviceSummary: "test rig", OS: "linux", TaskTypes: []string{"inference", "training"},
		SingleLimit: num(10), DailyLimit: num(100),
	})
	if err != nil {
		t.Fatal(err)
	}

	// Log in: both files loaded from disk.
	if err := run(ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`body[data-ready="yes"]`, chromedp.ByQuery),
		chromedp.Click("#nav-login", chromedp.ByQuery),
		chromedp.WaitVisible("#view-login", chromedp.ByQuery),
	); err != nil {
		t.Fatalf("opening the console: %v (ready=%q, notice %q)", err, textNow(ctx, "body"), textNow(ctx, "#unsupported"))
	}
	screenshots(t, ctx, shots, "login")
	logIn(t, ctx, opDID,
		chromedp.SetUploadFiles("#seed-file", []string{filepath.Join(opDir, "device.seed")}, chromedp.ByQuery),
		chromedp.SetUploadFiles("#cred-file", []string{filepath.Join(opDir, "credential.json")}, chromedp.ByQuery),
	)

	// Resolve with the keyboard alone: the node's DID, then the code typed in lower case
	// without its dash, then Enter submits.
	typed := strings.ToLower(strings.ReplaceAll(ini.ShortCode, "-", ""))
	if err := run(ctx,
		chromedp.Focus("#node-did", chromedp.ByQuery),
		chromedp.SendKeys("#node-did", node.DID, chromedp.ByQuery),
		chromedp.Focus("#code", chromedp.ByQuery),
		chromedp.SendKeys("#code", typed+kb.Enter, chromedp.ByQuery),
		chromedp.WaitVisible("#request", chromedp.ByQuery),
	); err != nil {
		t.Fatalf("resolving %s: %v (error shown: %q)", ini.ShortCode, err, textNow(ctx, "#error"))
	}
	if got, want := textOf(t, ctx, "#fingerprint"), node.PublicKey().Fingerprint(); got != want {
		t.Errorf("fingerprint shown %q, the node's is %q", got, want)
	}
	if got := textOf(t, ctx, "#fingerprint-box .compare"); !strings.Contains(got, "Compare this fingerprint with the one on the node's screen") {
		t.Errorf("no compare instruction beside the fingerprint: %q", got)
	}
	details := textOf(t, ctx, "#request-details")
	for _, want := range []string{node.DID, "test rig", "linux", "inference, training", "10", "100"} {
		if !strings.Contains(details, want) {
			t.Errorf("the request shown lacks %q:\n%s", want, details)
		}
	}
	screenshots(t, ctx, shots, "resolve")

	// Grant less than asked: training unticked, a single limit of 5; authorize from the
	// keyboard (Space toggles a checkbox, Enter presses the focused button).
	if err := run(ctx,
		chromedp.Focus("#grant-task-1", chromedp.ByQuery),
		chromedp.SendKeys("#grant-task-1", " ", chromedp.ByQuery),
		chromedp.Focus("#single-limit", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('single-limit').select()`, nil),
		chromedp.SendKeys("#single-limit", "5", chromedp.ByQuery),
		chromedp.Focus("#authorize-button", chromedp.ByQuery),
		chromedp.SendKeys("#authorize-button", kb.Enter, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#progress-state", "PENDING_NODE_ACCEPTANCE")

	// The node sees what the browser signed, checks it and accepts.
	p, err := node.WaitForAuthorization(nctx, ini.BindingSessionID, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.VerifyPending(p); err != nil {
		t.Fatalf("the node refuses what the browser signed: %v", err)
	}
	az := p.AuthorizationCredential
	if strings.Join(az.TaskTypes, ",") != "inference" || az.SingleLimit == nil || *az.SingleLimit != 5 || az.DailyLimit == nil || *az.DailyLimit != 100 || az.OperatorDID != opDID {
		t.Errorf("authorization granted %v single %v daily %v by %s; want inference, 5, 100 by %s", az.TaskTypes, az.SingleLimit, az.DailyLimit, az.OperatorDID, opDID)
	}
	if _, err := node.Accept(nctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Heartbeat(nctx); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#progress-state", "ACTIVE")

	// My nodes: the node is listed, online, with the agreed limits.
	card := fmt.Sprintf(`#nodes-list li[data-node=%q]`, node.DID)
	if err := run(ctx,
		chromedp.Click("#show-nodes-button", chromedp.ByQuery),
		chromedp.WaitVisible(card, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("listing the nodes: %v (error shown: %q)", err, textNow(ctx, "#error"))
	}
	if got := textOf(t, ctx, card+" .badge"); got != "online" {
		t.Errorf("node state %q, want online", got)
	}
	listed := textOf(t, ctx, card)
	for _, want := range []string{"127.0.0.1:9000", "eu-west", "inference", "5", "100"} {
		if !strings.Contains(listed, want) {
			t.Errorf("the node's card lacks %q:\n%s", want, listed)
		}
	}
	screenshots(t, ctx, shots, "nodes")

	// A wrong code: NOT_FOUND with the CLI's hint.
	if err := run(ctx,
		chromedp.Click("#nav-bind", chromedp.ByQuery),
		chromedp.WaitVisible("#view-bind", chromedp.ByQuery),
		chromedp.Click("#again-button", chromedp.ByQuery),
		chromedp.WaitVisible("#resolve-form", chromedp.ByQuery),
		chromedp.SetValue("#node-did", node.DID, chromedp.ByQuery),
		chromedp.SendKeys("#code", "ZZZZ-ZZZZ"+kb.Enter, chromedp.ByQuery),
		chromedp.WaitVisible("#error", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#error-code"); got != "NOT_FOUND (HTTP 404)" {
		t.Errorf("wrong code shows %q, want NOT_FOUND (HTTP 404)", got)
	}
	want, _ := hints.For("NOT_FOUND", "", base)
	if got := textOf(t, ctx, "#error-hint"); got != "hint: "+want {
		t.Errorf("hint shown %q, want the CLI's %q", got, "hint: "+want)
	}
	screenshots(t, ctx, shots, "error")

	// A second request, refused: the node sees REJECTED_BY_OPERATOR.
	ini2, err := node.Initiate(nctx, client.InitiateOptions{TaskTypes: []string{"inference"}})
	if err != nil {
		t.Fatal(err)
	}
	// The page sends the node's DID: naming another node, the right code is not found.
	other := newNode(t, nctx, c)
	if err := run(ctx,
		chromedp.Evaluate(`document.getElementById('error').hidden = true`, nil),
		chromedp.Evaluate(`document.getElementById('code').select()`, nil),
		chromedp.SetValue("#node-did", other.DID, chromedp.ByQuery),
		chromedp.SendKeys("#code", ini2.ShortCode+kb.Enter, chromedp.ByQuery),
		chromedp.WaitVisible("#error", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#error-code"); got != "NOT_FOUND (HTTP 404)" {
		t.Errorf("the right code naming another node shows %q, want NOT_FOUND (HTTP 404)", got)
	}
	if st, err := c.Status(nctx, ini2.BindingSessionID); err != nil || st.State != "INITIATED" {
		t.Errorf("after naming another node the registry says %+v, %v; want INITIATED", st, err)
	}
	answer(t, ctx, chromedp.Evaluate(`document.getElementById('code').select()`, nil), ini2.ShortCode, node.DID, "#reject-button", "REJECTED_BY_OPERATOR")
	if st, err := c.Status(nctx, ini2.BindingSessionID); err != nil || st.State != "REJECTED_BY_OPERATOR" {
		t.Errorf("after reject the registry says %+v, %v", st, err)
	}

	// A third, authorized and then cancelled before the node answers.
	ini3, err := node.Initiate(nctx, client.InitiateOptions{TaskTypes: []string{"inference"}})
	if err != nil {
		t.Fatal(err)
	}
	answer(t, ctx, chromedp.Click("#again-button", chromedp.ByQuery), ini3.ShortCode, node.DID, "#authorize-button", "PENDING_NODE_ACCEPTANCE")
	if err := run(ctx, chromedp.Click("#cancel-button", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#progress-state", "CANCELLED")

	// Credits: the README's statement, and never an amount without it.
	if err := run(ctx,
		chromedp.Click("#nav-credits", chromedp.ByQuery),
		chromedp.WaitVisible("#credits dl", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	statement := readmeStatement(t)
	if got := textOf(t, ctx, "#statement"); got != statement {
		t.Errorf("credits statement:\n got %q\nwant %q", got, statement)
	}
	if got := textOf(t, ctx, "#credits"); !strings.Contains(got, "0 test-credit") || !strings.Contains(got, "NOT YET WIRED") {
		t.Errorf("credits view: %q", got)
	}
	if got := textOf(t, ctx, "#evidence"); !strings.Contains(got, "not_yet_wired") {
		t.Errorf("evidence view: %q", got)
	}
	screenshots(t, ctx, shots, "credits")

	// Nothing was kept outside the page's memory.
	var stored string
	if err := run(ctx, chromedp.Evaluate(`localStorage.length + ',' + sessionStorage.length + ',' + document.cookie`, &stored)); err != nil {
		t.Fatal(err)
	}
	if stored != "0,0," {
		t.Errorf("storage after login (localStorage, sessionStorage, cookies): %q", stored)
	}

	// Unbind from My nodes: two presses, then the node leaves the list and the registry
	// records the operator as the side that left.
	if err := run(ctx,
		chromedp.Click("#nav-nodes", chromedp.ByQuery),
		chromedp.WaitVisible(`#nodes-list[aria-busy="false"] `+card[len("#nodes-list "):]+" button.unbind", chromedp.ByQuery),
		// The first press arms the button and shows a notice above the view, which moves it:
		// the second waits for the armed button.
		chromedp.Click(card+" button.unbind", chromedp.ByQuery),
		chromedp.WaitVisible(card+` button.unbind[data-armed="yes"]`, chromedp.ByQuery),
		chromedp.Click(card+` button.unbind[data-armed="yes"]`, chromedp.ByQuery),
		chromedp.WaitNotPresent(card, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("unbinding: %v (error shown: %q)", err, textNow(ctx, "#error"))
	}
	if got := textOf(t, ctx, "#nodes-summary"); !strings.HasPrefix(got, "0 bound nodes") {
		t.Errorf("after unbind: %q", got)
	}
	st, err := c.Status(nctx, ini.BindingSessionID)
	if err != nil || st.Bound == nil || *st.Bound || st.UnboundBy == nil || *st.UnboundBy != "operator" {
		t.Errorf("after unbind the registry says %+v, %v; want bound false, unbound_by operator", st, err)
	}

	// Log out: back to the login view, with the forms empty, and the token dead at the
	// registry.
	token := bearer()
	if token == "" {
		t.Fatal("the page sent no bearer token")
	}
	if err := run(ctx,
		chromedp.Click("#logout-button", chromedp.ByQuery),
		chromedp.WaitVisible("#view-login", chromedp.ByQuery),
		chromedp.WaitVisible("#info", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	var left string
	if err := run(ctx, chromedp.Evaluate(`['seed-text','cred-text','seed-file','cred-file'].map((id) => document.getElementById(id).value).join('') + document.getElementById('nodes-list').textContent`, &left)); err != nil {
		t.Fatal(err)
	}
	if left != "" {
		t.Errorf("after logout the page still holds %q", left)
	}
	if nav := textNow(ctx, "#nav"); !strings.Contains(nav, "Log out") {
		t.Errorf("nav text %q", nav)
	}
	if _, err := c.OperatorNodes(nctx, token, 0); client.CodeOf(err) != "NO_SESSION" {
		t.Errorf("the session token after logout: %v, want NO_SESSION", err)
	}
	var navHidden bool
	if err := run(ctx, chromedp.Evaluate(`document.getElementById('nav').hidden`, &navHidden)); err != nil || !navHidden {
		t.Errorf("the navigation stays visible after logout (%v)", err)
	}
}

// TestConsoleCanonicalVectors builds, in the browser, the bytes of every case of the
// repository's canonical vectors with the console's own module, and signs each with the
// case's seed through WebCrypto: bytes and signatures must match the Go package's exactly.
func TestConsoleCanonicalVectors(t *testing.T) {
	ctx, _ := browser(t)
	base := startSvrpd(t)
	raw := testkit.Raw(t, "canonical.json")
	var vectors struct {
		Cases []json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	script := `(async () => {
	  const canonical = await import('./canonical.js');
	  const keys = await import('./keys.js');
	  const out = { checked: [], failures: [] };
	  for (const c of ` + string(raw) + `.cases) {
	    // As in the Go test: messages 3 and 6 sign the node key in base58 whatever the
	    // request used, a rule of their callers.
	    for (const k of ['public_key', 'node_public_key']) {
	      if ((c.message === 3 || c.message === 6) && c.fields[k]) c.fields[k] = keys.base58Encode(keys.decodeKey(c.fields[k]));
	    }
	    let got;
	    try {
	      got = keys.hexEncode(canonical.bytes(c.prefix, c.message, c.fields));
	    } catch (e) {
	      out.failures.push(c.id + ': ' + e.message);
	      continue;
	    }
	    if (got !== c.expected_hex) {
	      out.failures.push(c.id + ': bytes ' + got + ', want ' + c.expected_hex);
	      continue;
	    }
	    const { privateKey, publicKey } = await keys.importSeed(keys.hexDecode(c.seed_hex));
	    if (keys.base58Encode(publicKey) !== c.public_key_b58) {
	      out.failures.push(c.id + ': public key ' + keys.base58Encode(publicKey));
	    }
	    const sig = await keys.sign(privateKey, keys.hexDecode(got));
	    if (sig !== c.signature_b58) out.failures.push(c.id + ': signature ' + sig + ', want ' + c.signature_b58);
	    out.checked.push(c.message);
	  }
	  // Input that could make two messages share bytes is refused, as in Go.
	  for (const [name, f] of [
	    ['control character', { operator_did: 'a\nb' }],
	    ['lone surrogate', { operator_did: '\ud800' }],
	  ]) {
	    try { canonical.bytes('service', 1, f); out.failures.push('accepted a ' + name); } catch (e) { if (e.code !== 'BAD_REQUEST') out.failures.push(name + ': ' + e.code); }
	  }
	  for (const [name, f] of [
	    ['comma in a list item', { task_types: ['a,b'] }],
	    ['empty list item', { task_types: [''] }],
	    ['negative limit', { single_limit: -1 }],
	    ['limit over 2^53-1', { daily_limit: 2 ** 53 }],
	    ['NaN limit', { daily_limit: NaN }],
	  ]) {
	    try { canonical.bytes('service', 7, f); out.failures.push('accepted a ' + name); } catch (e) { if (e.code !== 'BAD_REQUEST') out.failures.push(name + ': ' + e.code); }
	  }
	  for (const [v, want] of [[1e-7, '0.0000001'], [1.5e-10, '0.00000000015'], [123456789012345680000, '123456789012345680000'], [0.1, '0.1'], [-0, '0']]) {
	    if (canonical.formatNumber(v) !== want) out.failures.push('formatNumber(' + v + ') = ' + canonical.formatNumber(v) + ', want ' + want);
	  }
	  return out;
	})()`
	var res struct {
		Checked  []int    `json:"checked"`
		Failures []string `json:"failures"`
	}
	evalInConsole(t, ctx, base, script, &res)
	for _, f := range res.Failures {
		t.Error(f)
	}
	if len(res.Checked) != len(vectors.Cases) {
		t.Errorf("checked %d of %d cases", len(res.Checked), len(vectors.Cases))
	}
	seen := map[int]bool{}
	for _, m := range res.Checked {
		seen[m] = true
	}
	if !seen[1] || !seen[7] {
		t.Errorf("messages checked %v: 1 (login) and 7 (authorization) are the ones the console signs", seen)
	}
}

// TestConsolePolicyIsEnforced checks that the browser applies the console's policy: script
// text cannot even be written into the page (Trusted Types), an inline style is refused, and
// the browser reports the violations, so the collector the other tests rely on sees them.
func TestConsolePolicyIsEnforced(t *testing.T) {
	ctx, take := browser(t)
	base := startSvrpd(t)
	script := `(() => {
	  const out = { scriptRefused: '', directives: [], color: '' };
	  window.policyProbe = out;
	  document.addEventListener('securitypolicyviolation', (e) => out.directives.push(e.effectiveDirective));
	  try {
	    const s = document.createElement('script');
	    s.textContent = 'window.inlineRan = true';
	    document.body.append(s);
	  } catch (e) {
	    out.scriptRefused = e.name;
	  }
	  const st = document.createElement('style');
	  st.textContent = 'body { color: rgb(1, 2, 3) !important; }';
	  document.head.append(st);
	})()`
	evalInConsole(t, ctx, base, script, nil)
	// The page hears of a violation by an event after the fact: wait for it, then look.
	poll(t, ctx, `window.policyProbe.directives.includes('style-src-elem')`)
	res := evaluate[struct {
		ScriptRefused string   `json:"scriptRefused"`
		Directives    []string `json:"directives"`
		Color         string   `json:"color"`
	}](t, ctx, `({ ...window.policyProbe, color: getComputedStyle(document.body).color })`)
	if res.ScriptRefused != "TypeError" {
		t.Errorf("writing script text into the page was not refused (%q)", res.ScriptRefused)
	}
	if res.Color == "rgb(1, 2, 3)" || !slices.Contains(res.Directives, "style-src-elem") {
		t.Errorf("inline style: color %s, violations %v; want refused by style-src", res.Color, res.Directives)
	}
	// The browser's own report comes over the protocol, after the page's event.
	var reports []string
	for deadline := time.Now().Add(20 * time.Second); len(reports) == 0 && time.Now().Before(deadline); {
		if reports = take(); len(reports) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(reports) == 0 {
		t.Error("the browser reported no violation: the collector would miss one in the other tests")
	}
	t.Logf("the browser reported: %q", reports)
}

// TestConsoleSaysWhenEd25519IsMissing hides WebCrypto Ed25519 from the page, as in a browser
// without it: the page says so plainly and offers no login.
func TestConsoleSaysWhenEd25519IsMissing(t *testing.T) {
	ctx, _ := browser(t)
	base := startSvrpd(t)
	hide := `(() => {
	  const importKey = crypto.subtle.importKey.bind(crypto.subtle);
	  crypto.subtle.importKey = (format, data, alg, ...rest) =>
	    (alg && (alg === 'Ed25519' || alg.name === 'Ed25519'))
	      ? Promise.reject(new DOMException('Unrecognized algorithm name', 'NotSupportedError'))
	      : importKey(format, data, alg, ...rest);
	})()`
	var disabled bool
	if err := run(ctx,
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(hide).Do(ctx)
			return err
		}),
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`body[data-ready="unsupported"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('login-button').disabled`, &disabled),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#unsupported"); !strings.Contains(got, "This browser has no WebCrypto Ed25519") {
		t.Errorf("notice %q", got)
	}
	if !disabled {
		t.Error("the login button is enabled in a browser that cannot sign")
	}
}

// TestConsoleLoginByPasting logs in with the seed and the credential pasted rather than
// loaded, shows a wrong seed refused, and logs out.
func TestConsoleLoginByPasting(t *testing.T) {
	ctx, _ := browser(t)
	base := startSvrpd(t)
	opDir, opDID := operatorFiles(t)
	seed, err := os.ReadFile(filepath.Join(opDir, "device.seed"))
	if err != nil {
		t.Fatal(err)
	}
	cred, err := os.ReadFile(filepath.Join(opDir, "credential.json"))
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("ab", 32) // a valid seed of another key
	if err := run(ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`body[data-ready="yes"]`, chromedp.ByQuery),
		chromedp.Click("#nav-login", chromedp.ByQuery),
		chromedp.SetValue("#seed-text", other, chromedp.ByQuery),
		chromedp.SetValue("#cred-text", string(cred), chromedp.ByQuery),
		chromedp.Click("#login-button", chromedp.ByQuery),
		chromedp.WaitVisible("#error", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#error-text"); got != "the device key is not the one the credential names" {
		t.Errorf("another key's seed: %q", got)
	}
	logIn(t, ctx, opDID,
		chromedp.SetValue("#seed-text", string(seed), chromedp.ByQuery),
		chromedp.SetValue("#cred-text", string(cred), chromedp.ByQuery),
	)
	if err := run(ctx,
		chromedp.Click("#logout-button", chromedp.ByQuery),
		chromedp.WaitVisible("#view-login", chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#info"); !strings.HasPrefix(got, "Logged out. The registry ended the session") {
		t.Errorf("after logout: %q", got)
	}
}
