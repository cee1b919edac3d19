package dra

import (
	"encoding/json"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// maxClaimRecord bounds the read of one prepared claim's record: a claim
// has at most 32 results (the API's limit), each a few hundred bytes.
const maxClaimRecord = 1 << 20

// writeRecord writes v as indented JSON to path, 0600 and atomically: a
// crash leaves the old record or the new one. Both the prepared claims'
// records and the re-layouts' are written so.
func writeRecord(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, append(data, '\n'), atomicfile.WithPerm(0o600))
}

// readRecord reads the JSON record at path into v: a regular file, no
// final link followed, at most limit bytes. The directory is the
// driver's own, but a record is read as untrusted input all the same.
func readRecord(path string, limit int64, v any) error {
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}
