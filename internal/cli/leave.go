package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// Leaving and revoking: operator logout, revoke and unbind, node unbind (docs/protocol.md
// §10.4–10.6).

func runOperatorLogout(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator logout", stderr)
	of := addOperatorFlags(fs, false)
	_, code, ok := of.parse(fs, args, `Usage: svrpd operator logout --dir DIR

Ends the session of the last login at the registry and deletes DIR/session. The token
stops working at once, everywhere. The device key and credential are untouched: log in
again with svrpd operator login.`, 0)
	if !ok {
		return code
	}
	const cmd = "operator logout"
	op, err := of.operator(stderr, false)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	_, err = op.Logout(ctx)
	ended := "ended at the registry"
	switch client.CodeOf(err) {
	case "":
	case proto.NoSession, proto.SessionExpired:
		ended = "was already over at the registry"
	default:
		return fail(stderr, cmd, err, of.hints())
	}
	if err := os.Remove(of.path(sessionFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(stderr, cmd, err, of.hints())
	}
	fmt.Fprintf(stdout, "logged out %s: the session %s, and %s is deleted\n", op.DID, ended, of.path(sessionFile))
	fmt.Fprintf(stdout, "the device key can log in again: svrpd operator login --dir %s\n", of.dir)
	return 0
}

func runOperatorRevoke(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator revoke", stderr)
	of := addOperatorFlags(fs, false)
	revocationID := fs.String("revocation-id", "", "the revocation_id to revoke (default: that of DIR/credential.json, this device)")
	rootFile := fs.String("root", "", "the root key's seed file (default DIR/root.seed)")
	out := fs.String("out", "", "write the signed revocation to `FILE` instead of sending it")
	send := fs.String("send", "", "send a revocation prepared earlier with --out (or by operator init) from `FILE`; needs no --dir")
	pos, code, ok := parsePositional(fs, args, `Usage: svrpd operator revoke --dir DIR [--revocation-id ID] [--root FILE] [--out FILE]
       svrpd operator revoke --send FILE

Revokes, for good, every credential of this operator that carries the revocation_id: a
lost device's DeviceCredential, or an AuthorizationCredential. The root key signs the
revocation, so no login is needed. At the registry, at once and together: the device's
sessions end, it can no longer log in (DC_REVOKED) or authorize, and the bindings it
authorized end (their status says unbound_by revocation). Other devices of the operator
keep working. Sending the same revocation again changes nothing.

--out writes the signed revocation without sending it: prepare one the day the identity
is made, keep it with the root key, and send it with --send the day the device is lost.

Examples:
  svrpd operator revoke --dir ~/.svrp-operator
  svrpd operator revoke --dir ~/.svrp-operator --revocation-id rev-7f3a --out lost-phone.json
  svrpd operator revoke --send lost-phone.json`)
	if !ok {
		return code
	}
	const cmd = "operator revoke"
	if len(pos) > 0 {
		return usageError(stderr, cmd, "unexpected argument %q", pos[0])
	}
	var rev authn.SignedRevocation
	if *send != "" {
		if *out != "" || *revocationID != "" || *rootFile != "" {
			return usageError(stderr, cmd, "--send sends a prepared revocation as it is; it takes none of --out, --revocation-id, --root")
		}
		if err := readJSON(*send, &rev); err != nil {
			return fail(stderr, cmd, err, of.hints())
		}
	} else {
		if of.dir == "" {
			return usageError(stderr, cmd, "--dir DIR is required (or --send FILE)")
		}
		var err error
		if rev, err = of.revocation(stderr, *rootFile, *revocationID); err != nil {
			return fail(stderr, cmd, err, of.hints())
		}
		if *out != "" {
			if err := writeJSON(*out, rev, 0o600); err != nil {
				return fail(stderr, cmd, err, of.hints())
			}
			printPrepared(stdout, *out, rev)
			return 0
		}
	}
	c, err := of.client.client()
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	res, err := c.Revoke(ctx, rev)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	printRevoked(stdout, res)
	if of.dir != "" {
		var dc authn.DeviceCredential
		if readJSON(of.path(credentialFile), &dc) == nil && dc.OperatorDID == res.OperatorDID && dc.RevocationID == res.RevocationID {
			fmt.Fprintf(stdout, "\n%s is this revoked credential: this directory can no longer log in.\n", of.path(credentialFile))
			fmt.Fprintf(stdout, "give the operator a new device: svrpd operator init --dir NEWDIR --root %s\n", of.rootPath(*rootFile))
		}
	}
	return 0
}

// rootPath is the root seed file: --root, or DIR/root.seed.
func (of *operatorFlags) rootPath(root string) string {
	if root != "" {
		return root
	}
	return of.path(rootSeedFile)
}

// revocation signs, with the root key, the revocation of id (default: the directory's
// credential's revocation_id), repeating the credential's operator_did and root key string.
func (of *operatorFlags) revocation(stderr io.Writer, root, id string) (authn.SignedRevocation, error) {
	var dc authn.DeviceCredential
	if err := readJSON(of.path(credentialFile), &dc); err != nil {
		return authn.SignedRevocation{}, err
	}
	key, err := readSeed(of.rootPath(root), stderr)
	if errors.Is(err, os.ErrNotExist) {
		return authn.SignedRevocation{}, fmt.Errorf("%s: the root key signs revocations; point --root at it where it is kept offline", err)
	}
	if err != nil {
		return authn.SignedRevocation{}, err
	}
	if id == "" {
		id = dc.RevocationID
	}
	return client.NewRevocation(key, of.client.prefix, id, time.Now(), &dc)
}

func printPrepared(w io.Writer, path string, rev authn.SignedRevocation) {
	m := rev.Revocation
	fmt.Fprintf(w, "wrote %s: a revocation of revocation_id %s of %s, signed by the root key (mode 0600)\n", path, m.RevocationID, m.OperatorDID)
	fmt.Fprintln(w, "it has NOT been sent. Anyone holding the file can send it, and only this revocation can")
	fmt.Fprintln(w, "be done with it: keep it with the root key. The day the device is lost, run:")
	fmt.Fprintf(w, "  svrpd operator revoke --send %s\n", path)
}

func printRevoked(w io.Writer, res api.RevokeResult) {
	fmt.Fprintf(w, "revoked: credentials of %s carrying revocation_id %s, for good (revoked_at %s)\n", res.OperatorDID, res.RevocationID, res.RevokedAt)
	if res.AlreadyRevoked {
		fmt.Fprintln(w, "it was already revoked: the registry keeps the first revoked_at, and nothing more changed")
		return
	}
	fmt.Fprintln(w, "a device credential carrying it can no longer log in (DC_REVOKED) nor authorize a binding;")
	fmt.Fprintln(w, "an authorization carrying it can no longer activate one (AUTHZ_REVOKED)")
	fmt.Fprintf(w, "bearer sessions ended: %d\n", res.EndedSessions)
	if len(res.EndedBindings) == 0 {
		fmt.Fprintln(w, "bindings ended: none")
		return
	}
	fmt.Fprintf(w, "bindings ended (%d): these nodes left the operator's list; each may bind again\n", len(res.EndedBindings))
	for _, b := range res.EndedBindings {
		fmt.Fprintf(w, "  %s  (binding session %s)\n", b.NodeDID, b.BindingSessionID)
	}
}

func runOperatorUnbind(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cmdflag.New("operator unbind", stderr)
	of := addOperatorFlags(fs, false)
	pos, code, ok := of.parse(fs, args, `Usage: svrpd operator unbind NODE_DID|SESSION_ID --dir DIR

Ends a binding of this operator, named by the node's DID (as svrpd operator nodes lists
it, or another spelling of the same key) or by the binding session that made it. The node
leaves the operator's list at once; its consent is not needed to leave, and it may bind
again to anyone. The session's history stays ACTIVE; its status shows bound false.`, 1)
	if !ok {
		return code
	}
	const cmd = "operator unbind"
	if len(pos) != 1 {
		return usageError(stderr, cmd, "name the binding: NODE_DID or SESSION_ID")
	}
	op, err := of.operator(stderr, false)
	if err != nil {
		return fail(stderr, cmd, err, of.hints())
	}
	id, node := pos[0], ""
	if strings.HasPrefix(id, "did:") {
		if id, node, err = boundSession(ctx, op, pos[0]); err != nil {
			return fail(stderr, cmd, err, of.hints())
		}
	}
	res, err := op.Unbind(ctx, id)
	if err != nil {
		return failUnbind(stderr, cmd, err, of.hints())
	}
	if node == "" {
		node = "the node"
	}
	fmt.Fprintf(stdout, "unbound %s (binding session %s) at %s, by the operator\n", node, res.BindingSessionID, res.UnboundAt)
	fmt.Fprintln(stdout, "it has left this operator's list; it may bind again to any operator")
	return 0
}

// boundSession finds the binding session of a bound node named by any spelling of its DID.
func boundSession(ctx context.Context, op *client.Operator, did string) (id, nodeDID string, err error) {
	want, err := didkey.Parse(did)
	if err != nil {
		return "", "", err
	}
	res, err := op.Nodes(ctx, 0)
	if err != nil {
		return "", "", err
	}
	for _, n := range res.Nodes {
		if sameNode(want, n.NodeDID) {
			return n.BindingSessionID, n.NodeDID, nil
		}
	}
	return "", "", proto.New(proto.NotFound, "no node bound to "+op.DID+" is "+did+"; see svrpd operator nodes")
}

// sameNode reports whether two DIDs name the same node: equal, or one spelling carries the
// key and the other derives from it.
func sameNode(a didkey.DID, b string) bool {
	if a.String() == b {
		return true
	}
	d, err := didkey.Parse(b)
	if err != nil {
		return false
	}
	if k, ok := a.Key(); ok {
		return d.Matches(k)
	}
	if k, ok := d.Key(); ok {
		return a.Matches(k)
	}
	return false
}

func runNodeUnbind(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("node unbind", stderr)
	nf := addNodeFlags(fs)
	pos, code, ok := parsePositional(fs, args, `Usage: svrpd node unbind SESSION_ID --key FILE

Ends the node's binding that binding session SESSION_ID made (node bind prints it), signed
by the node key. The operator's consent is not needed to leave: the node leaves the
operator's list at once, and may bind again with svrpd node bind.`)
	if !ok {
		return code
	}
	const cmd = "node unbind"
	hc := nf.hints()
	if len(pos) != 1 {
		return usageError(stderr, cmd, "name the binding session: SESSION_ID")
	}
	node, err := nf.node(stderr)
	if err != nil {
		return fail(stderr, cmd, err, hc)
	}
	st, err := node.Client.Status(ctx, pos[0])
	if err != nil {
		return fail(stderr, cmd, err, hc)
	}
	res, err := node.Unbind(ctx, pos[0])
	if err != nil {
		return failUnbind(stderr, cmd, err, hc)
	}
	op := "its operator"
	if st.OperatorDID != nil {
		op = *st.OperatorDID
	}
	fmt.Fprintf(stdout, "unbound %s from %s (binding session %s) at %s, by the node\n", node.DID, op, res.BindingSessionID, res.UnboundAt)
	fmt.Fprintln(stdout, "the node has left the operator's list; bind again with: svrpd node bind --key FILE")
	return 0
}

// failUnbind is fail with the hint BAD_STATE means for an unbind.
func failUnbind(stderr io.Writer, cmd string, err error, hc hintContext) int {
	if client.CodeOf(err) != proto.BadState {
		return fail(stderr, cmd, err, hc)
	}
	var e *client.Error
	msg := err.Error()
	if errors.As(err, &e) {
		msg = e.Message
	}
	fmt.Fprintf(stderr, "svrpd %s: BAD_STATE: %s\n", cmd, msg)
	fmt.Fprintln(stderr, "hint: there is no binding to end: it already ended (unbound, revoked, replaced by a newer binding of the node, or ended by the registry after the node went unseen), or the session never became ACTIVE")
	return 1
}

// revocationLine is the line operator init prints about the credential's revocation_id.
func revocationLine(dc authn.DeviceCredential) string {
	return fmt.Sprintf("revocation_id: %s (revokes this device credential; see svrpd operator revoke)", dc.RevocationID)
}

// prepareRevocation writes, at init, the signed revocation of the new device credential.
func prepareRevocation(path string, root ed25519.PrivateKey, prefix string, dc authn.DeviceCredential) (authn.SignedRevocation, error) {
	rev, err := client.NewRevocation(root, prefix, dc.RevocationID, time.Now(), &dc)
	if err != nil {
		return rev, err
	}
	return rev, writeJSON(path, rev, 0o600)
}
