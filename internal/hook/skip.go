package hook

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// imageShaped reports whether err comes from the layout of the container
// image (or of the mounts its author or the pod author chose) rather than
// from the host: a path that is missing, dangling, a file where a directory
// is needed or the other way round, a magic link, a loop, on another mount,
// or read-only. The hook's one rule for those: warn and skip that change,
// and let the container start; the image's own loader configuration is
// then what its author left there. Anything else (an I/O error, a full
// disk, a bad container state) fails the hook.
func imageShaped(err error) bool {
	for _, target := range []error{
		unix.ENOENT, unix.ENOTDIR, unix.EISDIR, unix.ELOOP, unix.EXDEV, unix.EBUSY, unix.ENOTEMPTY,
		unix.EEXIST, unix.ENAMETOOLONG, unix.EROFS,
		fdio.ErrNotRegular, rootfs.ErrCrossesMount, ErrExists, fdio.ErrTooLarge, fdio.ErrKernelFS,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// skipImageShaped logs an image-shaped error (imageShaped) of the step as a
// warning and returns nil; other errors are returned as they are.
func skipImageShaped(o options, step string, err error) error {
	if err == nil || !imageShaped(err) {
		return err
	}
	o.log.Warnf("%s: skipped, the image's layout does not allow it (the container starts without this change): %v", step, err)
	return nil
}
