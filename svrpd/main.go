// Command svrpd is the svrp registry daemon and its command-line tools.
//
//	svrpd [serve] [flags]     serve the registry (the default command)
//
// Run "svrpd help" for every command and "svrpd serve -h" for the flags. The daemon, the
// client commands and the load tool live in internal/daemon, internal/cli and internal/bench;
// this file only picks the command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/svrp/svrp/internal/bench"
	"github.com/svrp/svrp/internal/cli"
	"github.com/svrp/svrp/internal/daemon"
)

// main turns the first SIGINT or SIGTERM into a cancelled context, which a command answers
// by shutting down within its bound, and a second one into an immediate exit with status 1:
// an operator who signals twice is not kept waiting by a shutdown that hangs.
func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		s := <-sigs
		fmt.Fprintf(os.Stderr, "svrpd: second signal (%v): exiting now, without finishing the shutdown\n", s)
		os.Exit(1)
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	os.Exit(code)
}

// command is one subcommand of svrpd.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "serve the registry over HTTP (the default)", withoutStdin(daemon.Main)},
		{"keygen", "create a node key (a seed file) and print its DIDs and fingerprint", withoutStdin(cli.Keygen)},
		{"node", "run a node (node run) or bind it to an operator (node bind)", cli.Node},
		{"operator", "operator identity, login, binding and views (operator init, login, resolve, ...)", cli.Operator},
		{"bench", "measure a registry: ops/s and latency per scenario against the Ed25519 verify ceiling", withoutStdin(bench.Main)},
	}
}

func withoutStdin(f func(ctx context.Context, args []string, stdout, stderr io.Writer) int) func(context.Context, []string, io.Reader, io.Writer, io.Writer) int {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return f(ctx, args, stdout, stderr)
	}
}

// run dispatches to a subcommand and returns the process exit code: 0 success, 1 failure,
// 2 bad usage.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return daemon.Main(ctx, args, stdout, stderr)
	}
	if args[0] == "help" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "svrpd: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "svrpd is the svrp registry daemon and its command-line tools.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: svrpd <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-18s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "svrpd <command> -h" for a command's flags.`)
}
