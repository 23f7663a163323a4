//go:build !linux

package badger

import (
	"errors"
	"os"
)

// Outside Linux the disk is not watched: the directory's identity and writability and the
// volume's free space are reported as fine.

func statDir(dir string) (dirID, error) {
	_, err := os.Stat(dir)
	return dirID{}, err
}

func dirWritable(string) error { return nil }

func freeSpace(string) (free, total uint64, err error) { return 1 << 62, 1 << 62, nil }

func allocated(string) uint64 { return 0 }

func dirLocked(string) error { return nil }

func isNoSpace(err error) bool { return false }

func isReadOnly(err error) bool { return errors.Is(err, os.ErrPermission) }

func isLocked(err error) bool { return false }
