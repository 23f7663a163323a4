package console_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/internal/console"
	"github.com/svrp/svrp/internal/hints"
)

// readmeStatement returns the README's statement on credits with its code marks removed:
// the words the console must show.
func readmeStatement(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, para := range strings.Split(string(b), "\n\n") {
		if strings.HasPrefix(para, "Credits are a test unit: not cash") {
			return strings.ReplaceAll(strings.Join(strings.Fields(para), " "), "`", "")
		}
	}
	t.Fatal("README.md has no paragraph beginning \"Credits are a test unit: not cash\"")
	return ""
}

func TestStatementIsTheREADMEs(t *testing.T) {
	app, err := fs.ReadFile(console.Files(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	want := "export const STATEMENT = '" + readmeStatement(t) + "';"
	if !strings.Contains(string(app), want) {
		t.Errorf("app.js does not carry the README's statement word for word:\n%s", want)
	}
}

type apiStub struct{}

func (apiStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTeapot)
	io.WriteString(w, `{"api":true}`)
}

func get(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

func TestMount(t *testing.T) {
	h := console.Mount(apiStub{}, "libertynet")

	// Every file is served with its type and the console's headers.
	err := fs.WalkDir(console.Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		target := console.Path + name
		if name == "index.html" {
			target = console.Path
		}
		w := get(t, h, http.MethodGet, target)
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d", target, w.Code)
		}
		if got, want := w.Header().Get("Content-Type"), mime.TypeByExtension(path.Ext(name)); got != want {
			t.Errorf("GET %s: Content-Type %q, want %q", target, got, want)
		}
		if got := w.Header().Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("GET %s: CSP %q", target, got)
		}
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", target, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if w := get(t, h, http.MethodGet, "/console"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != console.Path {
		t.Errorf("GET /console: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if w := get(t, h, http.MethodPost, console.Path); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d", console.Path, w.Code)
	}
	if w := get(t, h, http.MethodGet, console.Path+"nothing.js"); w.Code != http.StatusNotFound {
		t.Errorf("GET a missing file: %d", w.Code)
	}
	// The API keeps every other path, /consoles and /v1/console included.
	for _, p := range []string{"/", "/health", "/consoles", "/v1/console/", "/nodes?x=/console/"} {
		if w := get(t, h, http.MethodGet, p); w.Code != http.StatusTeapot {
			t.Errorf("GET %s went to the console (%d)", p, w.Code)
		}
	}

	// config.json carries the registry's prefix and exactly the CLI's hints.
	w := get(t, h, http.MethodGet, console.Path+"config.json")
	var s console.Settings
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Prefix != "libertynet" {
		t.Errorf("prefix %q", s.Prefix)
	}
	if d := cmp.Diff(hints.All(), s.Hints); d != "" {
		t.Errorf("hints differ from the CLI's (-cli +console):\n%s", d)
	}
}

// TestCSPIsStrict keeps the policy strict: nothing inline, nothing from another origin.
func TestCSPIsStrict(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "data:", "blob:", "*"} {
		if strings.Contains(console.CSP, bad) {
			t.Errorf("CSP allows %q: %s", bad, console.CSP)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(console.CSP, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	// The page itself has no inline script, style or handler that the policy would block.
	inline := regexp.MustCompile(`(?i)<script(?:[^>]*)>[^<]+</script>|<style|\sstyle=|\son[a-z]+=|javascript:|https?://`)
	html, err := fs.ReadFile(console.Files(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	if m := inline.Find(html); m != nil {
		t.Errorf("index.html has inline code or a foreign origin: %q", m)
	}
	// The scripts never write HTML as text (the policy's Trusted Types would refuse it).
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function`)
	err = fs.WalkDir(console.Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || path.Ext(name) != ".js" {
			return err
		}
		b, err := fs.ReadFile(console.Files(), name)
		if m := sinks.Find(b); m != nil {
			t.Errorf("%s uses %q", name, m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
