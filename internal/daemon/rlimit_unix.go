//go:build unix

package daemon

import "syscall"

// raiseFileLimit raises the soft limit on open files to the hard limit, which is what a
// server holding one descriptor per connection needs, and returns the limit in force.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		want := l
		want.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return uint64(l.Cur), err
		}
		l = want
	}
	return uint64(l.Cur), nil
}
