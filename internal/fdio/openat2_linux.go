package fdio

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNoOpenat2 is wrapped (with the errno) by Openat2InRoot's error where
// the kernel has no openat2 (ENOSYS) or a seccomp filter hides it (EPERM):
// the caller then resolves the path another way (pathrs-lite).
var ErrNoOpenat2 = errors.New("openat2 unavailable")

// openat2Tries bounds Openat2InRoot's retries. The kernel answers EAGAIN
// to a RESOLVE_IN_ROOT lookup that raced a rename or mount anywhere on the
// host, so a loop without a bound could be held by whoever renames.
const openat2Tries = 16

// Openat2InRoot opens rel below the directory dirfd with openat2(2)
// (O_CLOEXEC added) with RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS and the
// extra RESOLVE_ flags resolve, retrying EAGAIN and EINTR a bounded number
// of times. Its error is the bare errno, wrapped in ErrNoOpenat2 where the
// caller should fall back; the caller names the path.
func Openat2InRoot(dirfd int, rel string, flags int, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | resolve}
	var err error
	for range openat2Tries {
		var fd int
		if fd, err = unix.Openat2(dirfd, rel, &how); err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return -1, fmt.Errorf("%w: %w", ErrNoOpenat2, err)
	}
	return -1, err
}
