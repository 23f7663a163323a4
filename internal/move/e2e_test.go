package move

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/store/storetest"
)

func TestMain(m *testing.M) { svrpdtest.Main(m) }

// serve starts svrpd on a data directory or a PostgreSQL URL, with the per-address limits
// out of a test's way.
func serve(t *testing.T, where string, extra ...string) *svrpdtest.Daemon {
	t.Helper()
	args := []string{"--data", where}
	if isPostgres(where) {
		args = []string{"--postgres", where}
	}
	args = append(args, "--log-level", "info", "--register-address-limit", "1000000",
		"--initiate-address-limit", "1000000", "--login-address-limit", "1000000",
		"--max-nodes-per-client", "1000000", "--max-nodes-per-block", "1000000", "--max-nodes-per-network", "1000000")
	return svrpdtest.Start(t, nil, append(args, extra...)...)
}

// svrpd runs one svrpd command to its end and returns its exit code and output.
func svrpd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(svrpdtest.Binary(t), args...)
	cmd.Env = svrpdtest.Env()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func newClient(t *testing.T, d *svrpdtest.Daemon) *client.Client {
	t.Helper()
	c, err := client.New(d.URL, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// operator is an operator identity with two devices: one whose credential stays good and
// one whose credential is revoked.
type operator struct {
	root                       ed25519.PrivateKey
	device, lost               ed25519.PrivateKey
	credential, lostCredential authn.DeviceCredential
}

func newOperator(t *testing.T) operator {
	o := operator{root: testkit.RandomKey(), device: testkit.RandomKey(), lost: testkit.RandomKey()}
	var err error
	if o.credential, err = client.IssueDeviceCredential(o.root, o.device.Public().(ed25519.PublicKey), client.CredentialOptions{RevocationID: "laptop"}); err != nil {
		t.Fatal(err)
	}
	if o.lostCredential, err = client.IssueDeviceCredential(o.root, o.lost.Public().(ed25519.PublicKey), client.CredentialOptions{RevocationID: "lost-phone"}); err != nil {
		t.Fatal(err)
	}
	return o
}

// registryView is what a test reads of a registry over HTTP: its listing, sorted, and the nodes
// the operator sees after logging in with its good credential.
type registryView struct {
	Listing []api.NodeView
	Bound   []string
}

func look(t *testing.T, ctx context.Context, c *client.Client, o operator) registryView {
	t.Helper()
	nodes, err := c.Nodes(ctx, api.NodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(nodes, func(a, b api.NodeView) int { return strings.Compare(a.DID, b.DID) })
	op, err := c.Login(ctx, o.device, o.credential)
	if err != nil {
		t.Fatalf("login with the good credential: %v", err)
	}
	bound, err := op.Nodes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := registryView{Listing: nodes}
	for _, b := range bound.Nodes {
		v.Bound = append(v.Bound, b.NodeDID)
	}
	if _, err := c.Login(ctx, o.lost, o.lostCredential); err == nil {
		t.Error("login with the revoked credential succeeded")
	}
	return v
}

// TestMigrateRoundTrip moves a registry from Badger to PostgreSQL and back with svrpd
// migrate, each store served by a real daemon in turn: the listings are identical, the
// operator logs in with the same credential and sees its node, the revoked credential stays
// revoked, and a migrate into a store that holds data is refused.
func TestMigrateRoundTrip(t *testing.T) {
	pg := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	first, back := filepath.Join(dir, "first"), filepath.Join(dir, "back")

	d := serve(t, first)
	c := newClient(t, d)
	var nodes []*client.Node
	for i := range 5 {
		n, err := client.NewNode(c, testkit.RandomKey(), didkey.FormShort)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Register(ctx, fmt.Sprintf("203.0.113.%d:7000", i+1), []string{"gpu"}, "eu-west"); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	o := newOperator(t)
	op, err := c.Login(ctx, o.device, o.credential)
	if err != nil {
		t.Fatal(err)
	}
	init, err := nodes[0].Initiate(ctx, client.InitiateOptions{TaskTypes: []string{"infer"}})
	if err != nil {
		t.Fatal(err)
	}
	view, err := op.Resolve(ctx, init.ShortCode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Authorize(ctx, view, client.Requested(view)); err != nil {
		t.Fatal(err)
	}
	pending, err := nodes[0].Pending(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %v, %v", pending, err)
	}
	if acc, err := nodes[0].Accept(ctx, pending[0]); err != nil || acc.State != "ACTIVE" {
		t.Fatalf("accept: %+v, %v", acc, err)
	}
	rev, err := client.NewRevocation(o.root, "", "lost-phone", time.Time{}, &o.lostCredential)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, rev); err != nil {
		t.Fatal(err)
	}
	want := look(t, ctx, c, o)
	if len(want.Listing) != 5 || !slices.Equal(want.Bound, []string{nodes[0].DID}) {
		t.Fatalf("before the move: %d nodes listed, operator sees %v; want 5 and %s", len(want.Listing), want.Bound, nodes[0].DID)
	}
	d.Stop()

	for _, step := range []struct{ from, to string }{{first, pg}, {pg, back}} {
		code, out := svrpd(t, "migrate", "--from", step.from, "--to", step.to)
		if code != 0 || !strings.Contains(out, "verified nodes: 5 in the source, 5 in the target") ||
			!strings.Contains(out, "verified revocations: 1 in the source, 1 in the target") ||
			!strings.Contains(out, "verified bindings: 1 in the source, 1 in the target") {
			t.Fatalf("migrate --from %s --to %s: exit %d\n%s", step.from, step.to, code, out)
		}
		d := serve(t, step.to)
		storetest.Diff(t, "registry after migrate to "+step.to, want, look(t, ctx, newClient(t, d), o))
		d.Stop()
	}

	// Into a store that holds data, nothing is written and the exit code says why.
	code, out := svrpd(t, "migrate", "--from", back, "--to", pg)
	if code != ExitNotEmpty || !strings.Contains(out, "not empty") {
		t.Fatalf("migrate into a non-empty store: exit %d, want %d\n%s", code, ExitNotEmpty, out)
	}
}

// writesBeforeBackup is how many registrations the backup test waits for before the backup
// begins, and again after it ends: enough that the backup has records to hold and writes
// go on beside it.
const writesBeforeBackup = 50

// TestBackupWhileWriting takes a backup of a daemon while four writers register nodes, and
// restores it into an empty directory: every registration acknowledged before the backup
// began is in the restored registry, and a restore into a directory that holds data is
// refused.
func TestBackupWhileWriting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	d := serve(t, filepath.Join(dir, "live"), "--debug-listen", "127.0.0.1:0")
	debug := ""
	for _, line := range d.Log.Lines() {
		if _, v, ok := strings.Cut(line, " pprof=http://"); ok {
			debug, _, _ = strings.Cut(v, "/")
		}
	}
	if debug == "" {
		t.Fatalf("no debug address in the log:\n%s", d.Log)
	}
	c := newClient(t, d)

	// The API address serves no backup: the command says which address it wants.
	wrong := filepath.Join(dir, "wrong.backup")
	code, out := svrpd(t, "backup", "--daemon", strings.TrimPrefix(d.URL, "http://"), "--out", wrong)
	if code != 1 || !strings.Contains(out, "404 Not Found") || !strings.Contains(out, "hint: ") || !strings.Contains(out, "--debug-listen") {
		t.Errorf("backup from the API address: exit %d, want 1 and a hint naming --debug-listen:\n%s", code, out)
	}
	if _, err := os.Lstat(wrong); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed backup left %s: %v", wrong, err)
	}

	var mu sync.Mutex
	type ack struct {
		did string
		at  time.Time
	}
	var acked []ack
	var failed atomic.Int64
	// Full DIDs: a short DID is 32 bits of a hash, and among the thousands of random keys
	// the writers register two now and then share one, which the registry rightly refuses
	// as DID_COLLISION.
	workers := testkit.StartWorkers(4, func(w int) bool {
		n, err := client.NewNode(c, testkit.RandomKey(), didkey.FormFull)
		if err != nil {
			failed.Add(1)
			return false
		}
		if _, err := n.Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
			failed.Add(1)
			return true
		}
		mu.Lock()
		acked = append(acked, ack{n.DID, time.Now()})
		mu.Unlock()
		return true
	})
	ackedAtLeast := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= n || failed.Load() > 0
		}
	}
	// Writes acknowledged before the backup, which it must hold, and writes going on while
	// it runs and after.
	workers.Until(t, "registrations acknowledged before the backup", ackedAtLeast(writesBeforeBackup))
	began := time.Now()
	file := filepath.Join(dir, "registry.backup")
	code, out = svrpd(t, "backup", "--daemon", debug, "--out", file)
	mu.Lock()
	atEnd := len(acked)
	mu.Unlock()
	workers.Until(t, "registrations acknowledged after the backup", ackedAtLeast(atEnd+writesBeforeBackup))
	workers.Stop()
	if code != 0 {
		t.Fatalf("backup: exit %d\n%s", code, out)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d registrations failed while the backup ran", n)
	}
	d.Stop()

	restored := filepath.Join(dir, "restored")
	if code, out := svrpd(t, "restore", "--in", file, "--data", restored); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	r := serve(t, restored)
	nodes, err := newClient(t, r).Nodes(ctx, api.NodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range nodes {
		have[n.DID] = true
	}
	before, after := 0, 0
	for _, a := range acked {
		switch {
		case a.at.Before(began):
			before++
			if !have[a.did] {
				t.Errorf("%s, acknowledged before the backup began, is not in the restored registry", a.did)
			}
		case have[a.did]:
			after++
		}
	}
	if before == 0 || len(nodes) > len(acked)+4 {
		t.Errorf("%d registrations acknowledged before the backup, %d restored of %d acknowledged in all", before, len(nodes), len(acked))
	}
	t.Logf("%d registrations acknowledged before the backup began, %d of those after it in the backup too, %d in all", before, after, len(acked))

	if code, out := svrpd(t, "restore", "--in", file, "--data", restored); code != ExitNotEmpty {
		t.Errorf("restore into a directory that holds data: exit %d, want %d\n%s", code, ExitNotEmpty, out)
	}
}
