// Package testkit is what the tests of every package share: the published vectors of
// testdata/vectors read into one set of types, deterministic Ed25519 keys, and a clock a
// test moves by hand. It imports only the standard library, so that the tests of the pure
// packages (didkey, canonical, authn, binding) may use it without a cycle.
package testkit
