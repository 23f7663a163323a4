// Package cmdflag holds the flag conventions every svrpd command shares: flag sets that report
// errors instead of exiting, and environment variables (SVRPD_ and the flag's name in upper
// case, '-' as '_') that fill whatever the command line left unset.
package cmdflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// New returns a flag set for the command "svrpd name" that reports errors to stderr instead
// of exiting.
func New(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("svrpd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// SetUsage makes the -h text of fs its usage line, then each paragraph after a blank line,
// then its flags.
func SetUsage(fs *flag.FlagSet, usage string, paragraphs ...string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, usage)
		for _, p := range paragraphs {
			fmt.Fprintln(w, "\n"+p)
		}
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
}

// Parse parses args and fills every flag the command line left unset from its environment
// variable. It returns (0, true) to go on, or the exit code to stop with and false: 0 after
// -h, 2 after a usage error.
func Parse(fs *flag.FlagSet, args []string) (int, bool) {
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
		env := EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			// fs.Set, not f.Value.Set: a flag the environment set counts as set (IsSet).
			if err := fs.Set(f.Name, v); err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q: %s", env, v, want(f, err)))
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

// EnvName is the environment variable that sets the flag flagName.
func EnvName(flagName string) string {
	return "SVRPD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// want says what a flag's value must look like, where the flag package's own error ("parse
// error") would not.
func want(f *flag.Flag, err error) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "want true or false (also 1 or 0)"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case time.Duration:
		return "want a duration with its unit, such as 10s, 5m or 1h"
	case int, int64, uint, uint64:
		return "want a whole number"
	case float64:
		return "want a number"
	}
	return err.Error()
}

// IsSet reports whether the command line or the environment set the flag name.
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
