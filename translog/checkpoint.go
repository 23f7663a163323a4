package translog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a commitment to the log at one size (C2SP tlog-checkpoint): its origin, the
// number of entries and the Merkle root hash of those entries.
type Checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
}

// ErrBadCheckpoint is a checkpoint that does not parse, is not signed by the log's key, or
// does not extend the one a client remembered.
var ErrBadCheckpoint = errors.New("translog: bad checkpoint")

func badCheckpoint(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadCheckpoint, fmt.Sprintf(format, args...))
}

// Text returns the checkpoint body: three LF-terminated lines, the origin, the size in
// decimal and the root hash in base64.
func (c Checkpoint) Text() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]))
}

// ParseCheckpoint reads a checkpoint body. Extension lines after the third are allowed
// and ignored, as the specification says.
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	var c Checkpoint
	body, ok := bytes.CutSuffix(text, []byte("\n"))
	if !ok {
		return c, badCheckpoint("does not end with a newline")
	}
	lines := strings.Split(string(body), "\n")
	if len(lines) < 3 {
		return c, badCheckpoint("%d lines, want at least 3", len(lines))
	}
	for _, l := range lines[3:] {
		if l == "" {
			return c, badCheckpoint("an empty extension line")
		}
	}
	c.Origin = lines[0]
	if c.Origin == "" {
		return c, badCheckpoint("no origin")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return c, badCheckpoint("size %q", lines[1])
	}
	c.Size = size
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != len(c.Hash) {
		return c, badCheckpoint("root hash %q", lines[2])
	}
	copy(c.Hash[:], h)
	return c, nil
}

// Key is the log's signing key: an Ed25519 key under a name, which is the origin line of
// every checkpoint it signs.
type Key struct {
	name string
	priv ed25519.PrivateKey
	hash uint32
}

// algEd25519 is the signed-note signature type of Ed25519.
const algEd25519 = 1

// NewKey returns the key made from seed under name. name must be a valid note key name: no
// space, no '+', not empty.
func NewKey(name string, seed [32]byte) (*Key, error) {
	if name == "" || strings.ContainsAny(name, "+ \t\n") || !isText(name) {
		return nil, fmt.Errorf("translog: %q is not a key name", name)
	}
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	return &Key{name: name, priv: priv, hash: keyHash(name, pub)}, nil
}

// keyHash is the signed-note key ID: the first four bytes of SHA-256(name, LF, type, key).
func keyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{algEd25519})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Name returns the key's name, the log's origin.
func (k *Key) Name() string { return k.name }

// KeyHash returns the key ID of the signed-note format.
func (k *Key) KeyHash() uint32 { return k.hash }

// Sign signs msg (note.Signer).
func (k *Key) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.priv, msg), nil }

// Verifier returns the verifier key text (name+hash+base64 of type and public key), which
// GET /log/key serves and a client pins.
func (k *Key) Verifier() string {
	vk, _ := note.NewEd25519VerifierKey(k.name, k.priv.Public().(ed25519.PublicKey))
	return vk
}

// SignCheckpoint returns c as a signed note. Ed25519 is deterministic, so every holder of
// the key signs the same checkpoint to the same bytes.
func (k *Key) SignCheckpoint(c Checkpoint) ([]byte, error) {
	if c.Origin != k.name {
		return nil, badCheckpoint("origin %q is not the key's name %q", c.Origin, k.name)
	}
	return note.Sign(&note.Note{Text: string(c.Text())}, k)
}

// OpenCheckpoint verifies a signed checkpoint with the verifier key vkey and returns it. The
// checkpoint's origin must be the key's name.
func OpenCheckpoint(signed []byte, vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("translog: verifier key: %w", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, badCheckpoint("%v", err)
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, badCheckpoint("origin %q is not the key's name %q", c.Origin, v.Name())
	}
	return c, nil
}
