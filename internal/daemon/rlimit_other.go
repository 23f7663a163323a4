//go:build !unix

package daemon

// raiseFileLimit has nothing to raise where there is no RLIMIT_NOFILE; 0 means unknown.
func raiseFileLimit() (uint64, error) { return 0, nil }
