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
)

// New returns a flag set for the command "svrpd name" that reports errors to stderr instead
// of exiting.
func New(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("svrpd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
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

// EnvName is the environment variable that sets the flag flagName.
func EnvName(flagName string) string {
	return "SVRPD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
