package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// command is one subcommand of svrpd.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "serve the registry over HTTP (the default)", runServe},
		{"keygen", "create a node key (a seed file) and print its DIDs and fingerprint", runKeygen},
		{"node", "run a node (node run) or bind it to an operator (node bind)", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return runNode(ctx, args, os.Stdin, stdout, stderr)
		}},
		{"operator", "operator identity, login, binding and views (operator init, login, resolve, ...)", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return runOperator(ctx, args, os.Stdin, stdout, stderr)
		}},
		{"bench", "measure a registry: ops/s and latency per scenario against the Ed25519 verify ceiling", runBench},
	}
}

// run dispatches to a subcommand and returns the process exit code: 0 success, 1 failure,
// 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return runServe(ctx, args, stdout, stderr)
	}
	if args[0] == "help" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
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

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("svrpd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and fills every flag the command line left unset from its
// environment variable, named SVRPD_ and the flag's name in upper case with '-' as '_'.
// It returns 0 to go on, or the exit code to stop with.
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q: %v", env, v, err))
			}
		}
	})
	if len(bad) > 0 {
		fmt.Fprintf(fs.Output(), "svrpd: bad environment: %s\n", strings.Join(bad, "; "))
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "svrpd: unexpected argument %s\n", strconv.Quote(fs.Arg(0)))
		return 2, false
	}
	return 0, true
}

func envName(flagName string) string {
	return "SVRPD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
