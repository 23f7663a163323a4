// Package fuzz holds go test -fuzz targets for the svrp packages: identity parsing, key
// decoding, timestamps and the bytes of every signed message, and, as they land, the login,
// binding and HTTP layers.
//
// The package has no code of its own. Each target is seeded from the shared test vectors in
// testdata/vectors at the module root and from the corpus files in testdata/fuzz, so a plain
// `go test ./...` replays every seed as a regular test. README.md in this directory says how
// to run a target for real.
package fuzz
