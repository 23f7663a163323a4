package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/translog"
)

// ErrNotInLog is an entry the log does not hold, or holds with no proof of inclusion in the
// checkpoint it was checked against.
var ErrNotInLog = errors.New("svrp client: not in the log")

// LogKey returns the registry's log verifier key (GET /log/key). A client pins it once, out
// of band or on first use, and gives it to [NewLogVerifier]: a key read along with the
// checkpoints it verifies proves nothing.
func (c *Client) LogKey(ctx context.Context) (string, error) {
	b, err := c.logGet(ctx, "/log/key")
	return strings.TrimSuffix(string(b), "\n"), err
}

// logGet reads one of the log's answers, as is.
func (c *Client) logGet(ctx context.Context, path string) ([]byte, error) {
	var b []byte
	err := c.retrying(ctx, func() (err error) {
		b, err = c.once(ctx, request{method: "GET", path: path}, nil)
		return err
	})
	return b, err
}

// LogVerifier checks what a registry's transparency log shows (docs/protocol.md §12.4), as
// the go command checks the checksum database: each checkpoint signed by the pinned key and
// an extension of the last one it saw, and each entry it is asked for included in the
// checkpoint. It is safe for concurrent use.
type LogVerifier struct {
	c    *Client
	vkey string

	mu     sync.Mutex
	last   translog.Checkpoint
	signed []byte // last as served; nil before the first
}

// NewLogVerifier returns a verifier of c's log under the verifier key vkey. remembered is the
// last signed checkpoint a previous run kept ([LogVerifier.Remembered]), nil for none: a
// checkpoint that does not extend it is refused.
func NewLogVerifier(c *Client, vkey string, remembered []byte) (*LogVerifier, error) {
	v := &LogVerifier{c: c, vkey: vkey}
	if remembered != nil {
		cp, err := translog.OpenCheckpoint(remembered, vkey)
		if err != nil {
			return nil, fmt.Errorf("svrp client: the remembered checkpoint: %w", err)
		}
		v.last, v.signed = cp, remembered
	}
	return v, nil
}

// Remembered returns the last checkpoint the verifier accepted, as served, for a later run
// to start from; nil before the first.
func (v *LogVerifier) Remembered() []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.signed
}

// Latest reads the registry's checkpoint, verifies its signature, checks that it extends
// the last one accepted and remembers it. A checkpoint that is smaller than the last, or
// whose tiles do not prove the last one's root among its first entries, is a rollback or a
// fork: translog.ErrBadCheckpoint, and the last one stays remembered.
func (v *LogVerifier) Latest(ctx context.Context) (translog.Checkpoint, error) {
	signed, err := v.c.logGet(ctx, "/log/checkpoint")
	if err != nil {
		return translog.Checkpoint{}, err
	}
	return v.Accept(ctx, signed)
}

// Accept checks a signed checkpoint obtained any way (a gossip, a witness) as Latest checks
// the registry's, and remembers it.
func (v *LogVerifier) Accept(ctx context.Context, signed []byte) (translog.Checkpoint, error) {
	cp, err := translog.OpenCheckpoint(signed, v.vkey)
	if err != nil {
		return translog.Checkpoint{}, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.signed != nil {
		if err := v.extends(ctx, v.last, cp); err != nil {
			return translog.Checkpoint{}, err
		}
	}
	v.last, v.signed = cp, signed
	return cp, nil
}

// extends checks that cp extends old, with a consistency proof read from cp's tiles.
func (v *LogVerifier) extends(ctx context.Context, old, cp translog.Checkpoint) error {
	switch {
	case cp.Size < old.Size:
		return fmt.Errorf("%w: %d entries, fewer than the %d of a checkpoint seen before: the log was rolled back", translog.ErrBadCheckpoint, cp.Size, old.Size)
	case cp.Size == old.Size && cp.Hash != old.Hash:
		return fmt.Errorf("%w: the log of %d entries has another root than it had: the log forked", translog.ErrBadCheckpoint, cp.Size)
	case cp.Size == old.Size:
		return nil
	}
	r := v.hashes(ctx, cp)
	p, err := tlog.ProveTree(cp.Size, old.Size, r)
	if err == nil {
		err = tlog.CheckTree(p, cp.Size, cp.Hash, old.Size, old.Hash)
	}
	if err != nil {
		return fmt.Errorf("%w: it does not extend the checkpoint of %d entries seen before: %v", translog.ErrBadCheckpoint, old.Size, err)
	}
	return nil
}

// hashes reads cp's Merkle hashes from its tiles, each checked against cp's root hash.
func (v *LogVerifier) hashes(ctx context.Context, cp translog.Checkpoint) tlog.HashReader {
	return tlog.TileHashReader(tlog.Tree{N: cp.Size, Hash: cp.Hash}, tileReader{ctx, v.c})
}

// Entries returns the entries [start, end) of cp's log, each proved included in cp by its
// tiles and checked ([translog.Entry.Check]). cp must be a checkpoint the verifier accepted.
func (v *LogVerifier) Entries(ctx context.Context, cp translog.Checkpoint, start, end int64) ([]translog.Entry, error) {
	if start < 0 || start > end || end > cp.Size {
		return nil, fmt.Errorf("%w: entries [%d, %d) of a log of %d", ErrNotInLog, start, end, cp.Size)
	}
	r := v.hashes(ctx, cp)
	var out []translog.Entry
	for n := start / translog.TileWidth; n*translog.TileWidth < end; n++ {
		w := min(cp.Size-n*translog.TileWidth, translog.TileWidth)
		raw, err := v.c.logGet(ctx, "/log/"+translog.TilePath(tlog.Tile{H: translog.TileHeight, L: -1, N: n, W: int(w)}))
		if err != nil {
			return nil, err
		}
		bundle, err := translog.DecodeBundle(raw)
		if err != nil {
			return nil, err
		}
		if int64(len(bundle)) != w {
			return nil, fmt.Errorf("%w: entry bundle %d holds %d entries, want %d", ErrNotInLog, n, len(bundle), w)
		}
		for j, b := range bundle {
			i := n*translog.TileWidth + int64(j)
			if i < start || i >= end {
				continue
			}
			p, err := tlog.ProveRecord(cp.Size, i, r)
			if err == nil {
				err = tlog.CheckRecord(p, cp.Size, cp.Hash, i, tlog.RecordHash(b))
			}
			if err != nil {
				return nil, fmt.Errorf("%w: entry %d: %v", ErrNotInLog, i, err)
			}
			e, err := translog.Parse(b)
			if err == nil {
				err = e.Check()
			}
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// Entry returns entry i, as the answer of a write gave it in log_index, proved included in
// the latest checkpoint (read, and checked to extend the last one, first).
func (v *LogVerifier) Entry(ctx context.Context, i int64) (translog.Entry, error) {
	cp, err := v.Latest(ctx)
	if err != nil {
		return translog.Entry{}, err
	}
	es, err := v.Entries(ctx, cp, i, i+1)
	if err != nil {
		return translog.Entry{}, err
	}
	return es[0], nil
}

// tileReader reads the log's tiles over HTTP for tlog.TileHashReader, which checks them.
type tileReader struct {
	ctx context.Context
	c   *Client
}

func (r tileReader) Height() int { return translog.TileHeight }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		b, err := r.c.logGet(r.ctx, "/log/"+translog.TilePath(t))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}
