package translog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// TileHeight is the height of every tile: 256 hashes, or 256 entries to a bundle (C2SP
// tlog-tiles).
const TileHeight = 8

// TileWidth is the number of hashes of a full tile, or entries of a full bundle.
const TileWidth = 1 << TileHeight

// ErrBadTile is a tile path that does not parse, or an entry bundle that does not decode.
var ErrBadTile = errors.New("translog: bad tile")

// TilePath returns the path of a tile under the log's prefix, as C2SP tlog-tiles spells it:
// "tile/<L>/<N>[.p/<W>]" for a hash tile, "tile/entries/<N>[.p/<W>]" for an entry bundle
// (L = -1), N in groups of three digits, each but the last prefixed with "x".
func TilePath(t tlog.Tile) string {
	// sumdb spells the same tile "tile/<H>/<L>/<N>" and a bundle "tile/<H>/data/<N>".
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", t.H))
	if rest, ok := strings.CutPrefix(p, "data/"); ok {
		p = "entries/" + rest
	}
	return "tile/" + p
}

// ParseTilePath reads a path TilePath writes, and nothing else.
func ParseTilePath(p string) (tlog.Tile, error) {
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return tlog.Tile{}, fmt.Errorf("%w: %q", ErrBadTile, p)
	}
	if n, ok := strings.CutPrefix(rest, "entries/"); ok {
		rest = "data/" + n
	}
	t, err := tlog.ParseTilePath(fmt.Sprintf("tile/%d/%s", TileHeight, rest))
	if err != nil || TilePath(t) != p {
		return tlog.Tile{}, fmt.Errorf("%w: %q", ErrBadTile, p)
	}
	return t, nil
}

// EncodeBundle returns an entry bundle: each entry prefixed with its length as a big-endian
// uint16.
func EncodeBundle(entries [][]byte) ([]byte, error) {
	n := 0
	for _, e := range entries {
		if len(e) > MaxEntryBytes {
			return nil, fmt.Errorf("%w: an entry of %d bytes", ErrBadTile, len(e))
		}
		n += 2 + len(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
	}
	return b, nil
}

// DecodeBundle splits an entry bundle into its entries.
func DecodeBundle(b []byte) ([][]byte, error) {
	var entries [][]byte
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: a bundle ends inside a length", ErrBadTile)
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, fmt.Errorf("%w: a bundle ends inside an entry", ErrBadTile)
		}
		entries = append(entries, b[2:2+n:2+n])
		b = b[2+n:]
	}
	return entries, nil
}
