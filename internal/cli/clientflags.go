package cli

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/internal/hints"
	"github.com/svrp/svrp/registry/client"
)

// defaultRegistry is where the client commands look for a registry: the address svrpd serve
// listens on by default.
const defaultRegistry = "http://127.0.0.1:8080"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	registry string
	prefix   string
}

// addClientFlags registers --registry and --prefix. offline commands take them too, so that
// one set of flags or environment works for every command, but never contact the registry.
func addClientFlags(fs *flag.FlagSet, offline bool) *clientFlags {
	cf := &clientFlags{}
	what := "registry URL (env SVRPD_REGISTRY)"
	if offline {
		what += "; this command does not contact it"
	}
	fs.StringVar(&cf.registry, "registry", defaultRegistry, what)
	fs.StringVar(&cf.prefix, "prefix", canonical.DefaultPrefix, "domain prefix of every signed message; must be the registry's (env SVRPD_PREFIX)")
	return cf
}

func (cf *clientFlags) client() (*client.Client, error) {
	return client.New(cf.registry, client.WithPrefix(cf.prefix))
}

// stringList is a flag that may be repeated; each use adds one item, and a comma-separated
// value adds several.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// termsFlags are --task-type, --single-limit and --daily-limit: the terms of a binding, as
// a node asks for them or an operator grants them.
type termsFlags struct {
	tasks         stringList
	single, daily optFloat
}

// addTermsFlags defines the terms flags on fs with their help texts, which say whose terms
// they are.
func addTermsFlags(fs *flag.FlagSet, tasksHelp, singleHelp, dailyHelp string) *termsFlags {
	tf := &termsFlags{}
	fs.Var(&tf.tasks, "task-type", tasksHelp)
	fs.Var(&tf.single, "single-limit", singleHelp)
	fs.Var(&tf.daily, "daily-limit", dailyHelp)
	return tf
}

// optFloat is a number flag that can also be left unset, which is different from 0: an unset
// limit is null on the wire, "no cap".
type optFloat struct{ v *float64 }

func (f *optFloat) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return canonical.FormatNumber(*f.v)
}

func (f *optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("want a number")
	}
	if err := canonical.CheckNumber("limit", v); err != nil {
		return errors.New("want a number from 0 to 9007199254740991")
	}
	f.v = &v
	return nil
}

// didForm reads the --did-form flag.
func didForm(s string) (didkey.Form, error) {
	switch s {
	case "short":
		return didkey.FormShort, nil
	case "fallback":
		return didkey.FormFallback, nil
	case "full":
		return didkey.FormFull, nil
	}
	return didkey.FormInvalid, fmt.Errorf("--did-form %q: want short, fallback or full", s)
}

// parseFlags parses the flags of a command whose -h text is usage, then its flags.
func parseFlags(fs *flag.FlagSet, args []string, usage string) (int, bool) {
	cmdflag.SetUsage(fs, usage)
	return cmdflag.Parse(fs, args)
}

// parsePositional is parseFlags for a command that takes positional arguments, anywhere among
// its flags; it returns them.
func parsePositional(fs *flag.FlagSet, args []string, usage string) ([]string, int, bool) {
	pos, flags := splitPositional(fs, args)
	code, ok := parseFlags(fs, flags, usage)
	return pos, code, ok
}

// splitPositional separates positional arguments from flags, so that "resolve CODE --dir D"
// and "resolve --dir D CODE" both work with a flag set that stops at the first positional.
func splitPositional(fs *flag.FlagSet, args []string) (positional, flags []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(positional, args[i+1:]...), flags
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return positional, flags
}

// Seed files hold a 32-byte Ed25519 seed as 64 hex characters and a newline: printable, so a
// person can copy one onto paper or an offline machine, and mode 0600.
const maxSeedFile = 1 << 10

// writeSeed writes a new seed file with mode 0600, creating its folder (mode 0700) when
// missing. It refuses to replace an existing file unless force is set, since that would
// destroy an identity, and warns on stderr when the file lands inside a git work tree.
func writeSeed(path string, seed []byte, force bool, stderr io.Writer) error {
	if force {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if root, ok := gitWorkTree(path); ok {
		fmt.Fprintf(stderr, "svrpd: warning: %s is inside the git work tree %s, where a git add can take it into a commit: keep seeds outside the checkout, or in a path its .gitignore lists\n", path, root)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s already exists; it may be an identity in use (pass --force to replace it)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(hex.EncodeToString(seed) + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// gitWorkTree returns the root of the git work tree holding path's folder, found as git finds
// it, by the nearest folder upwards with a .git entry (a folder, or a file in a linked work
// tree).
func gitWorkTree(path string) (string, bool) {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// readSeed reads a seed file and returns its private key. It warns on stderr when others may
// read the file. Error texts never quote the file's content.
func readSeed(path string, stderr io.Writer) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(stderr, "svrpd: warning: %s is readable by others (mode %04o); run: chmod 600 %s\n", path, st.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSeedFile+1))
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	seed, err := hex.DecodeString(s)
	if len(b) > maxSeedFile || err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is not a seed file (want 64 hex characters, as svrpd keygen writes)", path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// writeFileAtomic writes data to path through a temporary file in the same directory, so a
// reader never sees half a file, with the given mode whatever the umask leaves.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeJSON(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), mode)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	return nil
}

// hintContext fills the placeholders of a hint.
type hintContext struct {
	dir      string
	registry string
}

// fail prints err as one line with its protocol code, then a hint when there is one, and
// returns exit code 1.
func fail(stderr io.Writer, cmd string, err error, hc hintContext) int {
	code := client.CodeOf(err)
	msg := err.Error()
	var e *client.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	if code != "" && !strings.Contains(msg, string(code)) {
		msg = string(code) + ": " + msg
	}
	fmt.Fprintf(stderr, "svrpd %s: %s\n", cmd, msg)
	if h, ok := hints.For(code, hc.dir, hc.registry); ok {
		fmt.Fprintf(stderr, "hint: %s\n", h)
	}
	return 1
}

// usageError prints a usage mistake and returns exit code 2.
func usageError(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "svrpd %s: %s\n", cmd, fmt.Sprintf(format, args...))
	fmt.Fprintf(stderr, "run: svrpd %s -h\n", cmd)
	return 2
}

// lineReader reads answers from the person, one line at a time, without blocking past ctx.
type lineReader struct {
	lines chan string
	err   error
}

// newLineReader starts reading r in a goroutine, which lives until EOF or until nobody takes
// its next line: a command reads standard input only from its one prompt, and the process
// ends with the command.
func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
		close(lr.lines)
	}()
	return lr
}

// errNoAnswer is the end of input before an answer.
var errNoAnswer = errors.New("no answer (end of input)")

// ask prints question and waits for y or n; anything else asks again.
func ask(ctx context.Context, in *lineReader, out io.Writer, question string) (bool, error) {
	for {
		fmt.Fprintf(out, "%s [y/n] ", question)
		select {
		case <-ctx.Done():
			fmt.Fprintln(out)
			return false, ctx.Err()
		case line, ok := <-in.lines:
			if !ok {
				fmt.Fprintln(out)
				return false, errNoAnswer
			}
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				return true, nil
			case "n", "no":
				return false, nil
			}
		}
	}
}

// limitText renders a limit for people: a number, or "no cap" for null.
func limitText(v *float64) string {
	if v == nil {
		return "no cap"
	}
	return canonical.FormatNumber(*v)
}

// listText renders a list for people.
func listText(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return strings.Join(items, ", ")
}

// groupCode writes a short code in two groups of four, easier to read out and compare.
func groupCode(code string) string {
	if len(code) == 8 {
		return code[:4] + "-" + code[4:]
	}
	return code
}
