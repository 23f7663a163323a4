package translog_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/translog"
)

var update = flag.Bool("update", false, "rewrite testdata/translog from the code")

const vectorDir = "../testdata/translog"

func pub(k ed25519.PrivateKey) didkey.PublicKey {
	p, _ := didkey.KeyFromEd25519(k.Public().(ed25519.PublicKey))
	return p
}

func sign(t testing.TB, k ed25519.PrivateKey, m canonical.Message) translog.Signed {
	t.Helper()
	msg, err := m.Bytes(canonical.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := canonical.Sign(k, canonical.DefaultPrefix, m)
	if err != nil {
		t.Fatal(err)
	}
	return translog.Signed{Signer: pub(k), Signature: sig, Message: msg}
}

// vectorEntries are the entries of the vectors, one of each kind, from keys of fixed texts.
func vectorEntries(t testing.TB) map[string]translog.Entry {
	node, root, device := testkit.TextKey("translog node"), testkit.TextKey("translog root"), testkit.TextKey("translog device")
	nodeKey, rootKey := pub(node), pub(root)
	nodeDID, opDID := "did:svrp:n:"+nodeKey.ShortBody(), "did:svrp:o:"+rootKey.ShortBody()
	limit := 10.0
	reg := sign(t, node, canonical.RegisterV2{DID: nodeDID, PublicKey: nodeKey.Base58(), Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"}, Region: "eu-west", TS: 1736937000})
	dc := sign(t, root, canonical.DeviceCredential{CredentialID: "dc-0001", OperatorDID: opDID, OperatorRootPublicKey: rootKey.Base58(), DeviceID: "laptop", DevicePublicKey: pub(device).Base58(), Permissions: []string{"bind"}, IssuedAt: "2025-01-01T00:00:00Z", ExpiresAt: "2026-01-01T00:00:00Z", RevocationID: "rev-0001"})
	session := sign(t, node, canonical.BindingSession{BindingSessionID: "bs-0001", NodeDID: nodeDID, NodePublicKey: nodeKey.Base58(), RequestedTaskTypes: []string{"inference"}, RequestedSingleLimit: &limit, RequestedDailyLimit: &limit, Nonce: "n-1", CreatedAt: "2025-01-15T10:00:00Z", ExpiresAt: "2025-01-15T10:10:00Z"})
	authz := canonical.Authorization{BindingSessionID: "bs-0001", NodeDID: nodeDID, OperatorDID: opDID, TaskTypes: []string{"inference"}, SingleLimit: &limit, DailyLimit: &limit, RevocationID: "rev-0001", IssuedAt: "2025-01-15T10:01:00Z", ExpiresAt: "2025-02-15T10:01:00Z"}
	authzSigned := sign(t, device, authz)
	digest := sha256.Sum256(authzSigned.Message)
	accept := sign(t, node, canonical.Acceptance{BindingSessionID: "bs-0001", NodeDID: nodeDID, OperatorDID: opDID, AuthorizationDigest: hex.EncodeToString(digest[:]), Accepted: true, IssuedAt: "2025-01-15T10:02:00Z"})
	unbind := sign(t, node, canonical.Unbind{BindingSessionID: "bs-0001", NodeDID: nodeDID, TS: 1736937600})
	rev := sign(t, root, canonical.Revocation{OperatorDID: opDID, OperatorRootPublicKey: rootKey.Base58(), RevocationID: "rev-0001", RevokedAt: "2025-06-01T00:00:00Z"})
	return map[string]translog.Entry{
		"node":              translog.Node(nodeDID, nodeKey, reg.Message, reg.Signature),
		"pin":               translog.Pin(opDID, rootKey, dc.Message, dc.Signature),
		"bind":              translog.Bind(nodeDID, nodeKey, opDID, "bs-0001", [4]translog.Signed{session, dc, authzSigned, accept}),
		"unbind-node":       translog.Unbind(nodeDID, nodeKey, opDID, "bs-0001", "node", "2025-01-15T10:40:00Z", &unbind),
		"unbind-revocation": translog.Unbind(nodeDID, nodeKey, opDID, "bs-0001", "revocation", "2025-06-01T00:00:01Z", nil),
		"revoke":            translog.Revoke(opDID, rootKey, "rev-0001", rev.Message, rev.Signature),
		"unrevoke":          translog.Unrevoke(opDID, rootKey, "rev-0001"),
	}
}

// vectorOrder is the order the vectors' log appends the entries in.
var vectorOrder = []string{"node", "pin", "bind", "unbind-node", "revoke", "unbind-revocation", "unrevoke"}

// memLog is a log kept in memory, as a store keeps it.
type memLog struct {
	entries [][]byte
	hashes  []tlog.Hash
}

func (m *memLog) LogSize() (int64, error) { return int64(len(m.entries)), nil }
func (m *memLog) LogEntries(start, end int64) ([][]byte, error) {
	return m.entries[start:end], nil
}
func (m *memLog) LogHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(m.hashes)) {
			return nil, errors.New("no such hash")
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}
func (m *memLog) AppendLog(index int64, entry []byte, hashes []tlog.Hash) error {
	if index != int64(len(m.entries)) || tlog.StoredHashIndex(0, index) != int64(len(m.hashes)) {
		return errors.New("append out of order")
	}
	m.entries = append(m.entries, entry)
	m.hashes = append(m.hashes, hashes...)
	return nil
}

func vectorKey(t testing.TB) *translog.Key {
	k, err := translog.NewKey("example.com/svrp/log", sha256.Sum256([]byte("translog log key")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// checkVector compares got with the vector file name, or rewrites it under -update.
func checkVector(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(vectorDir, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the code writes\n%s\nthe vector holds\n%s", name, got, want)
	}
}

// TestVectors reproduces every vector of testdata/translog byte for byte: each entry, the
// log of them, its signed checkpoint, its verifier key and its tiles.
func TestVectors(t *testing.T) {
	entries := vectorEntries(t)
	var log memLog
	for _, name := range vectorOrder {
		e := entries[name]
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		checkVector(t, name+".entry", b)
		if err := e.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := translog.Append(&log, e); err != nil {
			t.Fatal(err)
		}
	}
	key := vectorKey(t)
	head, err := translog.Head(&log, key.Name())
	if err != nil {
		t.Fatal(err)
	}
	signed, err := key.SignCheckpoint(head)
	if err != nil {
		t.Fatal(err)
	}
	checkVector(t, "checkpoint", signed)
	checkVector(t, "key", []byte(key.Verifier()+"\n"))
	for _, tile := range []tlog.Tile{{H: 8, L: 0, N: 0, W: len(vectorOrder)}, {H: 8, L: -1, N: 0, W: len(vectorOrder)}} {
		data, err := translog.ReadTile(&log, head.Size, tile)
		if err != nil {
			t.Fatal(err)
		}
		p := translog.TilePath(tile)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(vectorDir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		checkVector(t, p, data)
	}
}

// TestParseRoundTrip parses each vector back to the entry it came from.
func TestParseRoundTrip(t *testing.T) {
	for name, e := range vectorEntries(t) {
		b, _ := e.Marshal()
		got, err := translog.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := got.Marshal()
		if !bytes.Equal(again, b) {
			t.Errorf("%s: parse and marshal changed the bytes", name)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	entries := vectorEntries(t)
	other := pub(testkit.TextKey("another key"))
	cases := map[string]func(e translog.Entry) translog.Entry{
		"node key not the DID's": func(e translog.Entry) translog.Entry {
			e.Fields = []translog.Field{{Name: "key", Value: other.Base58()}}
			return e
		},
		"signature of another message": func(e translog.Entry) translog.Entry {
			s := e.Signed[0]
			s.Message = append([]byte(nil), s.Message...)
			s.Message[len(s.Message)-1] ^= 1
			e.Signed = []translog.Signed{s}
			return e
		},
		"unknown kind": func(e translog.Entry) translog.Entry { e.Kind = "nodes"; return e },
		"a field missing": func(e translog.Entry) translog.Entry {
			e.Fields = nil
			return e
		},
		"an operator DID for a node": func(e translog.Entry) translog.Entry {
			e.DID = "did:svrp:o:" + e.DID[len("did:svrp:n:"):]
			return e
		},
	}
	for name, change := range cases {
		if err := change(entries["node"]).Check(); !errors.Is(err, translog.ErrBadEntry) {
			t.Errorf("%s: Check = %v, want ErrBadEntry", name, err)
		}
	}
	// A revocation message is no registration.
	rev := entries["revoke"].Signed[0]
	e := entries["node"]
	e.Signed = []translog.Signed{{Signer: e.Signed[0].Signer, Signature: rev.Signature, Message: rev.Message}}
	if err := e.Check(); !errors.Is(err, translog.ErrBadEntry) {
		t.Errorf("a node entry from a revocation: Check = %v", err)
	}
}

func TestCheckpointOpen(t *testing.T) {
	key := vectorKey(t)
	c := translog.Checkpoint{Origin: key.Name(), Size: 7, Hash: tlog.RecordHash([]byte("x"))}
	signed, err := key.SignCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := translog.OpenCheckpoint(signed, key.Verifier())
	if err != nil || got != c {
		t.Fatalf("OpenCheckpoint = %+v, %v; want %+v", got, err, c)
	}
	other, _ := translog.NewKey(key.Name(), sha256.Sum256([]byte("another log key")))
	if _, err := translog.OpenCheckpoint(signed, other.Verifier()); !errors.Is(err, translog.ErrBadCheckpoint) {
		t.Errorf("under another key: %v", err)
	}
	tampered := bytes.Replace(signed, []byte("\n7\n"), []byte("\n8\n"), 1)
	if _, err := translog.OpenCheckpoint(tampered, key.Verifier()); !errors.Is(err, translog.ErrBadCheckpoint) {
		t.Errorf("a changed size: %v", err)
	}
	if _, err := key.SignCheckpoint(translog.Checkpoint{Origin: "another", Size: 1}); err == nil {
		t.Error("signed a checkpoint of another origin")
	}
}

func TestTilePaths(t *testing.T) {
	cases := []struct {
		tile tlog.Tile
		path string
	}{
		{tlog.Tile{H: 8, L: 0, N: 0, W: 256}, "tile/0/000"},
		{tlog.Tile{H: 8, L: 1, N: 1234067, W: 256}, "tile/1/x001/x234/067"},
		{tlog.Tile{H: 8, L: 0, N: 5, W: 17}, "tile/0/005.p/17"},
		{tlog.Tile{H: 8, L: -1, N: 1000, W: 256}, "tile/entries/x001/000"},
		{tlog.Tile{H: 8, L: -1, N: 2, W: 3}, "tile/entries/002.p/3"},
	}
	for _, c := range cases {
		if got := translog.TilePath(c.tile); got != c.path {
			t.Errorf("TilePath(%+v) = %q, want %q", c.tile, got, c.path)
		}
		if got, err := translog.ParseTilePath(c.path); err != nil || got != c.tile {
			t.Errorf("ParseTilePath(%q) = %+v, %v", c.path, got, err)
		}
	}
	for _, bad := range []string{"tile/8/0/000", "tile/0/0", "tile/0/000.p/256", "tile/0/000.p/0", "tile/entries/001.p/", "tile/-1/000", "tile/0/x000", "tiles/0/000", "tile/data/000"} {
		if _, err := translog.ParseTilePath(bad); !errors.Is(err, translog.ErrBadTile) {
			t.Errorf("ParseTilePath(%q) = %v, want ErrBadTile", bad, err)
		}
	}
}

func TestBundle(t *testing.T) {
	entries := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte{7}, 300)}
	b, err := translog.EncodeBundle(entries)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:3], []byte{0, 1, 'a'}) || !bytes.Equal(b[3:5], []byte{0, 0}) || !bytes.Equal(b[5:7], []byte{1, 44}) {
		t.Errorf("bundle begins % x", b[:7])
	}
	got, err := translog.DecodeBundle(b)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2], entries[2]) {
		t.Fatalf("DecodeBundle = %q, %v", got, err)
	}
	if _, err := translog.DecodeBundle(b[:len(b)-1]); !errors.Is(err, translog.ErrBadTile) {
		t.Errorf("a cut bundle: %v", err)
	}
}

// TestTilesAgreeWithProofs grows a log and checks, at each size, that the hash tiles
// ReadTile serves prove every entry and every earlier size, as a client reading tiles
// checks them.
func TestTilesAgreeWithProofs(t *testing.T) {
	var log memLog
	key := vectorKey(t)
	e := vectorEntries(t)["node"]
	var heads []translog.Checkpoint
	for i := range 300 {
		if _, err := translog.Append(&log, e); err != nil {
			t.Fatal(err)
		}
		if i%37 == 0 || i == 299 {
			h, _ := translog.Head(&log, key.Name())
			heads = append(heads, h)
		}
	}
	last := heads[len(heads)-1]
	tiles := tlog.TileHashReader(tlog.Tree{N: last.Size, Hash: last.Hash}, tileReader{&log, last.Size})
	for _, h := range heads {
		p, err := tlog.ProveTree(last.Size, h.Size, tiles)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckTree(p, last.Size, last.Hash, h.Size, h.Hash); err != nil {
			t.Errorf("size %d: %v", h.Size, err)
		}
	}
	for _, n := range []int64{0, 1, 255, 256, 299} {
		p, err := tlog.ProveRecord(last.Size, n, tiles)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(p, last.Size, last.Hash, n, tlog.RecordHash(log.entries[n])); err != nil {
			t.Errorf("entry %d: %v", n, err)
		}
	}
	if _, err := translog.ReadTile(&log, last.Size, tlog.Tile{H: 8, L: 0, N: 1, W: 45}); !errors.Is(err, translog.ErrTileBeyond) {
		t.Errorf("a tile beyond the log: %v", err)
	}
	if _, err := translog.ReadTile(&log, last.Size, tlog.Tile{H: 8, L: 1, N: 0, W: 2}); !errors.Is(err, translog.ErrTileBeyond) {
		t.Errorf("a level-1 tile beyond the log: %v", err)
	}
}

// tileReader reads tiles from a memLog through ReadTile.
type tileReader struct {
	log  *memLog
	size int64
}

func (r tileReader) Height() int { return translog.TileHeight }
func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		d, err := translog.ReadTile(r.log, r.size, t)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}
func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}
