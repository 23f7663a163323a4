package postgres

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// modelChecks is how many random sequences the model test (storetest's Model, run here over
// the store and over the node cache) tries against PostgreSQL unless -rapid.checks or
// RAPID_CHECKS names a number. Every step of a sequence is some ninety round trips to the
// server, so rapid's default of 100 made the two runs most of this package's time and of the
// server's. The memory store runs the default against the same model and assertions, and
// this many sequences still give each kind of write and each check hundreds of turns here.
const modelChecks = 25

func TestMain(m *testing.M) {
	flag.Parse()
	_, inEnv := os.LookupEnv("RAPID_CHECKS")
	onCommandLine := false
	flag.Visit(func(f *flag.Flag) { onCommandLine = onCommandLine || f.Name == "rapid.checks" })
	if !inEnv && !onCommandLine {
		if err := flag.Set("rapid.checks", strconv.Itoa(modelChecks)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
