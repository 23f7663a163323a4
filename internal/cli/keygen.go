// Package cli holds svrpd's client commands: keygen, and the node and operator commands that
// walk a person through registration, login and binding against a registry over HTTP with
// the reference client (registry/client). It never touches a store: everything it does goes
// over the wire, as it would from another machine (see docs/protocol.md).
package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/cmdflag"
)

// Keygen is "svrpd keygen": it writes a new node seed file and prints the key's DIDs and
// fingerprint.
func Keygen(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("keygen", stderr)
	out := fs.String("out", "", "file to write the new key's seed to (required; created with mode 0600)")
	force := fs.Bool("force", false, "replace the file if it exists (destroys the identity it held)")
	addClientFlags(fs, true)
	if code, ok := parseFlags(fs, args, `Usage: svrpd keygen --out FILE [--force]

Creates a new Ed25519 identity for a node. FILE receives the 32-byte seed as 64 hex
characters and a newline, with mode 0600: it is the node's identity, keep it secret.
The seed is never printed; the DIDs, the public key and the fingerprint are. FILE's
folder is created (mode 0700) when missing; a FILE inside a git work tree draws a warning,
since a git add there can take the seed into a commit.

Example:
  svrpd keygen --out ~/.svrp-node/node.seed
  svrpd node run --key ~/.svrp-node/node.seed --endpoint 203.0.113.7:7000`); !ok {
		return code
	}
	if *out == "" {
		return usageError(stderr, "keygen", "--out FILE is required")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fail(stderr, "keygen", err, hintContext{})
	}
	if err := writeSeed(*out, priv.Seed(), *force, stderr); err != nil {
		return fail(stderr, "keygen", err, hintContext{})
	}
	k, _ := didkey.KeyFromEd25519(pub)
	short, _ := didkey.NodeDID(k, didkey.FormShort)
	fallback, _ := didkey.NodeDID(k, didkey.FormFallback)
	full, _ := didkey.NodeDID(k, didkey.FormFull)
	fmt.Fprintf(stdout, "wrote %s (the seed, mode 0600: keep it secret, it is this identity)\n", *out)
	fmt.Fprintf(stdout, "did:                  %s\n", short)
	fmt.Fprintf(stdout, "did (10-hex):         %s\n", fallback)
	fmt.Fprintf(stdout, "did (full):           %s\n", full)
	fmt.Fprintf(stdout, "public key (hex):     %s\n", k.Hex())
	fmt.Fprintf(stdout, "public key (base58):  %s\n", k.Base58())
	fmt.Fprintf(stdout, "fingerprint:          %s\n", k.Fingerprint())
	return 0
}
