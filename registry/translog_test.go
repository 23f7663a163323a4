package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
	"github.com/svrp/svrp/translog"
)

// This file's verifier is written from the C2SP specifications alone (signed-note,
// tlog-checkpoint, tlog-tiles) and RFC 6962's Merkle hashing, without golang.org/x/mod or
// package translog's code for any of it, so that the registry's log is held to the
// specifications and not to the library it is built on.

// specKey is a signed-note verifier key: name+hex key ID+base64(0x01 || Ed25519 key).
type specKey struct {
	name string
	id   [4]byte
	pub  ed25519.PublicKey
}

func parseSpecKey(t *testing.T, line string) specKey {
	t.Helper()
	parts := strings.SplitN(strings.TrimSuffix(line, "\n"), "+", 3)
	if len(parts) != 3 {
		t.Fatalf("verifier key %q has %d parts", line, len(parts))
	}
	id, err := hex.DecodeString(parts[1])
	raw, err2 := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || err2 != nil || len(id) != 4 || len(raw) != 33 || raw[0] != 0x01 {
		t.Fatalf("verifier key %q does not parse", line)
	}
	// The key ID is the first four bytes of SHA-256(name || 0x0A || 0x01 || key).
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	if !bytes.Equal(h[:4], id) {
		t.Fatalf("verifier key %q: key ID %x, want %x", line, id, h[:4])
	}
	return specKey{parts[0], [4]byte(id), ed25519.PublicKey(raw[1:])}
}

// specCheckpoint is a checkpoint as tlog-checkpoint reads it.
type specCheckpoint struct {
	origin string
	size   int64
	root   [32]byte
}

// openSpecNote verifies a signed note with k and returns its checkpoint: the text, a blank
// line, then signature lines "— <name> <base64(key ID || signature)>".
func openSpecNote(t *testing.T, k specKey, note []byte) specCheckpoint {
	t.Helper()
	i := bytes.LastIndex(note, []byte("\n\n"))
	if i < 0 {
		t.Fatalf("note %q has no signature block", note)
	}
	text, sigs := note[:i+1], note[i+2:]
	ok := false
	for _, l := range strings.Split(strings.TrimSuffix(string(sigs), "\n"), "\n") {
		rest, found := strings.CutPrefix(l, "\u2014 "+k.name+" ")
		raw, err := base64.StdEncoding.DecodeString(rest)
		if !found || err != nil || len(raw) != 4+ed25519.SignatureSize || !bytes.Equal(raw[:4], k.id[:]) {
			continue
		}
		ok = ok || ed25519.Verify(k.pub, text, raw[4:])
	}
	if !ok {
		t.Fatalf("no signature by %s verifies on %q", k.name, note)
	}
	lines := strings.Split(string(text), "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	root, err2 := base64.StdEncoding.DecodeString(lines[2])
	if len(lines) < 4 || err != nil || err2 != nil || len(root) != 32 {
		t.Fatalf("checkpoint %q does not parse", text)
	}
	if lines[0] != k.name {
		t.Fatalf("checkpoint origin %q is not the key's name %q", lines[0], k.name)
	}
	return specCheckpoint{lines[0], size, [32]byte(root)}
}

// RFC 6962: a leaf hashes as SHA-256(0x00 || entry), an inner node as SHA-256(0x01 || l || r).
func leafHash(e []byte) [32]byte { return sha256.Sum256(append([]byte{0}, e...)) }
func nodeHash(l, r [32]byte) [32]byte {
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// split is the largest power of two below n (RFC 6962 §2.1).
func split(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// mth is the Merkle tree hash of leaves.
func mth(leaves [][32]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := split(len(leaves))
	return nodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

// auditPath is RFC 6962's PATH(m, D[n]).
func auditPath(m int, leaves [][32]byte) [][32]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := split(len(leaves))
	if m < k {
		return append(auditPath(m, leaves[:k]), mth(leaves[k:]))
	}
	return append(auditPath(m-k, leaves[k:]), mth(leaves[:k]))
}

// verifyInclusion is RFC 9162 §2.1.3.2: the root an audit path leads to from leaf index.
func verifyInclusion(index, size int, leaf [32]byte, path [][32]byte, root [32]byte) bool {
	if index >= size {
		return false
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return false
		}
		if fn%2 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn%2 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	return sn == 0 && r == root
}

// tilePath spells tile N as tlog-tiles does: three-digit groups, each but the last with x.
func tilePath(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/", n%1000) + s
	}
	return s
}

// specLog is what the spec verifier read of a log at one checkpoint.
type specLog struct {
	cp      specCheckpoint
	entries [][]byte
	leaves  [][32]byte
}

// readSpecLog reads the key, the checkpoint, every entry bundle and every level-0 and
// level-1 hash tile the checkpoint covers, and checks them all against the checkpoint.
func readSpecLog(t *testing.T, h *harness) specLog {
	t.Helper()
	get := func(path string) []byte {
		status, _, raw := h.send("GET", path, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, raw)
		}
		return raw
	}
	k := parseSpecKey(t, string(get("/log/key")))
	l := specLog{cp: openSpecNote(t, k, get("/log/checkpoint"))}
	for n := int64(0); n*256 < l.cp.size; n++ {
		w := min(l.cp.size-n*256, 256)
		suffix := ""
		if w < 256 {
			suffix = fmt.Sprintf(".p/%d", w)
		}
		bundle := get("/log/tile/entries/" + tilePath(n) + suffix)
		for len(bundle) > 0 {
			size := int(binary.BigEndian.Uint16(bundle))
			l.entries = append(l.entries, bundle[2:2+size])
			bundle = bundle[2+size:]
		}
		hashes := get("/log/tile/0/" + tilePath(n) + suffix)
		if int64(len(hashes)) != 32*w {
			t.Fatalf("tile 0/%d holds %d bytes, want %d", n, len(hashes), 32*w)
		}
		for i := range w {
			leaf := leafHash(l.entries[n*256+i])
			if !bytes.Equal(hashes[32*i:32*i+32], leaf[:]) {
				t.Fatalf("tile 0/%d hash %d is not the hash of entry %d", n, i, n*256+i)
			}
			l.leaves = append(l.leaves, leaf)
		}
		if w == 256 {
			// A full level-0 tile is one hash of the level-1 tile: its subtree's root.
			up := get(fmt.Sprintf("/log/tile/1/000.p/%d", l.cp.size/256))
			root := mth(l.leaves[n*256 : n*256+256])
			if !bytes.Equal(up[32*n:32*n+32], root[:]) {
				t.Fatalf("tile 1/000 hash %d is not the root of tile 0/%d", n, n)
			}
		}
	}
	if int64(len(l.entries)) != l.cp.size {
		t.Fatalf("%d entries in the bundles of a log of %d", len(l.entries), l.cp.size)
	}
	if mth(l.leaves) != l.cp.root {
		t.Fatalf("the tiles' root is not the checkpoint's")
	}
	return l
}

// TestLogFromTheSpecifications drives every logged write through the API, then a batch of
// registrations, and checks with the spec verifier: the checkpoint's signature by the served
// key, every tile against the checkpoint, the checkpoint after the batch consistent with the
// one before, and every registration of the batch named by the entry its answer gave, with
// an inclusion proof.
func TestLogFromTheSpecifications(t *testing.T) {
	h := newHarness(t)
	now := h.now()
	n, op := newNode(t, "n"), newOperator(t, "op", now, "nodes.bind")

	var reg api.RegisterResult
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", &reg)
	if reg.LogIndex == nil || *reg.LogIndex != 0 {
		t.Fatalf("the first registration's log_index = %v, want 0", reg.LogIndex)
	}
	var again api.RegisterResult
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7001"), "", &again)
	if again.LogIndex != nil {
		t.Errorf("a move of the endpoint was logged at %d", *again.LogIndex)
	}
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now()), "", nil)
	token := op.login(h)
	h.drive(n, op, token, "bs-1", "ACTIVE")
	var unbound api.UnbindResult
	h.ok("POST", "/v1/bindings/bs-1/unbind", nil, token, &unbound)
	h.drive(n, op, token, "bs-2", "ACTIVE")
	var revoked api.RevokeResult
	h.ok("POST", "/v1/auth/revoke", op.revocation(t, op.root, "authz-bs-2", h.now()), "", &revoked)

	before := readSpecLog(t, h)
	var kinds []string
	for _, e := range before.entries {
		parsed, err := translog.Parse(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := parsed.Check(); err != nil {
			t.Errorf("entry %q: %v", e, err)
		}
		kinds = append(kinds, string(parsed.Kind))
		if parsed.Kind == translog.KindUnbind {
			by, _ := parsed.Field("by")
			kinds[len(kinds)-1] += "/" + by
		}
	}
	want := "node pin bind unbind/operator bind revoke unbind/revocation"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("the log holds %s, want %s", got, want)
	}
	if unbound.LogIndex == nil || *unbound.LogIndex != 3 || revoked.LogIndex == nil || *revoked.LogIndex != 5 {
		t.Errorf("log_index of the unbind %v and the revocation %v, want 3 and 5", unbound.LogIndex, revoked.LogIndex)
	}

	// A batch that crosses a tile boundary.
	var batch []int64
	var dids []string
	for i := range 260 {
		m := newNode(t, fmt.Sprintf("batch%d", i))
		var res api.RegisterResult
		h.ok("POST", "/api/v1/register", m.registration(t, fmt.Sprintf("203.0.113.%d:7000", i%250)), "", &res)
		if res.LogIndex == nil {
			t.Fatalf("registration %d carries no log_index", i)
		}
		batch, dids = append(batch, *res.LogIndex), append(dids, m.did)
		h.clock.Advance(time.Second)
	}
	after := readSpecLog(t, h)
	if after.cp.size != before.cp.size+260 {
		t.Fatalf("the log grew from %d to %d over 260 registrations", before.cp.size, after.cp.size)
	}
	if mth(after.leaves[:before.cp.size]) != before.cp.root {
		t.Fatal("the checkpoint after the batch is not consistent with the one before")
	}
	for i, idx := range batch {
		e := after.entries[idx]
		if !bytes.HasPrefix(e, []byte("svrp-log-entry:v1\nnode\n"+dids[i]+"\n")) {
			t.Fatalf("entry %d is not the registration of %s: %q", idx, dids[i], e)
		}
		path := auditPath(int(idx), after.leaves)
		if !verifyInclusion(int(idx), len(after.leaves), leafHash(e), path, after.cp.root) {
			t.Fatalf("entry %d has no inclusion proof in the checkpoint", idx)
		}
	}
	// A tile beyond the log, and a path that is no tile.
	h.fails("GET", "/log/tile/entries/"+tilePath(after.cp.size/256+1), nil, "", http.StatusNotFound, "NOT_FOUND")
	h.fails("GET", "/log/tile/0/1", nil, "", http.StatusNotFound, "NOT_FOUND")
}

// TestLogSharedOnPostgres runs three registries on one database, as three daemons, and
// registers through all of them at once, one of them stopped mid-batch: every acknowledged
// registration's entry is in the one log at the index its answer gave, the log holds one
// entry per node record (no write without its entry, no entry without its write), and all
// three serve the same checkpoint, byte for byte.
func TestLogSharedOnPostgres(t *testing.T) {
	servePostgres(t)
	dir := t.TempDir()
	var svcs []*registry.Service
	for range 3 {
		svc, err := registry.New(registry.Config{Store: openStore(t, dir)})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	const each = 30
	type acked struct {
		did   string
		index int64
	}
	var mu sync.Mutex
	var acks []acked
	stop, stopped := context.WithCancel(t.Context())
	defer stopped()
	var wg sync.WaitGroup
	for d, svc := range svcs {
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := t.Context()
				if d == 2 {
					ctx = stop // the third daemon is stopped mid-batch
				}
				for i := range each / 3 {
					n := newNode(t, fmt.Sprintf("shared-%d-%d-%d", d, g, i))
					addr := fmt.Sprintf("198.%d.%d.1", 18+d, g*each+i)
					res, err := svc.Register(ctx, n.registration(t, addr+":7000"), addr)
					if err != nil {
						continue // not acknowledged: its entry may or may not be there
					}
					mu.Lock()
					acks = append(acks, acked{n.did, *res.LogIndex})
					if len(acks) == each {
						stopped()
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()

	var head translog.Checkpoint
	var entries [][]byte
	var nodes int
	st := openStore(t, dir)
	storetest.View(t, st, func(tx store.Tx) error {
		var err error
		if head, err = translog.Head(tx, "check"); err != nil {
			return err
		}
		if entries, err = tx.LogEntries(0, head.Size); err != nil {
			return err
		}
		nodes, err = tx.NodeCount()
		return err
	})
	if int64(nodes) != head.Size {
		t.Errorf("%d node records and %d log entries", nodes, head.Size)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[string(e)] {
			t.Errorf("entry %q is in the log twice", e)
		}
		seen[string(e)] = true
	}
	for _, a := range acks {
		if !bytes.HasPrefix(entries[a.index], []byte("svrp-log-entry:v1\nnode\n"+a.did+"\n")) {
			t.Errorf("registration of %s acknowledged at %d, which holds %q", a.did, a.index, entries[a.index])
		}
	}
	var first []byte
	for i, svc := range svcs {
		cp, err := svc.Checkpoint(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = cp
		} else if !bytes.Equal(cp, first) {
			t.Errorf("registry %d serves\n%s\nregistry 0\n%s", i, cp, first)
		}
	}
	if len(acks) < each {
		t.Errorf("%d registrations acknowledged of the %d the batch needs", len(acks), each)
	}
}

// TestLogOrigin: a configured origin names the key and opens every checkpoint; one that
// cannot be a key's name is refused when the registry is made.
func TestLogOrigin(t *testing.T) {
	svc, err := registry.New(registry.Config{Store: store.NewMemory(), LogOrigin: "registry.example/log"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := svc.LogKey(t.Context())
	if err != nil || !strings.HasPrefix(k.Verifier(), "registry.example/log+") {
		t.Fatalf("LogKey = %v, %v", k, err)
	}
	cp, err := svc.Checkpoint(t.Context())
	if err != nil || !strings.HasPrefix(string(cp), "registry.example/log\n0\n") {
		t.Fatalf("Checkpoint = %q, %v", cp, err)
	}
	for _, bad := range []string{"registry example", "a+b"} {
		if _, err := registry.New(registry.Config{Store: store.NewMemory(), LogOrigin: bad}); err == nil {
			t.Errorf("origin %q accepted", bad)
		}
	}
}
