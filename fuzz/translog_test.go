package fuzz

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/svrp/svrp/translog"
)

// translogVectors returns the files of testdata/translog whose names match glob, failing
// the target when there are none.
func translogVectors(f *testing.F, glob string) [][]byte {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "translog", glob))
	if len(paths) == 0 {
		f.Fatalf("no vectors match %s", glob)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzParseEntry: Parse accepts exactly what Marshal writes, and refuses with ErrBadEntry.
func FuzzParseEntry(f *testing.F) {
	for _, b := range translogVectors(f, "*.entry") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := translog.Parse(b)
		if err != nil {
			if !errors.Is(err, translog.ErrBadEntry) {
				t.Fatalf("refusal %v is not ErrBadEntry", err)
			}
			return
		}
		again, err := e.Marshal()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %q, which marshals to %q, %v", b, again, err)
		}
		e.Check() // must not panic, whatever it says
	})
}

// FuzzParseCheckpoint: an accepted checkpoint body writes back to its first three lines.
func FuzzParseCheckpoint(f *testing.F) {
	for _, b := range translogVectors(f, "checkpoint") {
		body, _, _ := bytes.Cut(b, []byte("\n\n"))
		f.Add(append(body, '\n'))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := translog.ParseCheckpoint(b)
		if err != nil {
			if !errors.Is(err, translog.ErrBadCheckpoint) {
				t.Fatalf("refusal %v is not ErrBadCheckpoint", err)
			}
			return
		}
		if !bytes.HasPrefix(b, c.Text()) {
			t.Fatalf("accepted %q, which writes back as %q", b, c.Text())
		}
	})
}

// FuzzParseTilePath: an accepted path is the one TilePath writes for its tile.
func FuzzParseTilePath(f *testing.F) {
	for _, p := range []string{"tile/0/000", "tile/1/x001/x234/067", "tile/0/005.p/17", "tile/entries/x001/000", "tile/entries/002.p/3"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tile, err := translog.ParseTilePath(p)
		if err != nil {
			if !errors.Is(err, translog.ErrBadTile) {
				t.Fatalf("refusal %v is not ErrBadTile", err)
			}
			return
		}
		if got := translog.TilePath(tile); got != p {
			t.Fatalf("accepted %q, which writes back as %q", p, got)
		}
	})
}

// FuzzDecodeBundle: a decoded bundle encodes back to the same bytes.
func FuzzDecodeBundle(f *testing.F) {
	for _, b := range translogVectors(f, "tile/entries/*/*") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := translog.DecodeBundle(b)
		if err != nil {
			if !errors.Is(err, translog.ErrBadTile) {
				t.Fatalf("refusal %v is not ErrBadTile", err)
			}
			return
		}
		again, err := translog.EncodeBundle(entries)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded %q, which encodes to %q, %v", b, again, err)
		}
	})
}
