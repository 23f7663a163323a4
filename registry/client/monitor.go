package client

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/translog"
)

// Monitoring is what one pass of [LogVerifier.Monitor] found.
type Monitoring struct {
	// Checkpoint is the checkpoint the pass replayed, accepted as an extension of the last.
	Checkpoint translog.Checkpoint
	// State is the log replayed.
	State *translog.State
	// Findings are the ways the registry's answers differ from its log, or its log from
	// itself, one sentence each; none when the registry is what its log says.
	Findings []string
}

// Monitor replays the whole log at the latest checkpoint (which must extend the last one
// accepted: translog.ErrBadCheckpoint otherwise) and compares what it says with what the
// registry serves (docs/protocol.md §12.4):
//
//   - every node the registry lists must be registered in the log under its DID, with the
//     key it is listed with;
//   - every binding the log says stands must read bound in its status, and every one the log
//     says ended must not;
//   - every revocation in force in the log must be in force at the registry. The registry
//     serves no list of revocations, so the monitor sends each logged revocation again: it is
//     signed by its root key and idempotent, so a registry that holds it answers
//     already_revoked, and one that lost it records it again, and that is reported.
//
// Pins are replayed, and a log that pins a body twice is reported, but the registry serves no
// pin to compare with: a login under a DID pinned to another root key is refused with
// DID_COLLISION.
func (v *LogVerifier) Monitor(ctx context.Context) (Monitoring, error) {
	cp, err := v.Latest(ctx)
	if err != nil {
		return Monitoring{}, err
	}
	m := Monitoring{Checkpoint: cp, State: translog.NewState()}
	entries, err := v.Entries(ctx, cp, 0, cp.Size)
	if err != nil {
		return m, err
	}
	for i, e := range entries {
		if err := m.State.Apply(int64(i), e); err != nil {
			m.Findings = append(m.Findings, "the log contradicts itself: "+err.Error())
		}
	}
	for _, check := range []func(context.Context, *Monitoring) error{v.c.compareNodes, v.c.compareBindings, v.c.compareRevocations} {
		if err := check(ctx, &m); err != nil {
			return m, err
		}
	}
	return m, nil
}

func (m *Monitoring) report(format string, args ...any) {
	m.Findings = append(m.Findings, fmt.Sprintf(format, args...))
}

// compareNodes checks every listed node, whether it passes id-binding or not, against the
// key the log last registered its DID with.
func (c *Client) compareNodes(ctx context.Context, m *Monitoring) error {
	a, err := c.AuditNodes(ctx, api.NodeFilter{})
	if err != nil {
		return err
	}
	listed := a.Nodes
	for _, r := range a.Rejected {
		listed = append(listed, r.Record)
	}
	for _, n := range listed {
		logged, ok := m.State.Nodes[n.DID]
		served, err := didkey.DecodeKey(n.PublicKey)
		switch {
		case !ok:
			m.report("node %s is served with key %s, and the log never registered that DID", n.DID, n.PublicKey)
		case err != nil || served != logged:
			m.report("node %s is served with key %s, and the log registered it with %s", n.DID, n.PublicKey, logged.Base58())
		}
	}
	return nil
}

// compareBindings reads the status of every binding the log holds.
func (c *Client) compareBindings(ctx context.Context, m *Monitoring) error {
	for _, id := range sortedKeys(m.State.Bindings) {
		b := m.State.Bindings[id]
		st, err := c.Status(ctx, id)
		if CodeOf(err) == proto.NotFound && b.EndedBy != "" {
			continue // an ended binding's session is deleted after its retention
		}
		if err != nil && CodeOf(err) != proto.NotFound {
			return err
		}
		bound := err == nil && st.Bound != nil && *st.Bound
		switch {
		case b.EndedBy == "" && !bound:
			m.report("binding %s of %s stands in the log (entry %d), and the registry does not serve it as bound", id, b.OperatorDID, b.Index)
		case b.EndedBy != "" && bound:
			m.report("binding %s of %s ended in the log (%s), and the registry serves it as bound", id, b.OperatorDID, b.EndedBy)
		}
	}
	return nil
}

// compareRevocations sends every revocation in force in the log again.
func (c *Client) compareRevocations(ctx context.Context, m *Monitoring) error {
	keys := make([]string, 0, len(m.State.Revocations))
	byKey := map[string]translog.Entry{}
	for k, e := range m.State.Revocations {
		keys = append(keys, k[0]+" "+k[1])
		byKey[k[0]+" "+k[1]] = e
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := byKey[k]
		r, err := revocationOf(e)
		if err != nil {
			m.report("the revocation %s in the log does not read back: %v", k, err)
			continue
		}
		res, err := c.Revoke(ctx, r)
		if err != nil {
			return err
		}
		if !res.AlreadyRevoked {
			m.report("revocation %s of %s is in force in the log, and the registry did not hold it (sent again, it is recorded again)", r.Revocation.RevocationID, r.Revocation.OperatorDID)
		}
	}
	return nil
}

// revocationOf rebuilds the signed revocation a revoke entry carries: message 11's lines
// are its literal, operator_did, operator_root_public_key, revocation_id and revoked_at.
func revocationOf(e translog.Entry) (authn.SignedRevocation, error) {
	s := e.Signed[0]
	lines := s.Lines()
	if len(lines) != 5 {
		return authn.SignedRevocation{}, fmt.Errorf("its message has %d lines", len(lines))
	}
	return authn.SignedRevocation{Revocation: canonical.Revocation{
		OperatorDID: lines[1], OperatorRootPublicKey: lines[2], RevocationID: lines[3], RevokedAt: lines[4],
	}, Signature: s.Signature}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String is the findings, one a line.
func (m Monitoring) String() string { return strings.Join(m.Findings, "\n") }
