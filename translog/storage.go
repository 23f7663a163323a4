package translog

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Reader reads a stored log: its size, its entries and the Merkle hashes stored for them
// (tlog's stored-hash layout: each entry adds the hashes [tlog.StoredHashes] returns, at
// the storage indexes that follow). A store transaction is one.
type Reader interface {
	// LogSize returns the number of entries.
	LogSize() (int64, error)
	// LogEntries returns the entries of indexes [start, end), which must lie in the log.
	LogEntries(start, end int64) ([][]byte, error)
	// LogHashes returns the stored hashes at the given storage indexes, in their order.
	LogHashes(indexes []int64) ([]tlog.Hash, error)
}

// Writer appends to a stored log.
type Writer interface {
	Reader
	// AppendLog stores entry at index, which must be LogSize(), and hashes at the storage
	// indexes from tlog.StoredHashIndex(0, index) on.
	AppendLog(index int64, entry []byte, hashes []tlog.Hash) error
}

// hashReader reads a log's stored hashes.
func hashReader(r Reader) tlog.HashReader { return tlog.HashReaderFunc(r.LogHashes) }

// Append marshals e and appends it to the log in w, returning its index. In a store
// transaction, the entry is part of the write it records: both are kept, or neither. It
// does not verify e's signatures: the writer verified them before deciding to write, and
// a reader checks each entry it reads ([Entry.Check]).
func Append(w Writer, e Entry) (int64, error) {
	b, err := e.Marshal()
	if err != nil {
		return 0, err
	}
	return AppendBytes(w, b)
}

// AppendBytes appends an entry already marshalled, as a copy of a log does, and returns its
// index.
func AppendBytes(w Writer, b []byte) (int64, error) {
	n, err := w.LogSize()
	if err != nil {
		return 0, err
	}
	hashes, err := tlog.StoredHashes(n, b, hashReader(w))
	if err != nil {
		return 0, fmt.Errorf("translog: hashing entry %d: %w", n, err)
	}
	if err := w.AppendLog(n, b, hashes); err != nil {
		return 0, err
	}
	return n, nil
}

// Head returns the checkpoint of the log in r under origin: its size and root hash.
func Head(r Reader, origin string) (Checkpoint, error) {
	n, err := r.LogSize()
	if err != nil {
		return Checkpoint{}, err
	}
	h, err := tlog.TreeHash(n, hashReader(r))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("translog: root hash of %d entries: %w", n, err)
	}
	return Checkpoint{Origin: origin, Size: n, Hash: h}, nil
}

// ErrTileBeyond is a tile the log of the given size does not hold yet.
var ErrTileBeyond = fmt.Errorf("%w: beyond the log", ErrBadTile)

// ReadTile returns the bytes of tile t of the log in r, whose size is size: the hashes of a
// hash tile, or the entry bundle of an entries tile (L = -1). A tile the log does not cover
// yet is ErrTileBeyond.
func ReadTile(r Reader, size int64, t tlog.Tile) ([]byte, error) {
	if t.H != TileHeight || t.W < 1 || t.W > TileWidth || t.N < 0 || t.L < -1 || t.L > 63/TileHeight {
		return nil, fmt.Errorf("%w: %+v", ErrBadTile, t)
	}
	level := max(t.L, 0) * TileHeight
	// The tile's last hash is the W-th of its level, which the tree holds once it has
	// (N*256 + W) << level entries.
	last := t.N*TileWidth + int64(t.W)
	if t.N > (size>>level)/TileWidth || last > size>>level {
		return nil, ErrTileBeyond
	}
	if t.L == -1 {
		entries, err := r.LogEntries(t.N*TileWidth, last)
		if err != nil {
			return nil, err
		}
		return EncodeBundle(entries)
	}
	return tlog.ReadTileData(t, hashReader(r))
}
