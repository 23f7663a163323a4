package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/svrp/svrp/internal/cmdflag"
)

// healthcheckTimeout bounds one check: a daemon that cannot answer /health from memory
// within it is not healthy.
const healthcheckTimeout = 5 * time.Second

// Healthcheck is "svrpd healthcheck": it asks the daemon on this machine for GET /health and
// exits 0 when it answers 200, 1 otherwise. It reads the same SVRPD_ variables as serve
// (SVRPD_LISTEN, SVRPD_TLS_CERT, SVRPD_ACME_DOMAIN), so a container's HEALTHCHECK needs no
// flags and no tool beside svrpd. Over TLS the certificate is not checked: the check is of
// the daemon's life on loopback, where a certificate names the public host.
func Healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("healthcheck", stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "the daemon's --listen address")
	cert := fs.String("tls-cert", "", "the daemon's --tls-cert: ask over HTTPS")
	acme := fs.String("acme-domain", "", "the daemon's --acme-domain: ask over HTTPS")
	path := fs.String("path", "/health", "the path to ask: /health (alive) or /ready (takes writes)")
	cmdflag.SetUsage(fs, "Usage: svrpd healthcheck [flags]",
		"Asks the daemon on this machine for GET /health; exits 0 when it answers 200, else 1. Reads serve's SVRPD_ variables.")
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	host, port, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd healthcheck: --listen %q: want host:port\n", *listen)
		return 2
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	hc := &http.Client{Timeout: healthcheckTimeout}
	if *cert != "" || *acme != "" {
		scheme = "https"
		name, _, _ := strings.Cut(*acme, ",")
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: strings.TrimSpace(name)}}
	}
	req, err := http.NewRequestWithContext(ctx, "GET", scheme+"://"+net.JoinHostPort(host, port)+*path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd healthcheck: %v\n", err)
		return 2
	}
	res, err := hc.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd healthcheck: %v\n", err)
		return 1
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	fmt.Fprintf(stdout, "%s %s: %d %s", req.Method, req.URL, res.StatusCode, body)
	if res.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
