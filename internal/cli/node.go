package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// Node is "svrpd node": node run (register and heartbeat) and node bind.
func Node(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, `Usage: svrpd node <command> [flags]

Commands:
  run    register the node, then send a heartbeat on an interval until stopped
  bind   bind the node to an operator: show a short code, wait, accept the terms
  unbind end the node's binding made by a binding session, signed by the node key

Run "svrpd node <command> -h" for a command's flags.
`)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "run":
		return runNodeRun(ctx, args[1:], stdout, stderr)
	case "bind":
		return runNodeBind(ctx, args[1:], stdin, stdout, stderr)
	case "unbind":
		return runNodeUnbind(ctx, args[1:], stdout, stderr)
	}
	return usageError(stderr, "node", "unknown command %q", args[0])
}

// Heartbeat interval bounds of node run: often enough to stay inside the 10-minute online
// window with room for missed beats, rarely enough to be no load.
const (
	defaultHeartbeatEvery = 60 * time.Second
	minHeartbeatEvery     = time.Second
	maxHeartbeatEvery     = 5 * time.Minute
)

// nodeFlags are the flags node run and node bind share.
type nodeFlags struct {
	key     string
	didForm string
	client  *clientFlags
}

func addNodeFlags(fs *flag.FlagSet) *nodeFlags {
	nf := &nodeFlags{}
	fs.StringVar(&nf.key, "key", "", "the node's seed file, as svrpd keygen writes it (required)")
	fs.StringVar(&nf.didForm, "did-form", "short", "DID spelling to announce: short, fallback (after DID_COLLISION) or full")
	nf.client = addClientFlags(fs, false)
	return nf
}

func (nf *nodeFlags) hints() hintContext { return hintContext{registry: nf.client.registry} }

// node loads the key and returns the node on a client of the registry.
func (nf *nodeFlags) node(stderr io.Writer) (*client.Node, error) {
	if nf.key == "" {
		return nil, errors.New("--key FILE is required (create one with: svrpd keygen --out FILE)")
	}
	form, err := didForm(nf.didForm)
	if err != nil {
		return nil, err
	}
	key, err := readSeed(nf.key, stderr)
	if err != nil {
		return nil, err
	}
	c, err := nf.client.client()
	if err != nil {
		return nil, err
	}
	return client.NewNode(c, key, form)
}

func runNodeRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("node run", stderr)
	nf := addNodeFlags(fs)
	endpoint := fs.String("endpoint", "", "HOST:PORT where the node can be reached (required); the registry records it and never probes it")
	var caps stringList
	fs.Var(&caps, "capability", "a `capability` the node advertises (repeatable), for example inference")
	region := fs.String("region", "", "the node's self-reported region")
	every := fs.Duration("every", defaultHeartbeatEvery, "heartbeat interval, from 1s to 5m")
	v1 := fs.Bool("register-v1", false, "register without a signed ts (message 3), for a registry that predates registration v2; such a registration can be replayed by anyone")
	if code, ok := parseFlags(fs, args, `Usage: svrpd node run --key FILE --endpoint HOST:PORT [--capability C ...] [--region R] [--every 60s] [--register-v1]

Registers the node with a signed, timestamped announcement (registration v2: it cannot be
replayed or rolled back), then sends a signed heartbeat every
interval, printing one line per event, until interrupted. A node counts as online while
its last heartbeat is recent (10 minutes by default).

Example:
  svrpd node run --key node.seed --endpoint 203.0.113.7:7000 --capability inference`); !ok {
		return code
	}
	const cmd = "node run"
	hc := nf.hints()
	if *endpoint == "" {
		return usageError(stderr, cmd, "--endpoint HOST:PORT is required")
	}
	if *every < minHeartbeatEvery || *every > maxHeartbeatEvery {
		return usageError(stderr, cmd, "--every must be from 1s to 5m")
	}
	node, err := nf.node(stderr)
	if err != nil {
		return fail(stderr, cmd, err, hc)
	}
	node.RegisterV1 = *v1
	fmt.Fprintf(stdout, "node %s (fingerprint %s), registry %s\n", node.DID, node.PublicKey().Fingerprint(), node.Client.BaseURL())

	register := func() error {
		res, err := node.Register(ctx, *endpoint, caps, *region)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "registered: endpoint %s (%s), signed=%t, last_seen %s\n",
			res.Data.Endpoint, res.Data.Reachability, res.Signed, res.Data.LastSeen)
		if !res.Signed {
			fmt.Fprintln(stderr, "svrpd node run: warning: the registry recorded the node without verifying its signature; is --prefix the registry's?")
		}
		return nil
	}
	if err := register(); err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return fail(stderr, cmd, err, hc)
	}

	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "stopped")
			return 0
		case <-tick.C:
		}
		res, err := node.Heartbeat(ctx)
		switch code := client.CodeOf(err); {
		case err == nil:
			fmt.Fprintf(stdout, "heartbeat: last_seen %s\n", res.LastSeen)
		case ctx.Err() != nil:
			fmt.Fprintln(stdout, "stopped")
			return 0
		case code == proto.UnknownDID:
			// The registry lost the record (a new data directory, say): announce again.
			fmt.Fprintln(stdout, "heartbeat: the registry does not know the node; registering again")
			if err := register(); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "svrpd %s: register: %v\n", cmd, err)
			}
		case fatalForNode(code):
			return fail(stderr, cmd, err, hc)
		default:
			// A registry that is down or busy is the normal life of a long-running node:
			// say so and try at the next tick.
			fmt.Fprintf(stderr, "svrpd %s: heartbeat failed, will retry: %v\n", cmd, err)
		}
	}
}

// fatalForNode reports whether a heartbeat failure will recur on every beat, so node run
// should stop and say so rather than loop.
func fatalForNode(code proto.Code) bool {
	switch code {
	case proto.BadSignature, proto.IDBindingFailed, proto.IDBindingRequired, proto.BadRequest:
		return true
	}
	return false
}

// bindCleanupTimeout bounds the call node bind makes, after the person stopped it, to cancel the
// session so its code is dead.
const bindCleanupTimeout = 5 * time.Second

func runNodeBind(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("node bind", stderr)
	nf := addNodeFlags(fs)
	asked := addTermsFlags(fs, "a task `type` the node asks to be bound for (repeatable)",
		"the most the node asks to be allowed per task, a number `N` (unset: no cap)",
		"the most the node asks to be allowed per day, a number `N` (unset: no cap)")
	ttl := fs.Duration("ttl", client.MaxSessionTTL, "how long the code stays valid, at most 600s")
	yes := fs.Bool("yes", false, "accept the operator's terms without asking")
	no := fs.Bool("no", false, "reject the operator's terms without asking")
	summary := fs.String("device-summary", "svrpd node", "how the node describes itself to the operator")
	osName := fs.String("os", runtime.GOOS, "the node's operating system, shown to the operator")
	region := fs.String("region", "", "the node's region, shown to the operator")
	poll := fs.Duration("poll", 2*time.Second, "how often to ask the registry whether the operator answered")
	if code, ok := parseFlags(fs, args, `Usage: svrpd node bind --key FILE [--task-type T ...] [--single-limit N] [--daily-limit N] [--ttl 600s] [--yes|--no]

Asks to be bound to an operator. Prints a short code, the node's DID and its fingerprint:
give the code and the DID to the operator, who runs "svrpd operator resolve CODE --node DID"
and must see the same fingerprint before authorizing. When the authorization arrives, its terms are shown and
the node accepts or rejects them (asks unless --yes or --no). Interrupting cancels the
session.

Example:
  svrpd node bind --key node.seed --task-type inference --single-limit 10 --daily-limit 100`); !ok {
		return code
	}
	const cmd = "node bind"
	hc := nf.hints()
	if *yes && *no {
		return usageError(stderr, cmd, "--yes and --no exclude each other")
	}
	if *ttl <= 0 || *ttl > client.MaxSessionTTL {
		return usageError(stderr, cmd, "--ttl must be more than 0 and at most 600s")
	}
	node, err := nf.node(stderr)
	if err != nil {
		return fail(stderr, cmd, err, hc)
	}
	session, err := node.Initiate(ctx, client.InitiateOptions{
		DeviceSummary: *summary, OS: *osName, Region: *region,
		TaskTypes: asked.tasks, SingleLimit: asked.single.v, DailyLimit: asked.daily.v, TTL: *ttl,
	})
	if err != nil {
		return fail(stderr, cmd, err, hc)
	}
	id := session.BindingSessionID
	// cancel kills the session's code once this command will no longer answer for it.
	cancel := func(why string) {
		cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), bindCleanupTimeout)
		defer stop()
		if st, err := node.Cancel(cctx, id); err == nil {
			fmt.Fprintf(stdout, "%s: binding session %s %s\n", why, id, st.State)
		} else if client.CodeOf(err) != proto.BadState {
			fmt.Fprintf(stderr, "svrpd %s: cancelling the session: %v\n", cmd, err)
		}
	}

	fmt.Fprintf(stdout, "binding session %s opened for %s, expires %s\n\n", id, node.DID, session.ExpiresAt)
	fmt.Fprintf(stdout, "    short code:   %s\n", groupCode(session.ShortCode))
	fmt.Fprintf(stdout, "    node DID:     %s\n", node.DID)
	fmt.Fprintf(stdout, "    fingerprint:  %s\n\n", node.PublicKey().Fingerprint())
	fmt.Fprintf(stdout, "On the operator's machine run:\n    svrpd operator resolve %s --node %s --dir DIR\n", groupCode(session.ShortCode), node.DID)
	fmt.Fprintf(stdout, "and check that it shows the same fingerprint.\n\n")
	fmt.Fprintln(stdout, "waiting for the operator (Ctrl-C cancels)...")

	p, err := node.WaitForAuthorization(ctx, id, *poll)
	if err != nil {
		if ctx.Err() != nil {
			cancel("stopped")
			return 1
		}
		var ended *client.SessionEndedError
		if errors.As(err, &ended) {
			fmt.Fprintf(stderr, "svrpd %s: binding session %s ended: %s\n", cmd, id, ended.State)
			return 1
		}
		return fail(stderr, cmd, err, hc)
	}
	// Show the terms only once they are known to be signed by the operator they name.
	if err := node.VerifyPending(p); err != nil {
		fmt.Fprintf(stderr, "svrpd %s: the authorization does not verify; refusing it\n", cmd)
		if _, rerr := node.Reject(context.WithoutCancel(ctx), p); rerr != nil {
			fmt.Fprintf(stderr, "svrpd %s: rejecting: %v\n", cmd, rerr)
		}
		return fail(stderr, cmd, err, hc)
	}
	az := p.AuthorizationCredential
	fmt.Fprintf(stdout, "authorization received:\n")
	fmt.Fprintf(stdout, "    operator:      %s\n", az.OperatorDID)
	fmt.Fprintf(stdout, "    task types:    %s\n", listText(az.TaskTypes))
	fmt.Fprintf(stdout, "    single limit:  %s\n", limitText(az.SingleLimit))
	fmt.Fprintf(stdout, "    daily limit:   %s\n", limitText(az.DailyLimit))
	fmt.Fprintf(stdout, "    valid until:   %s\n", az.ExpiresAt)

	accept := *yes
	if !*yes && !*no {
		accept, err = ask(ctx, newLineReader(stdin), stdout, "accept these terms?")
		if err != nil {
			cancel("no answer")
			return 1
		}
	}
	if !accept {
		st, err := node.Reject(ctx, p)
		if err != nil {
			return fail(stderr, cmd, err, hc)
		}
		fmt.Fprintf(stdout, "rejected: binding session %s %s\n", id, st.State)
		return 0
	}
	res, err := node.Accept(ctx, p)
	if client.CodeOf(err) == proto.AlreadyActive {
		// Success arriving twice: an earlier attempt's answer was lost.
		fmt.Fprintf(stdout, "binding ACTIVE: %s is bound to %s\n", node.DID, az.OperatorDID)
		return 0
	}
	if err != nil {
		return fail(stderr, cmd, err, hc)
	}
	printBinding(stdout, res)
	return 0
}

func printBinding(w io.Writer, res api.AcceptResult) {
	b := res.Binding
	fmt.Fprintf(w, "binding %s: %s is bound to %s since %s\n", res.State, b.NodeDID, b.OperatorDID, b.ActivatedAt)
	fmt.Fprintf(w, "to leave it later: svrpd node unbind %s --key FILE\n", res.BindingSessionID)
}
