// Package testkit is what the tests of every package share: the published vectors of
// testdata/vectors read into one set of types, the documents of docs/ that tests hold to the
// code, deterministic Ed25519 keys (and random ones, for stores that outlive a test) and a
// scalar pushed past the group order, a clock a test moves by hand, a buffer that goroutines
// write to while the test reads it, workers that load a service until stopped and calls run
// all at once (Together), a loopback address no one listens on, and an HTTP round trip that
// fails the test when no whole answer comes back, and the switch that runs the heaviest load
// tests (Heavy). It imports only the standard library, so
// that the tests of the pure packages (didkey, canonical, authn, binding) may use it without
// a cycle.
package testkit
