// Command svrpd is the svrp registry daemon and its command-line tools.
//
//	svrpd [serve] [flags]     serve the registry (the default command)
//	svrpd <command> [flags]   keygen, node, operator, bench, migrate, backup, restore, version, help
//
// Run "svrpd help" (or -h, --help) for every command and "svrpd <command> -h" for its flags.
// The daemon, the client commands, the load tool and the data tools live in internal/daemon,
// internal/cli, internal/bench and internal/move; this file only picks the command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/svrp/svrp/internal/bench"
	"github.com/svrp/svrp/internal/cli"
	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/internal/move"
)

// main turns the first SIGINT or SIGTERM into a cancelled context, which a command answers
// by shutting down within its bound, and a second one into an immediate exit with status 1:
// an operator who signals twice is not kept waiting by a shutdown that hangs.
func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	// SIGHUP reloads the TLS certificate (systemctl reload); to a daemon with none to reload,
	// or a client command, it means nothing, rather than the end of the process. A channel
	// nobody reads keeps it so for the process's life (Ignore would also silence the
	// daemon's own).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
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
		{"log", "check a registry's transparency log: verify entries (log verify) or replay it against what the registry serves (log monitor)", withoutStdin(cli.Log)},
		{"bench", "load a registry: latency and the daemon's CPU per operation, against one Ed25519 verify", withoutStdin(bench.Main)},
		{"migrate", "copy every record from a Badger data directory or a PostgreSQL database into another, empty one, and verify the counts", withoutStdin(move.Migrate)},
		{"backup", "write a consistent backup of a running daemon's Badger store (--daemon) or of a stopped data directory (--data) to a file", withoutStdin(move.Backup)},
		{"restore", "fill an empty data directory from a backup file", withoutStdin(move.Restore)},
		{"healthcheck", "ask the daemon on this machine for GET /health: exit 0 when it answers 200 (a container's HEALTHCHECK)", withoutStdin(daemon.Healthcheck)},
		{"version", "print the version, VCS revision and build time (also --version)", withoutStdin(version)},
		{"help", `list the commands; "svrpd help COMMAND" shows a command's flags`, withoutStdin(help)},
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
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			usage(stdout)
			return 0
		case "-version", "--version":
			return version(ctx, nil, stdout, stderr)
		}
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return daemon.Main(ctx, args, stdout, stderr)
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
	fmt.Fprintln(w, "       svrpd [flags]             the same as svrpd serve [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "svrpd <command> -h" for a command's flags, for example "svrpd serve -h".`)
	fmt.Fprintln(w, "Every flag can also be set by an environment variable: SVRPD_ and its name in upper case.")
}

// help is "svrpd help [COMMAND]": the command list, or a command's own help.
func help(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] && c.name != "help" && c.name != "version" {
			return c.run(ctx, []string{"-h"}, nil, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "svrpd: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// buildVersion names a build made from a checkout, where the Go toolchain records no module
// version: the container image sets it with -ldflags "-X main.buildVersion=...".
var buildVersion string

// version is "svrpd version": what the Go toolchain recorded in the binary. A build from a
// module version (go install github.com/svrp/svrp/svrpd@v1.2.3) names it; a build from a
// checkout says (devel), or the buildVersion it was given, and names the VCS revision and
// its time when they were recorded.
func version(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "svrpd version: unexpected argument %q\n", args[0])
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "svrpd (no build information)")
		return 0
	}
	printVersion(stdout, bi)
	return 0
}

// printVersion writes the version lines of a binary's build information.
func printVersion(w io.Writer, bi *debug.BuildInfo) {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	v := bi.Main.Version
	if (v == "" || v == "(devel)") && buildVersion != "" {
		v = buildVersion
	}
	fmt.Fprintf(w, "svrpd %s\n", v)
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (with uncommitted changes)"
		}
		fmt.Fprintf(w, "  revision  %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(w, "  time      %s\n", t)
	}
	fmt.Fprintf(w, "  module    %s\n", bi.Main.Path)
	fmt.Fprintf(w, "  go        %s\n", bi.GoVersion)
}
