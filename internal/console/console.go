// Package console is the operator console in the browser: a small single-page application in
// plain JavaScript modules, embedded in the binary and served by svrpd under /console/. It
// opens on a public view of the network (the registry's counts, history and node listing,
// drawn by the page itself), and after login does what the operator commands do. The
// operator's keys never leave the browser: the page signs the login challenge and the
// AuthorizationCredential itself with WebCrypto Ed25519 and talks to the registry's API on
// the same origin. The server side only serves files, the registry's domain prefix and the
// hint table the CLI uses.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/svrp/svrp/internal/hints"
)

// Path is where the console is served; the API keeps every other path.
const Path = "/console/"

// CSP is the Content-Security-Policy of every console answer: scripts, styles and requests
// only from the registry's own origin, no inline script or style, no frames, no plugins, no
// form posts, and DOM sinks closed by Trusted Types (the page builds its DOM from text nodes).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'"

//go:embed static
var static embed.FS

// Files returns the console's files, for their sizes and for tests.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return sub
}

// Settings is what the page reads from config.json: the domain prefix it must sign under (the
// registry's), and the CLI's hint for every protocol code ({dir} and {registry} unfilled).
type Settings struct {
	Prefix string            `json:"prefix"`
	Hints  map[string]string `json:"hints"`
}

// Handler serves the console under [Path] for a registry that signs under prefix;
// "/console" redirects there.
func Handler(prefix string) http.Handler {
	settings, err := json.Marshal(Settings{Prefix: prefix, Hints: hints.All()})
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	files := http.StripPrefix(Path, http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// Small files, changed only by a new binary: revalidate each time so an upgrade shows.
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch {
		case r.URL.Path == strings.TrimSuffix(Path, "/"):
			http.Redirect(w, r, Path, http.StatusMovedPermanently)
		case r.URL.Path == Path+"config.json":
			h.Set("Content-Type", "application/json")
			w.Write(settings)
		default:
			files.ServeHTTP(w, r)
		}
	})
}

// Mount returns api with the console in front of it: requests for /console and below go to
// the console, every other path to api unchanged.
func Mount(api http.Handler, prefix string) http.Handler {
	c := Handler(prefix)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Path, "/") || strings.HasPrefix(r.URL.Path, Path) {
			c.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
