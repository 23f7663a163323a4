// Package translog is the registry's transparency log as bytes: the entries that record each
// write a client trusts (a node key's registration under a DID, an operator DID's pin to its
// root key, a binding's acceptance and its end, a credential revocation), the checkpoints
// that commit to the log, and the tiles and entry bundles it is served as
// (docs/protocol.md §12).
//
// The log is an append-only Merkle tree hashed as RFC 6962 says, served as the C2SP
// specifications describe: a checkpoint is a tlog-checkpoint body (origin, tree size, base64
// root hash) in a signed-note signed with Ed25519; the log's hashes and entries are
// tlog-tiles of height 8. An entry carries the signed message it came from, so whoever reads
// the log can check each entry's signatures with no trust in the registry, and the
// checkpoint's signature and the Merkle proofs make every reader see the same log.
//
// It builds on golang.org/x/mod/sumdb/tlog and golang.org/x/mod/sumdb/note: the Go team
// maintains them for the checksum database every go command checks, they are exactly RFC
// 6962's hashing, the stored-hash layout, the hash tiles and the signed-note format this log
// needs, and they are small, with no dependency beyond the standard library. The C2SP tile
// paths differ from sumdb's (no height segment; entry bundles under "entries", each entry
// length-prefixed), so this package spells those itself.
//
// # What it does not do
//
// It does no I/O and reads no clock: [Append] and [ReadTile] work on whatever storage is
// passed to them (a store transaction in the registry), and the key is built from a seed the
// caller keeps. It does not decide which writes are logged, nor check what an entry's
// messages say against a registry's rules: the registry writes the entries and a monitor
// replays them.
package translog
