package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// Files of an operator directory.
const (
	rootSeedFile   = "root.seed"       // the root key: needed only to issue a credential
	deviceSeedFile = "device.seed"     // the device key: logs in and signs authorizations
	credentialFile = "credential.json" // the root key's word for the device key
	sessionFile    = "session"         // the bearer session of the last login
	resolvedFile   = "resolved.json"   // the binding request the operator last resolved
)

type operatorCommand struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func operatorCommands() []operatorCommand {
	return []operatorCommand{
		{"init", "create a root key, a device key and a device credential (offline)", runOperatorInit},
		{"login", "log in with the device key; the session lasts one hour", runOperatorLogin},
		{"logout", "end the session of the last login", runOperatorLogout},
		{"revoke", "revoke a lost device's credential with the root key (or prepare the revocation)", runOperatorRevoke},
		{"resolve", "show what a node's short code asks for, and its fingerprint", runOperatorResolve},
		{"authorize", "grant the resolved request (by default exactly what the node asked)", runOperatorAuthorize},
		{"reject", "refuse the resolved request", runOperatorReject},
		{"cancel", "cancel a binding session this operator resolved", runOperatorCancel},
		{"unbind", "end a binding of this operator, by node DID or binding session", runOperatorUnbind},
		{"nodes", "list the nodes bound to this operator", runOperatorNodes},
		{"credits", "show the credits view (a test unit; not yet wired)", runOperatorCredits},
		{"evidence", "show the evidence view (not yet wired)", runOperatorEvidence},
	}
}

// Operator is "svrpd operator": identity, login, the binding steps and the views.
func Operator(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, "Usage: svrpd operator <command> --dir DIR [flags]")
		fmt.Fprintln(stderr, "\nDIR holds the operator's keys, credential and session (created by operator init).")
		fmt.Fprintln(stderr, "\nCommands:")
		for _, c := range operatorCommands() {
			fmt.Fprintf(stderr, "  %-10s %s\n", c.name, c.summary)
		}
		fmt.Fprintln(stderr, "\nRun \"svrpd operator <command> -h\" for a command's flags.")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range operatorCommands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	return usageError(stderr, "operator", "unknown command %q", args[0])
}

// operatorFlags are the flags every operator command takes.
type operatorFlags struct {
	dir    string
	client *clientFlags
}

func addOperatorFlags(fs *flag.FlagSet, offline bool) *operatorFlags {
	of := &operatorFlags{}
	fs.StringVar(&of.dir, "dir", "", "the operator directory (required; env SVRPD_DIR)")
	of.client = addClientFlags(fs, offline)
	return of
}

func (of *operatorFlags) path(name string) string { return filepath.Join(of.dir, name) }

func (of *operatorFlags) hints() hintContext {
	return hintContext{dir: of.dir, registry: of.client.registry}
}

// parse parses the flags of an operator command with usage text, allowing positional
// arguments anywhere, and checks --dir.
func (of *operatorFlags) parse(fs *flag.FlagSet, args []string, usage string, positional int) ([]string, int, bool) {
	pos, code, ok := parsePositional(fs, args, usage)
	if !ok {
		return nil, code, false
	}
	name := strings.TrimPrefix(fs.Name(), "svrpd ")
	if len(pos) > positional {
		return nil, usageError(fs.Output(), name, "unexpected argument %q", pos[positional]), false
	}
	if of.dir == "" {
		return nil, usageError(fs.Output(), name, "--dir DIR is required"), false
	}
	return pos, 0, true
}

// savedSession is the content of DIR/session. The token is a secret: the file is 0600 and
// nothing prints it.
type savedSession struct {
	OperatorDID string    `json:"operator_did"`
	Token       string    `json:"token"`
	ExpiresAt   time.Time `json:"expires_at"`
	Registry    string    `json:"registry"`
}

// operator returns the logged-in operator of the directory. withDevice also loads the device
// key and credential, which only authorize needs.
func (of *operatorFlags) operator(stderr io.Writer, withDevice bool) (*client.Operator, error) {
	c, err := of.client.client()
	if err != nil {
		return nil, err
	}
	var s savedSession
	if err := readJSON(of.path(sessionFile), &s); errors.Is(err, os.ErrNotExist) {
		return nil, proto.New(proto.NoSession, "not logged in: "+of.path(sessionFile)+" does not exist")
	} else if err != nil {
		return nil, err
	}
	if !time.Now().Before(s.ExpiresAt) {
		return nil, proto.New(proto.SessionExpired, "the session of "+of.path(sessionFile)+" ended at "+canonical.FormatTime(s.ExpiresAt))
	}
	if s.Registry != "" && s.Registry != c.BaseURL() {
		return nil, proto.New(proto.NoSession, "the session in "+of.path(sessionFile)+" is for "+s.Registry+", not "+c.BaseURL())
	}
	op := &client.Operator{Client: c, DID: s.OperatorDID, Token: s.Token, ExpiresAt: s.ExpiresAt}
	if withDevice {
		if op.DeviceKey, op.Credential, err = of.device(stderr); err != nil {
			return nil, err
		}
	}
	return op, nil
}

func (of *operatorFlags) device(stderr io.Writer) (ed25519.PrivateKey, authn.DeviceCredential, error) {
	var dc authn.DeviceCredential
	key, err := readSeed(of.path(deviceSeedFile), stderr)
	if err != nil {
		return nil, dc, err
	}
	if err := readJSON(of.path(credentialFile), &dc); err != nil {
		return nil, dc, err
	}
	return key, dc, nil
}

func runOperatorInit(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator init", stderr)
	of := addOperatorFlags(fs, true)
	validFor := fs.Duration("valid-for", client.DefaultCredentialValidity, "how long the device credential is valid")
	force := fs.Bool("force", false, "replace existing keys (destroys the identity they held)")
	rootFile := fs.String("root", "", "use the root key in `FILE` instead of creating one: a new device for an existing operator")
	prepare := fs.String("prepare-revocation", "", "also write to `FILE` the signed revocation of the new device credential, not sent")
	_, code, ok := of.parse(fs, args, `Usage: svrpd operator init --dir DIR [--valid-for 8760h] [--root FILE] [--prepare-revocation FILE] [--force]

Creates an operator identity, all offline: a root key (its DID is the operator's DID), a
device key, and a DeviceCredential in which the root key lets the device key bind nodes
(permission nodes.bind). Writes DIR/root.seed and DIR/device.seed (mode 0600) and
DIR/credential.json. After this the root key can go offline.

With --root, the root key of an existing operator vouches for a new device key instead
(after a device was lost and revoked, say); DIR/root.seed is then not written.

--prepare-revocation FILE writes, now, the root key's revocation of the new device
credential without sending it. Keep it with the root key: the day the device is lost,
svrpd operator revoke --send FILE ends it without needing the root key at hand.

Examples:
  svrpd operator init --dir ~/.svrp-operator --prepare-revocation ~/revoke-laptop.json
  svrpd operator init --dir ~/.svrp-phone --root /media/usb/root.seed`, 0)
	if !ok {
		return code
	}
	const cmd = "operator init"
	if *validFor <= 0 {
		return usageError(stderr, cmd, "--valid-for must be positive")
	}
	if err := os.MkdirAll(of.dir, 0o700); err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	if !*force {
		for _, f := range []string{rootSeedFile, deviceSeedFile, credentialFile} {
			if f == rootSeedFile && *rootFile != "" {
				continue
			}
			if _, err := os.Stat(of.path(f)); err == nil {
				return fail(stderr, cmd, fmt.Errorf("%s already exists; this directory holds an operator (pass --force to replace it)", of.path(f)), of.hints())
			}
		}
	}
	rootPub, root, err := ed25519.GenerateKey(rand.Reader)
	if *rootFile != "" {
		if root, err = readSeed(*rootFile, stderr); err == nil {
			rootPub = root.Public().(ed25519.PublicKey)
		}
	}
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	devPub, dev, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	dc, err := client.IssueDeviceCredential(root, devPub, client.CredentialOptions{Prefix: of.client.prefix, Validity: *validFor})
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	for _, step := range []func() error{
		func() error {
			if *rootFile != "" {
				return nil
			}
			return writeSeed(of.path(rootSeedFile), root.Seed(), *force, stderr)
		},
		func() error { return writeSeed(of.path(deviceSeedFile), dev.Seed(), *force, stderr) },
		func() error { return writeJSON(of.path(credentialFile), dc, 0o644) },
		func() error {
			if *prepare == "" {
				return nil
			}
			_, err := prepareRevocation(*prepare, root, of.client.prefix, dc)
			return err
		},
	} {
		if err := step(); err != nil {
			return fail(stderr, cmd, err, of.hints())
		}
	}
	os.Remove(of.path(sessionFile))
	os.Remove(of.path(resolvedFile))
	rk, _ := didkey.KeyFromEd25519(rootPub)
	dk, _ := didkey.KeyFromEd25519(devPub)
	fmt.Fprintf(stdout, "operator DID:  %s\n\n", dc.OperatorDID)
	if *rootFile == "" {
		fmt.Fprintf(stdout, "wrote %s        root key (mode 0600), fingerprint %s\n", of.path(rootSeedFile), rk.Fingerprint())
	} else {
		fmt.Fprintf(stdout, "used  %s  root key, fingerprint %s (not copied)\n", *rootFile, rk.Fingerprint())
	}
	fmt.Fprintf(stdout, "wrote %s      device key (mode 0600), fingerprint %s\n", of.path(deviceSeedFile), dk.Fingerprint())
	fmt.Fprintf(stdout, "wrote %s  device credential: %s, valid until %s\n", of.path(credentialFile), strings.Join(dc.Permissions, ","), dc.ExpiresAt)
	fmt.Fprintf(stdout, "%s\n\n", revocationLine(dc))
	if *prepare != "" {
		printPrepared(stdout, *prepare, authn.SignedRevocation{Revocation: canonical.Revocation{OperatorDID: dc.OperatorDID, RevocationID: dc.RevocationID}})
		fmt.Fprintln(stdout)
	} else {
		fmt.Fprintf(stdout, "To be ready for a lost device, prepare its revocation now and keep it with the root key:\n")
		fmt.Fprintf(stdout, "  svrpd operator revoke --dir %s --out FILE   (or pass --prepare-revocation FILE to init)\n\n", of.dir)
	}
	fmt.Fprintf(stdout, "The root key is needed again only to issue a new device credential or to revoke one.\n")
	if *rootFile == "" {
		fmt.Fprintf(stdout, "Move %s offline now (for example to a USB stick in a drawer) and delete it here.\n\n", of.path(rootSeedFile))
	} else {
		fmt.Fprintf(stdout, "Put %s back offline.\n\n", *rootFile)
	}
	fmt.Fprintf(stdout, "next: svrpd operator login --dir %s\n", of.dir)
	return 0
}

func runOperatorLogin(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator login", stderr)
	of := addOperatorFlags(fs, false)
	_, code, ok := of.parse(fs, args, `Usage: svrpd operator login --dir DIR

Logs in with the device key: fetches a challenge, signs it, and keeps the session in
DIR/session (mode 0600). Sessions last one hour and are never refreshed; log in again
after that.`, 0)
	if !ok {
		return code
	}
	const cmd = "operator login"
	c, err := of.client.client()
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	key, dc, err := of.device(stderr)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	op, err := c.Login(ctx, key, dc)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	s := savedSession{OperatorDID: op.DID, Token: op.Token, ExpiresAt: op.ExpiresAt, Registry: c.BaseURL()}
	if err := writeJSON(of.path(sessionFile), s, 0o600); err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	fmt.Fprintf(stdout, "logged in as %s\n", op.DID)
	fmt.Fprintf(stdout, "session valid until %s (one hour); kept in %s\n", canonical.FormatTime(op.ExpiresAt), of.path(sessionFile))
	return 0
}

func runOperatorResolve(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator resolve", stderr)
	of := addOperatorFlags(fs, false)
	nodeDID := fs.String("node", "", "the `DID` of the node, as it shows it beside the code (required)")
	pos, code, ok := of.parse(fs, args, `Usage: svrpd operator resolve CODE --node DID --dir DIR

Shows what the node that displays CODE and DID asks for, and its key's FINGERPRINT. Compare
the fingerprint with the one on the node's own screen: authorize only if they are the same,
or you may adopt a node someone else controls. A code works once, and only with the DID of
the node that shows it.`, 1)
	if !ok {
		return code
	}
	const cmd = "operator resolve"
	if len(pos) != 1 {
		return usageError(stderr, cmd, "the short code is required: svrpd operator resolve CODE --node DID --dir DIR")
	}
	if *nodeDID == "" {
		return usageError(stderr, cmd, "--node DID is required: the node shows its DID beside the code")
	}
	op, err := of.operator(stderr, false)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	v, err := op.ResolveNode(ctx, *nodeDID, pos[0])
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	if err := writeJSON(of.path(resolvedFile), v, 0o600); err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	fmt.Fprintf(stdout, "binding request %s (%s, expires %s)\n", v.BindingSessionID, v.State, v.ExpiresAt)
	fmt.Fprintf(stdout, "    node:          %s\n", v.NodeDID)
	fmt.Fprintf(stdout, "    device:        %s\n", orNone(v.DeviceSummary))
	fmt.Fprintf(stdout, "    os:            %s\n", orNone(v.OS))
	fmt.Fprintf(stdout, "    region:        %s\n", orNone(v.Region))
	fmt.Fprintf(stdout, "    task types:    %s\n", listText(v.Requested.TaskTypes))
	fmt.Fprintf(stdout, "    single limit:  %s\n", limitText(v.Requested.SingleLimit))
	fmt.Fprintf(stdout, "    daily limit:   %s\n\n", limitText(v.Requested.DailyLimit))
	fmt.Fprintf(stdout, "    FINGERPRINT:   %s\n\n", v.NodePublicKeyFingerprint)
	fmt.Fprintf(stdout, "Compare this fingerprint with the one on the node's screen. Only if they match:\n")
	fmt.Fprintf(stdout, "    svrpd operator authorize --dir %s\n", of.dir)
	fmt.Fprintf(stdout, "otherwise refuse:\n    svrpd operator reject --dir %s\n", of.dir)
	return 0
}

// resolvedSession returns the last resolved request, which must be the session id given
// (when one is).
func (of *operatorFlags) resolvedSession(id string) (api.ResolveView, error) {
	var v api.ResolveView
	err := readJSON(of.path(resolvedFile), &v)
	if errors.Is(err, os.ErrNotExist) {
		return v, fmt.Errorf("no resolved request in %s; run first: svrpd operator resolve CODE --node DID --dir %s", of.dir, of.dir)
	}
	if err != nil {
		return v, err
	}
	if id != "" && v.BindingSessionID != id {
		return v, fmt.Errorf("the last resolved request is %s, not %s; resolve the code of %s first", v.BindingSessionID, id, id)
	}
	return v, nil
}

func runOperatorAuthorize(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator authorize", stderr)
	of := addOperatorFlags(fs, false)
	session := fs.String("session", "", "binding session id (default: the last resolved one)")
	granted := addTermsFlags(fs, "grant this task `type` (repeatable; default: every one the node asked for)",
		"grant this single limit `N` (default: the node's)",
		"grant this daily limit `N` (default: the node's)")
	validFor := fs.Duration("valid-for", client.DefaultAuthorizationValidity, "how long the authorization is valid")
	_, code, ok := of.parse(fs, args, `Usage: svrpd operator authorize --dir DIR [--session ID] [--task-type T ...] [--single-limit N] [--daily-limit N]

Signs an AuthorizationCredential for the last resolved request with the device key and
sends it. By default it grants exactly what the node asked for; the flags grant less
(never more). The node then sees the terms and accepts or rejects them.`, 0)
	if !ok {
		return code
	}
	const cmd = "operator authorize"
	v, err := of.resolvedSession(*session)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	op, err := of.operator(stderr, true)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	terms := client.Requested(v)
	if len(granted.tasks) > 0 {
		terms.TaskTypes = granted.tasks
	}
	if granted.single.v != nil {
		terms.SingleLimit = granted.single.v
	}
	if granted.daily.v != nil {
		terms.DailyLimit = granted.daily.v
	}
	terms.Validity = *validFor
	st, err := op.Authorize(ctx, v, terms)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	os.Remove(of.path(resolvedFile))
	fmt.Fprintf(stdout, "authorized %s: %s\n", v.BindingSessionID, st.State)
	fmt.Fprintf(stdout, "    node:          %s\n", v.NodeDID)
	fmt.Fprintf(stdout, "    task types:    %s\n", listText(terms.TaskTypes))
	fmt.Fprintf(stdout, "    single limit:  %s\n", limitText(terms.SingleLimit))
	fmt.Fprintf(stdout, "    daily limit:   %s\n", limitText(terms.DailyLimit))
	fmt.Fprintf(stdout, "the node now shows these terms and accepts or rejects them; then: svrpd operator nodes --dir %s\n", of.dir)
	return 0
}

func runOperatorReject(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return operatorEndSession(ctx, args, stdout, stderr, "reject", `Usage: svrpd operator reject --dir DIR [--session ID]

Refuses a resolved request (the session becomes REJECTED_BY_OPERATOR).`,
		(*client.Operator).Reject)
}

func runOperatorCancel(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return operatorEndSession(ctx, args, stdout, stderr, "cancel", `Usage: svrpd operator cancel --dir DIR [--session ID]

Cancels a binding session this operator resolved, in any state before it ends.`,
		(*client.Operator).Cancel)
}

func operatorEndSession(ctx context.Context, args []string, stdout, stderr io.Writer, name, usage string,
	act func(*client.Operator, context.Context, string) (api.StateResult, error)) int {
	fs := cmdflag.New("operator "+name, stderr)
	of := addOperatorFlags(fs, false)
	session := fs.String("session", "", "binding session id (default: the last resolved one)")
	_, code, ok := of.parse(fs, args, usage, 0)
	if !ok {
		return code
	}
	cmd := "operator " + name
	id := *session
	if id == "" {
		v, err := of.resolvedSession("")
		if err != nil {
			return fail(stderr, cmd, err, of.hints())
		}
		id = v.BindingSessionID
	}
	op, err := of.operator(stderr, false)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	st, err := act(op, ctx, id)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	if v, err := of.resolvedSession(""); err == nil && v.BindingSessionID == id {
		os.Remove(of.path(resolvedFile))
	}
	fmt.Fprintf(stdout, "binding session %s: %s\n", id, st.State)
	return 0
}

func runOperatorNodes(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator nodes", stderr)
	of := addOperatorFlags(fs, false)
	within := fs.Int("online-within", int(client.DefaultOnlineWindow/time.Second), "a node is online when seen within this many seconds")
	_, code, ok := of.parse(fs, args, `Usage: svrpd operator nodes --dir DIR [--online-within 600]

Lists the nodes bound to this operator, whether each is online (seen recently), when it
was last seen and the limits agreed at binding time.`, 0)
	if !ok {
		return code
	}
	const cmd = "operator nodes"
	if *within <= 0 {
		return usageError(stderr, cmd, "--online-within must be a positive number of seconds")
	}
	op, err := of.operator(stderr, false)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	window := time.Duration(*within) * time.Second
	res, err := op.Nodes(ctx, window)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	plural := "s"
	if res.Count == 1 {
		plural = ""
	}
	fmt.Fprintf(stdout, "%s has %d bound node%s (online: seen within %ds)\n", res.OperatorDID, res.Count, plural, *within)
	if res.Count == 0 {
		fmt.Fprintln(stdout, "bind one: run svrpd node bind on the node, then svrpd operator resolve CODE --node DID here")
		return 0
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tONLINE\tLAST SEEN\tTASK TYPES\tSINGLE LIMIT\tDAILY LIMIT\tENDPOINT")
	for _, n := range res.Nodes {
		online := "no"
		if n.Online {
			online = "yes"
		}
		a := n.Authorization
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.NodeDID, online, orText(n.LastSeen, "never"),
			listText(a.TaskTypes), limitText(a.SingleLimit), limitText(a.DailyLimit), orText(n.Endpoint, "-"))
	}
	tw.Flush()
	return 0
}

func runOperatorCredits(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runOperatorView(ctx, args, stdout, stderr, "credits", `Usage: svrpd operator credits --dir DIR

Shows the credits view. Credits are a test unit, not money; while the view's source is not
"ledger" every amount is a placeholder.`, (*client.Operator).Credits, printCredits)
}

// runOperatorView is an operator command that fetches one view of the logged-in operator and
// prints it.
func runOperatorView[T any](ctx context.Context, args []string, stdout, stderr io.Writer, name, usage string,
	fetch func(*client.Operator, context.Context) (T, error), print func(io.Writer, T)) int {
	fs := cmdflag.New("operator "+name, stderr)
	of := addOperatorFlags(fs, false)
	if _, code, ok := of.parse(fs, args, usage, 0); !ok {
		return code
	}
	cmd := "operator " + name
	op, err := of.operator(stderr, false)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	v, err := fetch(op, ctx)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	print(stdout, v)
	return 0
}

// printCredits never shows an amount without the test-unit statement, nor, while no ledger
// stands behind the view, without the warning that amounts are placeholders; and it never
// adds the buckets up.
func printCredits(w io.Writer, c api.Credits) {
	fmt.Fprintf(w, "operator:  %s\n", c.OperatorDID)
	fmt.Fprintf(w, "unit:      %s\n", c.Unit)
	fmt.Fprintf(w, "source:    %s\n\n", c.Source)
	fmt.Fprintln(w, "Credits are a test unit: not cash, not redeemable, not convertible, and not a claim on future value.")
	if c.Disclaimer != "" {
		fmt.Fprintf(w, "The registry's disclaimer: %s\n", c.Disclaimer)
	}
	if c.Source != client.SourceLedger {
		fmt.Fprintln(w, "\nNOT YET WIRED: amounts are placeholders, not measurements. A zero means nothing is counting, not that nothing was earned.")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, b := range []struct {
		name string
		a    api.Amount
	}{{"settled", c.Settled}, {"pending", c.Pending}, {"estimated", c.Estimated}} {
		fmt.Fprintf(tw, "  %s:\t%s %s\t%s\n", b.name, canonical.FormatNumber(b.a.Amount), c.Unit, b.a.Meaning)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nThe three amounts mean different things and are never added up.")
}

func runOperatorEvidence(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runOperatorView(ctx, args, stdout, stderr, "evidence", `Usage: svrpd operator evidence --dir DIR

Shows the evidence view: how many records of contribution are counted, and from what source.`, (*client.Operator).Evidence, printEvidence)
}

func printEvidence(w io.Writer, e api.Evidence) {
	fmt.Fprintf(w, "operator:  %s\n", e.OperatorDID)
	fmt.Fprintf(w, "count:     %d\n", e.Count)
	fmt.Fprintf(w, "source:    %s\n", e.Source)
	fmt.Fprintf(w, "note:      %s\n", e.Note)
	if e.Source == api.SourceNotYetWired {
		fmt.Fprintln(w, "\nNOT YET WIRED: nothing is counting evidence; an empty list means unknown, not that nothing was contributed.")
	}
}

func orNone(s *string) string { return orText(s, "(not given)") }

func orText(s *string, none string) string {
	if s == nil || *s == "" {
		return none
	}
	return *s
}
