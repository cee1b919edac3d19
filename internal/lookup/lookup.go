package lookup

import (
	"errors"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// ErrNotFound is returned (wrapped) when the loader cache is not there.
var ErrNotFound = errors.New("not found")

// Resolve returns the host path of the in-root path p below root, with every
// symlink resolved inside root.
func Resolve(root, p string) (string, error) {
	return securejoin.SecureJoin(root, p)
}
