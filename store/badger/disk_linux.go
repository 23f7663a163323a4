package badger

import (
	"errors"
	"os"
	"syscall"
)

func statDir(dir string) (dirID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return dirID{}, err
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// dirWritable asks the kernel whether dir may take new files. access(2) answers for a
// read-only mount and an immutable directory even to root, and writes nothing.
func dirWritable(dir string) error {
	return syscall.Access(dir, 2) // W_OK
}

// freeSpace returns the bytes an unprivileged writer may still use on dir's volume, and the
// volume's size.
func freeSpace(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// allocated returns the disk space a file occupies, which for a sparse file is less than
// its size.
func allocated(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return uint64(st.Blocks) * 512
}

// dirLocked fails when another process holds dir the way Badger holds it (flock on the
// directory), and releases its own lock at once.
func dirLocked(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return err
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func isReadOnly(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

func isLocked(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK)
}
