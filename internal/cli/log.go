package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/translog"
)

// Log is "svrpd log": verify entries of a registry's transparency log, or monitor it.
func Log(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, `Usage: svrpd log <command> [flags]

Commands:
  verify   check that entries are in the registry's log, under its checkpoint
  monitor  replay the whole log and compare it with what the registry serves

Both check the checkpoint's signature by the log's key and that it extends the last one
kept in --state (docs/protocol.md §12.4). Run "svrpd log <command> -h" for the flags.
`)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "verify":
		return runLogVerify(ctx, args[1:], stdout, stderr)
	case "monitor":
		return runLogMonitor(ctx, args[1:], stdout, stderr)
	}
	return usageError(stderr, "log", "unknown command %q", args[0])
}

// logFlags are the flags log verify and log monitor share.
type logFlags struct {
	key    string
	state  string
	client *clientFlags
}

func addLogFlags(fs *flag.FlagSet) *logFlags {
	lf := &logFlags{}
	fs.StringVar(&lf.key, "log-key", "", "the log's verifier key, as svrpd serve prints it (name+hash+base64); default the one kept in --state, else the registry's, trusted on first use")
	fs.StringVar(&lf.state, "state", "", "file keeping the log's key and the last checkpoint accepted, so that the next run refuses a log rolled back or forked (created when absent)")
	lf.client = addClientFlags(fs, false)
	return lf
}

// logState is what --state keeps between runs.
type logState struct {
	Key        string `json:"key"`
	Checkpoint string `json:"checkpoint,omitempty"`
}

// verifier returns the log verifier the flags name, and the state to save after it.
func (lf *logFlags) verifier(ctx context.Context, stderr io.Writer) (*client.LogVerifier, *logState, error) {
	c, err := lf.client.client()
	if err != nil {
		return nil, nil, err
	}
	var st logState
	if lf.state != "" {
		if err := readJSON(lf.state, &st); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
	}
	switch {
	case lf.key != "" && st.Key != "" && lf.key != st.Key:
		return nil, nil, fmt.Errorf("--log-key is not the key kept in %s: a registry's log key does not change", lf.state)
	case lf.key != "":
		st.Key = lf.key
	case st.Key == "":
		if st.Key, err = c.LogKey(ctx); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "svrpd log: trusting the registry's log key on first use: %s\n", st.Key)
	}
	var remembered []byte
	if st.Checkpoint != "" {
		remembered = []byte(st.Checkpoint)
	}
	v, err := client.NewLogVerifier(c, st.Key, remembered)
	return v, &st, err
}

// save keeps the key and the verifier's last checkpoint in --state.
func (lf *logFlags) save(v *client.LogVerifier, st *logState) error {
	if lf.state == "" {
		return nil
	}
	st.Checkpoint = string(v.Remembered())
	return writeJSON(lf.state, st, 0o600)
}

func printCheckpoint(w io.Writer, cp translog.Checkpoint) {
	fmt.Fprintf(w, "checkpoint: %s, %d entries, root %s\n", cp.Origin, cp.Size, cp.Hash)
}

func runLogVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("log verify", stderr)
	lf := addLogFlags(fs)
	pos, code, ok := parsePositional(fs, args, `Usage: svrpd log verify [flags] INDEX...

Reads the registry's checkpoint, checks its signature and that it extends the one kept in
--state, then reads each entry INDEX (the log_index a write's answer carried), proves it is
in the checkpoint, checks its signatures, and prints it.

Example:
  svrpd log verify --registry https://registry.example --state log.json 0 17`)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return usageError(stderr, "log verify", "name at least one INDEX")
	}
	v, st, err := lf.verifier(ctx, stderr)
	if err != nil {
		return fail(stderr, "log verify", err, hintContext{registry: lf.client.registry})
	}
	cp, err := v.Latest(ctx)
	if err != nil {
		return fail(stderr, "log verify", err, hintContext{registry: lf.client.registry})
	}
	printCheckpoint(stdout, cp)
	for _, p := range pos {
		i, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return usageError(stderr, "log verify", "INDEX %q is not a number", p)
		}
		es, err := v.Entries(ctx, cp, i, i+1)
		if err != nil {
			return fail(stderr, "log verify", err, hintContext{registry: lf.client.registry})
		}
		b, _ := es[0].Marshal()
		fmt.Fprintf(stdout, "entry %d: %s %s, in the log, every signature verifies\n%s", i, es[0].Kind, es[0].DID, b)
	}
	if err := lf.save(v, st); err != nil {
		return fail(stderr, "log verify", err, hintContext{})
	}
	return 0
}

func runLogMonitor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("log monitor", stderr)
	lf := addLogFlags(fs)
	if code, ok := parseFlags(fs, args, `Usage: svrpd log monitor [flags]

Replays the registry's whole log at its latest checkpoint (which must extend the one kept
in --state) and compares it with what the registry serves: the key of every listed node,
the state of every binding, every revocation in force (each is sent again: it is signed and
idempotent, so a registry that lost one records it again). Prints each difference and exits
1 when there is any, or when the checkpoint does not extend the last one.

Example, from cron:
  svrpd log monitor --registry https://registry.example --state log.json`); !ok {
		return code
	}
	v, st, err := lf.verifier(ctx, stderr)
	if err != nil {
		return fail(stderr, "log monitor", err, hintContext{registry: lf.client.registry})
	}
	m, err := v.Monitor(ctx)
	if err != nil {
		return fail(stderr, "log monitor", err, hintContext{registry: lf.client.registry})
	}
	printCheckpoint(stdout, m.Checkpoint)
	standing := 0
	for _, b := range m.State.Bindings {
		if b.EndedBy == "" {
			standing++
		}
	}
	fmt.Fprintf(stdout, "replayed: %d node DIDs, %d pins, %d bindings (%d standing), %d revocations in force\n",
		len(m.State.Nodes), len(m.State.Pins), len(m.State.Bindings), standing, len(m.State.Revocations))
	if err := lf.save(v, st); err != nil {
		return fail(stderr, "log monitor", err, hintContext{})
	}
	if len(m.Findings) == 0 {
		fmt.Fprintln(stdout, "the registry serves what its log says")
		return 0
	}
	for _, f := range m.Findings {
		fmt.Fprintf(stdout, "MISMATCH: %s\n", f)
	}
	return 1
}
